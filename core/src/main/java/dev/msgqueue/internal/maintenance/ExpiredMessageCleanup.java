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
 * that are gone.
 */
public final class ExpiredMessageCleanup {
  private static final Logger log = LoggerFactory.getLogger(ExpiredMessageCleanup.class);

  private final DSLContext ctx;
  private final MsgQueueConfig config;

  public ExpiredMessageCleanup(DSLContext ctx, MsgQueueConfig config) {
    this.ctx = ctx;
    this.config = config;
  }

  /** Runs batches until a batch comes back short; @return how many messages it deleted */
  public int deleteExpired() {
    int total = 0;
    int deleted;
    do {
      deleted = ctx.transactionResult(tx -> {
        SessionSettings.limitLockWaits(tx.dsl(), config.lockTimeout());
        return MaintenanceStatements.cleanUpExpiredMessages(tx.dsl(), config.cleanupBatchSize());
      });
      total += deleted;
    } while (deleted == config.cleanupBatchSize());
    if (total > 0) {
      log.debug("deleted {} expired message(s)", total);
    }
    deleteOrphanedFailures();
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
    do {
      deleted = MaintenanceStatements.deleteOrphanedFailures(ctx, config.cleanupBatchSize());
      total += deleted;
    } while (deleted == config.cleanupBatchSize());
    if (total > 0) {
      log.debug("deleted {} failure record(s) of messages that are gone", total);
    }
    return total;
  }

}
