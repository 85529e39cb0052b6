package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.select;

import dev.msgqueue.jooq.tables.MessageQueueItem;
import org.jooq.DSLContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The expired-message cleanup: deletes expired messages, orphans (whose queue was deleted) included, in batches of
 * {@link MsgQueueConfig#cleanupBatchSize()}, each batch its own transaction; then the failure records of messages
 * that are gone.
 */
final class ExpiredMessageCleanup {
  private static final Logger log = LoggerFactory.getLogger(ExpiredMessageCleanup.class);
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;

  private final DSLContext ctx;
  private final MsgQueueConfig config;

  ExpiredMessageCleanup(DSLContext ctx, MsgQueueConfig config) {
    this.ctx = ctx;
    this.config = config;
  }

  /** Runs batches until a batch comes back short; @return how many messages it deleted */
  int deleteExpired() {
    int total = 0;
    int deleted;
    do {
      deleted = ctx.transactionResult(tx -> {
        QueueStatements.limitLockWaits(tx.dsl(), config.lockTimeout());
        return deleteExpiredBatch(tx.dsl(), config.cleanupBatchSize());
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
  int deleteOrphanedFailures() {
    int total = 0;
    int deleted;
    do {
      deleted = RetryStatements.deleteOrphanedFailures(ctx, config.cleanupBatchSize());
      total += deleted;
    } while (deleted == config.cleanupBatchSize());
    if (total > 0) {
      log.debug("deleted {} failure record(s) of messages that are gone", total);
    }
    return total;
  }

  /**
   * Deletes up to {@code limit} expired messages (orphans with a NULL queue included). Locks: FOR UPDATE SKIP LOCKED
   * on the message rows, so rows a consumer holds (a claim, ack or nack in flight) are skipped, never waited for; no
   * lock on any queue row (deleting a referencing row needs none).
   */
  static int deleteExpiredBatch(DSLContext ctx, int limit) {
    var expired = I.as("expired");
    return ctx.deleteFrom(I)
        .where(I.ID.in(select(expired.ID)
            .from(expired)
            .where(expired.EXPIRES_AT.le(QueueStatements.utcNow()))
            .limit(limit)
            .forUpdate()
            .skipLocked()))
        .execute();
  }
}
