package dev.msgqueue.internal.sql;

import static dev.msgqueue.internal.sql.ServerTime.epochMillis;
import static dev.msgqueue.internal.sql.ServerTime.utcNow;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.jooq.impl.DSL.any;
import static org.jooq.impl.DSL.coalesce;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.val;
import static org.jooq.impl.DSL.when;

import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import dev.msgqueue.jooq.tables.MessageQueueItemFailure;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.jooq.CommonTableExpression;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.JSONB;
import org.jooq.Record1;
import org.jooq.Record4;
import org.jooq.ResultQuery;
import org.jooq.impl.SQLDataType;

/**
 * The statements of the held-transaction mode, run inside the transaction that holds the messages, with the locks
 * each takes:
 *
 * <ul>
 *   <li>{@link #lock}: FOR UPDATE SKIP LOCKED on up to a batch of claimable PENDING items, as the take's search; it
 *       writes nothing (a row lock sets the row's {@code xmax} in place: no new row version, no index entry), and
 *       competing consumers skip the locked rows until the transaction ends. Committed with the items' deletion, or
 *       ended without commit (rolled back, the session ended), after which the items are claimable at once.
 *   <li>{@link #delete}: DELETE of the items this transaction locked; no other lock, no wait.
 * </ul>
 *
 * Neither touches {@code "MessageQueue"}: the queue row is never locked by consumers.
 */
public final class HeldStatements {
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;
  private static final MessageQueueItemFailure F = MESSAGE_QUEUE_ITEM_FAILURE;
  private static final long EPOCH = 1L << 32;
  private static final String LIMITS = "limits";

  private HeldStatements() { }

  /**
   * An item this transaction locked.
   *
   * @param expiresAtMillis its {@code "expiresAt"} in {@link ServerTime#epochMillis(Field) milliseconds}
   * @param endedWithoutCommit whether the last transaction that locked it ended without commit (it died, was ended by
   *     the server, or rolled back): a delivery that ended without a result, which the crash count counts
   */
  public record Locked(long id, JSONB payload, long expiresAtMillis, boolean endedWithoutCommit) { }

  /**
   * Locks up to {@code max} claimable PENDING items of {@code queue}, lowest id first, FOR UPDATE SKIP LOCKED, and
   * bounds the transaction it runs in: {@code idle_in_transaction_session_timeout} (and, on PostgreSQL 17 and later,
   * {@code transaction_timeout}) of {@code transactionTimeout}, set for this transaction only, so a client that hangs
   * or dies while holding the items has its session ended by the server and the items come back.
   *
   * <p>Each item also comes with whether the transaction that locked it before ended without commit: a row lock
   * leaves that transaction's id in the row's {@code xmax}, which the lock returns as it was before this lock, and
   * {@code pg_xact_status} says {@code aborted} for a transaction that rolled back or died. The mode commits every
   * transaction that lets items go unhandled (a release, a close, an early end), so {@code aborted} is a delivery that
   * ended without a result. The 32-bit {@code xmax} is widened to a full id against the snapshot's next id; an id more
   * than 2^31 behind it, or a row whose {@code xmax} is not a plain transaction id, reads as not ended.
   *
   * <p>Shape: {@code WITH limits AS MATERIALIZED (SELECT set_config(...), ...) SELECT id, payload, "expiresAt",
   * <ended> FROM "MessageQueueItem", limits WHERE <the take's condition> ORDER BY id LIMIT n FOR UPDATE OF
   * "MessageQueueItem" SKIP LOCKED}: the limits are set once per statement, even when nothing is found; the limit is
   * inlined, as in the take.
   *
   * @return the locked items, in id order
   */
  public static List<Locked> lock(DSLContext tx, String queue, int max, Duration transactionTimeout) {
    String limit = transactionTimeout.toMillis() + "ms";
    List<Locked> locked = new ArrayList<>(Math.min(max, 1_000));
    var rendered = RenderedStatements.resultQuery(tx, new LockShape(max),
            () -> lockQuery(tx, queue, max, limit), limit, limit, queue)
        .coerce(I.ID, I.PAYLOAD, field(name("expiresAtMillis"), SQLDataType.BIGINT),
            field(name("endedWithoutCommit"), SQLDataType.BOOLEAN));
    for (Record4<Long, JSONB, Long, Boolean> r : rendered.fetch()) {
      locked.add(new Locked(r.value1(), r.value2(), r.value3(), Boolean.TRUE.equals(r.value4())));
    }
    return locked;
  }

  /** What the lock's text depends on besides its bind values. */
  private record LockShape(int max) { }

  /** The statement {@link #lock} runs. */
  public static ResultQuery<Record4<Long, JSONB, Long, Boolean>> lockQuery(
      DSLContext tx, String queue, int max, String limit) {
    Field<String> limitText = val(limit);
    CommonTableExpression<?> limits = name(LIMITS).fields("idle", "total").asMaterialized(select(
        function("set_config", SQLDataType.VARCHAR, inline("idle_in_transaction_session_timeout"), limitText,
            inline(true)),
        when(function("current_setting", SQLDataType.VARCHAR, inline("transaction_timeout"), inline(true)).isNotNull(),
            function("set_config", SQLDataType.VARCHAR, inline("transaction_timeout"), limitText, inline(true)))));
    return tx.with(limits)
        .select(I.ID, I.PAYLOAD, epochMillis(I.EXPIRES_AT), endedWithoutCommit())
        .from(I, limits)
        .where(claimable(queue))
        .orderBy(I.ID)
        .limit(inline(max))
        .forUpdate()
        .of(I)
        .skipLocked();
  }

  /**
   * Locks again those of {@code ids} that are still claimable PENDING items of {@code queue} (another consumer may
   * have taken or released some meanwhile), FOR UPDATE SKIP LOCKED: after a batch was rolled back, to handle its
   * messages one transaction each.
   *
   * @return the locked items, in id order; their {@code endedWithoutCommit} is false (the batch's own rollback)
   */
  public static List<Locked> lockAgain(DSLContext tx, String queue, Collection<Long> ids) {
    List<Locked> locked = new ArrayList<>(ids.size());
    for (var r : tx.select(I.ID, I.PAYLOAD, epochMillis(I.EXPIRES_AT))
        .from(I)
        .where(I.ID.eq(any(ids.toArray(Long[]::new))))
        .and(claimable(queue))
        .orderBy(I.ID)
        .forUpdate()
        .skipLocked()
        .fetch()) {
      locked.add(new Locked(r.value1(), r.value2(), r.value3(), false));
    }
    return locked;
  }

  /**
   * Quarantines items this transaction locked whose last delivery ended without commit: ASSIGNED, readable now. The
   * batch lock takes PENDING items only, so a quarantined item is handled only by {@link #lockQuarantined}, alone;
   * the mark is in the row, so every consumer of the queue, in any process, sees it. @return how many
   */
  public static int quarantine(DSLContext tx, Collection<Long> ids) {
    return tx.update(I)
        .set(I.STATUS, inline(MessageQueueItemStatus.ASSIGNED))
        .set(I.READ_AFTER, utcNow())
        .where(I.ID.eq(any(idArray(ids))))
        .execute();
  }

  /**
   * Locks the lowest claimable quarantined item of {@code queue} (ASSIGNED, readable now, not expired), FOR UPDATE SKIP
   * LOCKED, with whether the last transaction that locked it ended without commit, as {@link #lock} does: a search of
   * the queue (no index leads with the status), for items a consumer that died quarantined.
   *
   * @return the item, or empty if none is there
   */
  public static java.util.Optional<Locked> lockQuarantined(DSLContext tx, String queue) {
    return lockLowestQuarantined(tx, I.QUEUE_ID.eq(queue));
  }

  /**
   * Locks the lowest claimable quarantined item among {@code ids} (items this subscriber quarantined), FOR UPDATE SKIP
   * LOCKED, with whether the last transaction that locked it ended without commit, as {@link #lock} does. Found
   * through the primary key, so its cost does not grow with the queue's backlog, where {@link #lockQuarantined(
   * DSLContext, String)} searches the queue.
   *
   * @return the item, or empty if none of {@code ids} is still quarantined
   */
  public static java.util.Optional<Locked> lockQuarantined(DSLContext tx, String queue, Collection<Long> ids) {
    return lockLowestQuarantined(tx, I.ID.eq(any(idArray(ids))).and(I.QUEUE_ID.eq(queue)));
  }

  /** Locks the lowest claimable quarantined item that {@code among} selects, as the two above describe. */
  private static java.util.Optional<Locked> lockLowestQuarantined(DSLContext tx, Condition among) {
    return tx.select(I.ID, I.PAYLOAD, epochMillis(I.EXPIRES_AT), endedWithoutCommit())
        .from(I)
        .where(among)
        .and(I.STATUS.eq(inline(MessageQueueItemStatus.ASSIGNED)))
        .and(I.READ_AFTER.le(utcNow()))
        .and(I.EXPIRES_AT.gt(utcNow()))
        .orderBy(I.ID)
        .limit(inline(1))
        .forUpdate()
        .skipLocked()
        .fetchOptional(r -> new Locked(r.value1(), r.value2(), r.value3(), Boolean.TRUE.equals(r.value4())));
  }

  /** Deletes items this transaction locked: handled, they leave with its commit. @return how many */
  public static int delete(DSLContext tx, Collection<Long> ids) {
    org.jooq.Param<Long[]> array = idArray(ids);
    return RenderedStatements.query(tx, "deleteLocked", () -> tx.deleteFrom(I).where(I.ID.eq(any(array))), array)
        .execute();
  }

  /** How many failed deliveries an item this transaction holds has had so far (0 if none). */
  public static int failedDeliveries(DSLContext tx, long id) {
    return tx.select(coalesce(F.FAILED_DELIVERIES, inline(0)))
        .from(I)
        .leftJoin(F).on(F.ITEM_ID.eq(I.ID))
        .where(I.ID.eq(id))
        .fetchOptional(Record1::value1)
        .orElse(0);
  }

  private static org.jooq.Param<Long[]> idArray(Collection<Long> ids) {
    return val(ids.toArray(Long[]::new), SQLDataType.BIGINT.getArrayDataType());
  }

  /** Claimable by the held-transaction mode: PENDING in {@code queue}, readable now and not expired. */
  private static Condition claimable(String queue) {
    return I.QUEUE_ID.eq(queue)
        .and(I.STATUS.eq(inline(MessageQueueItemStatus.PENDING)))
        .and(I.READ_AFTER.le(utcNow()))
        .and(I.EXPIRES_AT.gt(utcNow()));
  }

  /**
   * Whether the row's last locker ended without commit: {@code pg_xact_status} of its {@code xmax}, widened to a full
   * id as the number of ids it is behind the snapshot's next id ({@code (next - xmax) mod 2^32}, below 2^31).
   */
  private static Field<Boolean> endedWithoutCommit() {
    // The system column and the xid casts are not in the generated tables: xmax is read through its text form.
    Field<Long> xmax = field(name(I.getName(), "xmax"), SQLDataType.OTHER).cast(SQLDataType.VARCHAR)
        .cast(SQLDataType.BIGINT);
    Field<Long> next = function("pg_snapshot_xmax", SQLDataType.OTHER,
            function("pg_current_snapshot", SQLDataType.OTHER))
        .cast(SQLDataType.VARCHAR).cast(SQLDataType.BIGINT);
    Field<Long> behind = next.bitAnd(inline(EPOCH - 1)).minus(xmax).plus(inline(EPOCH)).mod(inline(EPOCH));
    return when(xmax.ne(inline(0L)).and(behind.lt(inline(EPOCH / 2))).and(behind.gt(inline(0L))),
        ClaimStatements.transactionStatus(next.minus(behind).cast(SQLDataType.VARCHAR)).eq(inline("aborted")))
        .otherwise(inline(false))
        .as("endedWithoutCommit");
  }
}
