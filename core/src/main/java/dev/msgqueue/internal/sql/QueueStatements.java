package dev.msgqueue.internal.sql;

import static dev.msgqueue.internal.sql.ServerTime.utcNow;
import static dev.msgqueue.internal.sql.ServerTime.utcNowMinus;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static org.jooq.impl.DSL.noCondition;
import static org.jooq.impl.DSL.select;

import dev.msgqueue.QueueSpec;
import dev.msgqueue.jooq.tables.MessageQueue;
import dev.msgqueue.jooq.tables.records.MessageQueueRecord;
import java.time.Duration;
import java.util.function.Function;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.InsertOnDuplicateSetMoreStep;
import org.jooq.UpdateConditionStep;

/**
 * The statements on the queue row ({@code "MessageQueue"}), with the locks each takes (the lock table of every
 * statement is in docs/design.md):
 *
 * <ul>
 *   <li>{@link #keepAliveIfStale} and {@link #keepAlive}: FOR NO KEY UPDATE on the queue row, SKIP LOCKED: compatible
 *       with publishers' KEY SHARE, and never waits for another keep-alive writer or for the reaper.
 *   <li>{@link #createOrKeepAlive} and {@link #bind}: an upsert, NO KEY UPDATE on an existing row.
 *   <li>{@link #queueExists}: a plain read, no lock.
 * </ul>
 */
public final class QueueStatements {
  private static final MessageQueue Q = MESSAGE_QUEUE;

  private QueueStatements() { }

  /**
   * Creates the queue with {@code spec}'s attributes, or, if it exists, only writes its {@code "lastActive"}: the heal
   * of a publish in a caller's transaction, run in autocommit on the repository's own connection. An upsert, NO KEY
   * UPDATE on an existing row for the statement's duration.
   */
  public static int createOrKeepAlive(DSLContext ctx, QueueSpec spec) {
    return upsertQueue(ctx, spec, false).execute();
  }

  /** Creates the queue, or updates all its attributes, and sets {@code "lastActive"}. */
  public static int bind(DSLContext ctx, QueueSpec spec) {
    return upsertQueue(ctx, spec, true).execute();
  }

  /** The queue upsert; the heal's statement ({@link PublishStatements#healAndInsertItems}) embeds it. */
  static InsertOnDuplicateSetMoreStep<MessageQueueRecord> upsertQueue(
      DSLContext ctx, QueueSpec spec, boolean overwriteAttributes) {
    var upsert = ctx.insertInto(Q)
        .set(Q.NAME, spec.name())
        .set(Q.DURABLE, spec.durable())
        .set(Q.AUTO_DELETED, spec.autoDeleted())
        .set(Q.EXCLUSIVE, spec.exclusive())
        .set(Q.EXCLUSIVE_CONSUMER_ID, spec.exclusiveConsumerId())
        .set(Q.LAST_ACTIVE, utcNow())
        .onConflict(Q.NAME)
        .doUpdate()
        .set(Q.LAST_ACTIVE, utcNow());
    if (overwriteAttributes) {
      upsert = upsert
          .set(Q.DURABLE, spec.durable())
          .set(Q.AUTO_DELETED, spec.autoDeleted())
          .set(Q.EXCLUSIVE, spec.exclusive())
          .set(Q.EXCLUSIVE_CONSUMER_ID, spec.exclusiveConsumerId());
    }
    return upsert;
  }

  /**
   * The keep-alive write: sets {@code "lastActive"} if it is older than {@code maxAge} (so several replicas write
   * the row at most once per interval between them). It locks the row FOR NO KEY UPDATE SKIP LOCKED: if another
   * keep-alive or the reaper holds the row, it writes nothing instead of waiting.
   *
   * @return 1 if it wrote the row, else 0
   */
  public static int keepAliveIfStale(DSLContext ctx, String queue, Duration maxAge) {
    return keepAliveIfStaleUpdate(ctx, queue, maxAge).execute();
  }

  /**
   * The {@link #keepAliveIfStale} statement, unexecuted: the autocommit publish embeds it in its insert
   * ({@link PublishStatements#insertItemsKeepingAlive}).
   */
  static UpdateConditionStep<MessageQueueRecord> keepAliveIfStaleUpdate(
      DSLContext ctx, String queue, Duration maxAge) {
    return keepAliveUpdate(ctx, queue,
        row -> row.LAST_ACTIVE.isNull().or(row.LAST_ACTIVE.lt(utcNowMinus(maxAge))));
  }

  /** Like {@link #keepAliveIfStale} whatever the row's age: a consumer's explicit keep-alive. */
  public static int keepAlive(DSLContext ctx, String queue) {
    return keepAliveUpdate(ctx, queue, row -> noCondition()).execute();
  }

  private static UpdateConditionStep<MessageQueueRecord> keepAliveUpdate(
      DSLContext ctx, String queue, Function<MessageQueue, Condition> due) {
    MessageQueue locked = Q.as("locked");
    return ctx.update(Q)
        .set(Q.LAST_ACTIVE, utcNow())
        .where(Q.NAME.in(select(locked.NAME)
            .from(locked)
            .where(locked.NAME.eq(queue))
            .and(due.apply(locked))
            .forNoKeyUpdate()
            .skipLocked()));
  }

  /** Whether the queue row exists; a plain read that takes no lock and waits for none. */
  public static boolean queueExists(DSLContext ctx, String queue) {
    return ctx.fetchExists(Q, Q.NAME.eq(queue));
  }
}
