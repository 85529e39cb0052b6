package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.all;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.selectOne;

import dev.msgqueue.jooq.tables.MessageQueue;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record1;
import org.jooq.Select;
import org.jooq.SelectForUpdateOfStep;
import org.jooq.impl.DSL;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The reaper: deletes auto-deleted queues idle for longer than {@link MsgQueueConfig#reapIdleThreshold()} that hold
 * no unexpired message, in batches of {@link MsgQueueConfig#reapBatchSize()}, each batch one short transaction of
 * three statements, none of which ever waits for a lock:
 *
 * <ol>
 *   <li>{@link #lockIdleQueues}: FOR UPDATE SKIP LOCKED on the candidate queue rows. It skips any queue an in-flight
 *       publish (KEY SHARE, taken by the foreign-key check) or keep-alive (NO KEY UPDATE) holds. From here until the
 *       commit no message can be added to a locked queue: its insert needs the KEY SHARE lock this one excludes.
 *   <li>{@link #deleteExpiredMessagesOf}: FOR UPDATE SKIP LOCKED on those queues' expired message rows, deleting
 *       them. Rows a consumer holds (a claim, ack or nack in flight) are skipped, never waited for.
 *   <li>{@link #deleteEmptyQueues}: deletes those locked queues that no message references at all (the queue rows are
 *       already this transaction's). So the foreign key's {@code ON DELETE SET NULL} has no message row to update and
 *       takes no message-row lock; a queue still referenced (a message a consumer holds, or one committed since step
 *       1's snapshot) is kept and tried again on the next run.
 * </ol>
 *
 * A batch that fails (anything but a lost connection) is retried queue by queue, each in its own transaction, so one
 * queue that cannot be reaped never holds back the others; that queue is logged and left for the next run.
 */
final class IdleQueueReaper {
  private static final Logger log = LoggerFactory.getLogger(IdleQueueReaper.class);
  private static final MessageQueue Q = MESSAGE_QUEUE;
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;
  /** How many held-back queues one run remembers (and excludes from its later batches) before it stops. */
  static final int MAX_HELD_BACK = 10_000;

  private final DSLContext ctx;
  private final MsgQueueConfig config;

  IdleQueueReaper(DSLContext ctx, MsgQueueConfig config) {
    this.ctx = ctx;
    this.config = config;
  }

  /** Runs batches until none is left; @return the names of the queues deleted */
  List<String> reap() {
    List<String> reaped = new ArrayList<>();
    // Queues chosen in this run but kept (still referenced, or failed): later batches of the run look past them.
    Set<String> heldBack = new HashSet<>();
    while (true) {
      List<String> locked = new ArrayList<>();
      List<String> deleted;
      try {
        deleted = ctx.transactionResult(tx -> {
          QueueStatements.limitLockWaits(tx.dsl(), config.lockTimeout());
          locked.addAll(lockIdleQueues(tx.dsl(), config.reapIdleThreshold(), config.reapBatchSize(), heldBack));
          return deleteLocked(tx.dsl(), locked);
        });
      } catch (MsgQueueConnectionException e) {
        throw e;
      } catch (RuntimeException e) {
        if (locked.isEmpty()) {
          throw e;
        }
        log.warn("a reaper batch of {} queue(s) failed ({}); reaping them one by one", locked.size(), e.toString());
        deleted = reapOneByOne(locked);
      }
      int chosen = locked.size();
      reaped.addAll(deleted);
      locked.removeAll(deleted);
      heldBack.addAll(locked);
      // A short batch means no idle queue is left; a full one may mean more, past the ones held back so far.
      if (chosen < config.reapBatchSize() || heldBack.size() >= MAX_HELD_BACK) {
        break;
      }
    }
    if (!reaped.isEmpty()) {
      log.info("reaped {} idle auto-deleted queue(s)", reaped.size());
      log.debug("reaped queues: {}", reaped);
    }
    if (!heldBack.isEmpty()) {
      log.debug("kept {} idle queue(s) still referenced by messages in use, until the next run", heldBack.size());
    }
    return reaped;
  }

  private List<String> reapOneByOne(List<String> queues) {
    List<String> deleted = new ArrayList<>();
    for (String queue : queues) {
      try {
        deleted.addAll(ctx.transactionResult(tx -> {
          QueueStatements.limitLockWaits(tx.dsl(), config.lockTimeout());
          return deleteLocked(tx.dsl(), lockIdleQueue(tx.dsl(), queue, config.reapIdleThreshold()));
        }));
      } catch (MsgQueueConnectionException e) {
        throw e;
      } catch (RuntimeException e) {
        log.warn("could not reap idle queue \"{}\"; it is tried again on the next run", queue, e);
      }
    }
    return deleted;
  }

  /** Steps 2 and 3 for the queues step 1 locked in this transaction. @return the queues deleted */
  private List<String> deleteLocked(DSLContext tx, List<String> locked) {
    if (locked.isEmpty()) {
      return List.of();
    }
    deleteExpiredMessagesOf(tx, locked, config.cleanupBatchSize());
    return deleteEmptyQueues(tx, locked);
  }

  /**
   * Step 1's query: up to {@code limit} auto-deleted queues idle since before now - {@code idleThreshold} that appear
   * to hold no unexpired message, FOR UPDATE (the reaper adds SKIP LOCKED; tests leave it out to hold a window open).
   */
  static SelectForUpdateOfStep<Record1<String>> idleQueues(DSLContext ctx, Duration idleThreshold, int limit) {
    return idleQueues(ctx, idleThreshold, limit, DSL.noCondition());
  }

  private static SelectForUpdateOfStep<Record1<String>> idleQueues(
      DSLContext ctx, Duration idleThreshold, int limit, Condition also) {
    return ctx.select(Q.NAME)
        .from(Q)
        .where(Q.AUTO_DELETED.isTrue())
        .and(Q.LAST_ACTIVE.lt(QueueStatements.utcNowMinus(idleThreshold)))
        .and(also)
        .andNotExists(liveMessagesOf(Q.NAME))
        .orderBy(Q.LAST_ACTIVE)
        .limit(limit)
        .forUpdate();
  }

  /** Step 1: FOR UPDATE SKIP LOCKED on up to {@code limit} idle queue rows; never waits. */
  static List<String> lockIdleQueues(DSLContext ctx, Duration idleThreshold, int limit) {
    return lockIdleQueues(ctx, idleThreshold, limit, Set.of());
  }

  private static List<String> lockIdleQueues(
      DSLContext ctx, Duration idleThreshold, int limit, Collection<String> except) {
    Condition notExcepted = except.isEmpty() ? DSL.noCondition() : Q.NAME.ne(all(except.toArray(new String[0])));
    return idleQueues(ctx, idleThreshold, limit, notExcepted).skipLocked().fetch(Q.NAME);
  }

  private static List<String> lockIdleQueue(DSLContext ctx, String queue, Duration idleThreshold) {
    return idleQueues(ctx, idleThreshold, 1, Q.NAME.eq(queue)).skipLocked().fetch(Q.NAME);
  }

  /**
   * Step 2: deletes up to {@code limit} expired messages of the locked queues, FOR UPDATE SKIP LOCKED: a message row a
   * consumer holds is skipped (its queue then stays referenced and is kept by step 3).
   *
   * @return how many it deleted
   */
  static int deleteExpiredMessagesOf(DSLContext ctx, Collection<String> lockedQueues, int limit) {
    var expired = I.as("expired");
    return ctx.deleteFrom(I)
        .where(I.ID.in(select(expired.ID)
            .from(expired)
            .where(expired.QUEUE_ID.in(lockedQueues))
            .and(expired.EXPIRES_AT.le(QueueStatements.utcNow()))
            .limit(limit)
            .forUpdate()
            .skipLocked()))
        .execute();
  }

  /**
   * Step 3, in the same transaction as step 1 but a later statement, hence a newer snapshot: deletes those of the
   * locked queues that no message references. A message committed after step 1's snapshot is visible here and keeps
   * its queue; one not yet committed cannot exist, because its publish needs the KEY SHARE lock step 1 excludes.
   * With no referencing row, the cascade ({@code ON DELETE SET NULL}) updates and locks no message row.
   */
  static List<String> deleteEmptyQueues(DSLContext ctx, Collection<String> lockedQueues) {
    return ctx.deleteFrom(Q)
        .where(Q.NAME.in(lockedQueues))
        .andNotExists(selectOne().from(I).where(I.QUEUE_ID.eq(Q.NAME)))
        .returning(Q.NAME)
        .fetch(Q.NAME);
  }

  private static Select<?> liveMessagesOf(Field<String> queueName) {
    return selectOne().from(I).where(I.QUEUE_ID.eq(queueName))
        .and(I.EXPIRES_AT.isNull().or(I.EXPIRES_AT.gt(QueueStatements.utcNow())));
  }
}
