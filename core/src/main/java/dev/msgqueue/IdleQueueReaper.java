package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.selectOne;

import dev.msgqueue.jooq.tables.MessageQueue;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record1;
import org.jooq.Select;
import org.jooq.SelectForUpdateOfStep;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The reaper: deletes auto-deleted queues idle for longer than {@link MsgQueueConfig#reapIdleThreshold()} that hold
 * no unexpired message, in batches of {@link MsgQueueConfig#reapBatchSize()}, each batch its own transaction.
 */
final class IdleQueueReaper {
  private static final Logger log = LoggerFactory.getLogger(IdleQueueReaper.class);
  private static final MessageQueue Q = MESSAGE_QUEUE;
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;

  private final DSLContext ctx;
  private final MsgQueueConfig config;

  IdleQueueReaper(DSLContext ctx, MsgQueueConfig config) {
    this.ctx = ctx;
    this.config = config;
  }

  /** Runs batches until none is left; @return the names of the queues deleted */
  List<String> reap() {
    List<String> reaped = new ArrayList<>();
    while (true) {
      Batch batch = ctx.transactionResult(tx -> {
        QueueStatements.limitLockWaits(tx.dsl(), config.lockTimeout());
        List<String> locked = lockIdleQueues(tx.dsl(), config.reapIdleThreshold(), config.reapBatchSize());
        List<String> deleted = locked.isEmpty() ? List.of() : deleteQueuesWithoutLiveItems(tx.dsl(), locked);
        return new Batch(locked.size(), deleted);
      });
      reaped.addAll(batch.deleted());
      // A full batch may mean more idle queues; a batch that deleted nothing means the rest are held back by
      // messages committed since its first statement, and looping would only find them again.
      if (batch.locked() < config.reapBatchSize() || batch.deleted().isEmpty()) {
        break;
      }
    }
    if (!reaped.isEmpty()) {
      log.info("reaped {} idle auto-deleted queue(s)", reaped.size());
      log.debug("reaped queues: {}", reaped);
    }
    return reaped;
  }

  /**
   * Step 1: selects up to {@code limit} auto-deleted queues idle since before now - {@code idleThreshold} that appear
   * to hold no unexpired message, FOR UPDATE (without SKIP LOCKED: tests use it to hold a window open).
   */
  static SelectForUpdateOfStep<Record1<String>> idleQueues(DSLContext ctx, Duration idleThreshold, int limit) {
    return ctx.select(Q.NAME)
        .from(Q)
        .where(Q.AUTO_DELETED.isTrue())
        .and(Q.LAST_ACTIVE.lt(QueueStatements.utcNowMinus(idleThreshold)))
        .andNotExists(liveMessagesOf(Q.NAME))
        .orderBy(Q.LAST_ACTIVE)
        .limit(limit)
        .forUpdate();
  }

  /**
   * Step 1 as the reaper runs it: FOR UPDATE SKIP LOCKED on the queue rows, so it skips any queue that an in-flight
   * publish (KEY SHARE) or keep-alive (NO KEY UPDATE) holds, and never waits.
   */
  static List<String> lockIdleQueues(DSLContext ctx, Duration idleThreshold, int limit) {
    return idleQueues(ctx, idleThreshold, limit).skipLocked().fetch(Q.NAME);
  }

  /**
   * Step 2, in the same transaction as step 1 but a later statement, hence a newer snapshot: deletes those of the
   * locked queues that still hold no unexpired message. A message committed after step 1's snapshot is visible here;
   * one not yet committed cannot commit at all, because its publish needs the KEY SHARE lock step 1 holds.
   */
  static List<String> deleteQueuesWithoutLiveItems(DSLContext ctx, Collection<String> lockedQueues) {
    return ctx.deleteFrom(Q)
        .where(Q.NAME.in(lockedQueues))
        .andNotExists(liveMessagesOf(Q.NAME))
        .returning(Q.NAME)
        .fetch(Q.NAME);
  }

  private static Select<?> liveMessagesOf(Field<String> queueName) {
    return selectOne().from(I).where(I.QUEUE_ID.eq(queueName))
        .and(I.EXPIRES_AT.isNull().or(I.EXPIRES_AT.gt(QueueStatements.utcNow())));
  }

  private record Batch(int locked, List<String> deleted) { }
}
