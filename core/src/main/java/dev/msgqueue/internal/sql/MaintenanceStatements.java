package dev.msgqueue.internal.sql;

import static dev.msgqueue.internal.sql.ServerTime.utcNow;
import static dev.msgqueue.internal.sql.ServerTime.utcNowMinus;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.jooq.impl.DSL.all;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.selectOne;
import static org.jooq.impl.DSL.val;

import dev.msgqueue.jooq.tables.MessageQueue;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import dev.msgqueue.jooq.tables.MessageQueueItemFailure;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record1;
import org.jooq.Select;
import org.jooq.SelectForUpdateOfStep;
import org.jooq.impl.DSL;

/**
 * The maintenance statements, with the locks each takes; none of them ever waits for a lock, so two housekeepers
 * working at once never wait for each other either.
 *
 * <ul>
 *   <li>The reaper, one transaction per batch of idle queues: {@link #lockIdleQueues} (FOR UPDATE SKIP LOCKED on the
 *       queue rows), {@link #cleanUpExpiredMessagesOf} (FOR UPDATE SKIP LOCKED on those queues' expired message rows),
 *       {@link #deleteEmptyQueues} (the locked queues no message references; the {@code ON DELETE SET NULL} cascade
 *       then locks nothing).
 *   <li>The cleanup: {@link #cleanUpExpiredMessages} (FOR UPDATE SKIP LOCKED on expired message rows, no queue-row
 *       lock) and {@link #deleteOrphanedFailures} (FOR UPDATE SKIP LOCKED on failure rows of messages that are gone).
 *   <li>The housekeeper's turn: {@link #tryAdvisoryLock}, a transaction-level advisory lock, never waited for.
 * </ul>
 */
public final class MaintenanceStatements {
  private static final MessageQueue Q = MESSAGE_QUEUE;
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;
  private static final MessageQueueItemFailure F = MESSAGE_QUEUE_ITEM_FAILURE;

  private MaintenanceStatements() { }

  /**
   * Step 1's query: up to {@code limit} auto-deleted, non-durable queues idle since before now -
   * {@code idleThreshold} that appear to hold no unexpired message, FOR UPDATE (the reaper adds SKIP LOCKED; tests
   * leave it out to hold a window open).
   */
  public static SelectForUpdateOfStep<Record1<String>> idleQueues(DSLContext ctx, Duration idleThreshold, int limit) {
    return idleQueues(ctx, idleThreshold, limit, DSL.noCondition());
  }
  private static SelectForUpdateOfStep<Record1<String>> idleQueues(
      DSLContext ctx, Duration idleThreshold, int limit, Condition also) {
    return ctx.select(Q.NAME)
        .from(Q)
        .where(Q.AUTO_DELETED.isTrue())
        // A durable queue is never reaped, even when another service wrote its row auto-deleted as well.
        .and(Q.DURABLE.isFalse())
        .and(Q.LAST_ACTIVE.lt(utcNowMinus(idleThreshold)))
        .and(also)
        .andNotExists(liveMessagesOf(Q.NAME))
        .orderBy(Q.LAST_ACTIVE)
        .limit(limit)
        .forUpdate();
  }
  /** Step 1: FOR UPDATE SKIP LOCKED on up to {@code limit} idle queue rows; never waits. */
  public static List<String> lockIdleQueues(DSLContext ctx, Duration idleThreshold, int limit) {
    return lockIdleQueues(ctx, idleThreshold, limit, Set.of());
  }
  public static List<String> lockIdleQueues(
      DSLContext ctx, Duration idleThreshold, int limit, Collection<String> except) {
    Condition notExcepted = except.isEmpty() ? DSL.noCondition() : Q.NAME.ne(all(except.toArray(new String[0])));
    return idleQueues(ctx, idleThreshold, limit, notExcepted).skipLocked().fetch(Q.NAME);
  }
  public static List<String> lockIdleQueue(DSLContext ctx, String queue, Duration idleThreshold) {
    return idleQueues(ctx, idleThreshold, 1, Q.NAME.eq(queue)).skipLocked().fetch(Q.NAME);
  }
  /**
   * Step 2: deletes up to {@code limit} expired messages of the locked queues, FOR UPDATE SKIP LOCKED: a message row a
   * consumer holds is skipped (its queue then stays referenced and is kept by step 3).
   *
   * @return how many it deleted
   */
  public static int cleanUpExpiredMessagesOf(DSLContext ctx, Collection<String> lockedQueues, int limit) {
    var expired = I.as("expired");
    return ctx.deleteFrom(I)
        .where(I.ID.in(select(expired.ID)
            .from(expired)
            .where(expired.QUEUE_ID.in(lockedQueues))
            .and(expired.EXPIRES_AT.le(utcNow()))
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
  public static List<String> deleteEmptyQueues(DSLContext ctx, Collection<String> lockedQueues) {
    return ctx.deleteFrom(Q)
        .where(Q.NAME.in(lockedQueues))
        .andNotExists(selectOne().from(I).where(I.QUEUE_ID.eq(Q.NAME)))
        .returning(Q.NAME)
        .fetch(Q.NAME);
  }
  private static Select<?> liveMessagesOf(Field<String> queueName) {
    return selectOne().from(I).where(I.QUEUE_ID.eq(queueName))
        .and(I.EXPIRES_AT.isNull().or(I.EXPIRES_AT.gt(utcNow())));
  }
  /**
   * Deletes up to {@code limit} expired messages (orphans with a NULL queue included). Locks: FOR UPDATE SKIP LOCKED
   * on the message rows, so rows a consumer holds (a claim, ack or release in flight) are skipped, never waited for; no
   * lock on any queue row (deleting a referencing row needs none).
   */
  public static int cleanUpExpiredMessages(DSLContext ctx, int limit) {
    var expired = I.as("expired");
    return ctx.deleteFrom(I)
        .where(I.ID.in(select(expired.ID)
            .from(expired)
            .where(expired.EXPIRES_AT.le(utcNow()))
            .limit(limit)
            .forUpdate()
            .skipLocked()))
        .execute();
  }
  /**
   * Deletes up to {@code limit} failure rows whose item is gone (acked, expired and cleaned up, dead letter
   * consumed). There is no foreign key to cascade the delete (see the changeset): this is what keeps the table small.
   * Locks: FOR UPDATE SKIP LOCKED on the failure rows, so two cleanups running at once (overlapping housekeeper ticks)
   * delete disjoint rows and never wait for, or deadlock with, each other.
   *
   * @return how many it deleted
   */
  public static int deleteOrphanedFailures(DSLContext ctx, int limit) {
    MessageQueueItemFailure orphan = F.as("orphan");
    return ctx.deleteFrom(F)
        .where(F.ITEM_ID.in(select(orphan.ITEM_ID)
            .from(orphan)
            .whereNotExists(selectOne().from(I).where(I.ID.eq(orphan.ITEM_ID)))
            .limit(limit)
            .forUpdate()
            .skipLocked()))
        .execute();
  }
  /**
   * Takes the housekeeping lock for the current transaction if it is free: {@code pg_try_advisory_xact_lock(key)}
   * returns at once, true if this transaction now holds the lock, false if another does. Ending the transaction
   * releases it.
   *
   * <p>Then {@code SET LOCAL transaction_read_only = true} (the transaction only holds the lock; the jobs write on
   * other connections). Being a utility statement, it replaces the driver's unnamed portal of the lock query, which
   * would otherwise stay open, idle in transaction, for the whole tick with its snapshot: that snapshot holds back the
   * database's xmin horizon, so nothing deleted during the tick (the reaped queues, the expired and the acked
   * messages of every queue) can be pruned, and each reaper batch walks the index entries of every queue reaped
   * before it in the tick.
   */
  public static boolean tryAdvisoryLock(DSLContext tx, long key) {
    boolean locked = tx.select(function("pg_try_advisory_xact_lock", Boolean.class, val(key))).fetchSingle().value1();
    tx.setLocal(name("transaction_read_only"), inline(true)).execute();
    return locked;
  }
}
