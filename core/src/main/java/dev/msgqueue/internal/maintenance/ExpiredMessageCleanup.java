package dev.msgqueue.internal.maintenance;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.internal.sql.MaintenanceStatements;
import dev.msgqueue.internal.sql.SessionSettings;
import org.jooq.DSLContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The expired-message cleanup: deletes expired messages, orphans (whose queue was deleted) included, in batches of
 * {@link MsgQueueConfig#cleanupBatchSize()}, each batch its own transaction; then the failure records of messages
 * that are gone. Batches are paced to {@link MsgQueueConfig#maintenanceDutyCycle()}.
 */
public final class ExpiredMessageCleanup {
  private static final Logger log = LoggerFactory.getLogger(ExpiredMessageCleanup.class);

  private final DSLContext ctx;
  private final MsgQueueConfig config;
  private final BatchPacing pacing;

  public ExpiredMessageCleanup(DSLContext ctx, MsgQueueConfig config) {
    this(ctx, config, new BatchPacing(config.maintenanceDutyCycle()));
  }

  ExpiredMessageCleanup(DSLContext ctx, MsgQueueConfig config, BatchPacing pacing) {
    this.ctx = ctx;
    this.config = config;
    this.pacing = pacing;
  }

  /**
   * Runs batches until a batch comes back short, or the thread is interrupted between batches.
   *
   * @return how many messages it deleted
   */
  public int deleteExpired() {
    int total = 0;
    int deleted;
    boolean more;
    do {
      long batchStart = pacing.batchStarts();
      deleted = ctx.transactionResult(tx -> {
        SessionSettings.limitLockWaits(tx.dsl(), config.lockTimeout());
        return MaintenanceStatements.cleanUpExpiredMessages(tx.dsl(), config.cleanupBatchSize());
      });
      total += deleted;
      more = deleted == config.cleanupBatchSize() && pacing.pauseAfter(batchStart);
    } while (more);
    if (total > 0) {
      log.debug("deleted {} expired message(s)", total);
    }
    if (!Thread.currentThread().isInterrupted()) {
      deleteOrphanedFailures();
    }
    return total;
  }

  /**
   * Deletes the failure records (retry counts, dead-letter details in {@code "MessageQueueItemFailure"}) of messages
   * that are gone: acked, expired and deleted above, or consumed from a dead-letter queue. The table has no foreign key
   * that would cascade (it would cost every ack a trigger per message), so this is what keeps it small.
   */
  private int deleteOrphanedFailures() {
    int total = 0;
    int deleted;
    boolean more;
    do {
      long batchStart = pacing.batchStarts();
      deleted = MaintenanceStatements.deleteOrphanedFailures(ctx, config.cleanupBatchSize());
      total += deleted;
      more = deleted == config.cleanupBatchSize() && pacing.pauseAfter(batchStart);
    } while (more);
    if (total > 0) {
      log.debug("deleted {} failure record(s) of messages that are gone", total);
    }
    return total;
  }

}
