package dev.msgqueue.internal.sql;

import static dev.msgqueue.internal.sql.ServerTime.epochMillis;
import static dev.msgqueue.internal.sql.ServerTime.fromEpochMillis;
import static dev.msgqueue.internal.sql.ServerTime.utcNow;
import static dev.msgqueue.internal.sql.ServerTime.utcNowPlus;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.any;
import static org.jooq.impl.DSL.array;
import static org.jooq.impl.DSL.arrayAgg;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.greatest;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.DataType;
import org.jooq.DeleteConditionStep;
import org.jooq.Field;
import org.jooq.JSONB;
import org.jooq.Param;
import org.jooq.QuantifiedSelect;
import org.jooq.Record;
import org.jooq.Record1;
import org.jooq.Record2;
import org.jooq.Record3;
import org.jooq.Record4;
import org.jooq.ResultQuery;
import org.jooq.Table;
import org.jooq.impl.SQLDataType;
import org.jooq.types.DayToSecond;

/**
 * Claims and what settles or extends them, with the locks each takes:
 *
 * <ul>
 *   <li>{@link #claim}: FOR UPDATE SKIP LOCKED on the claimed item rows only, so competing consumers never wait for
 *       each other nor get the same item. It does not change {@code "queueId"}, so the foreign key takes no lock on
 *       the queue row: consumers never touch {@code "MessageQueue"}.
 *   <li>{@link #ack}, {@link #release} and {@link #extendLease}: a DELETE / UPDATE of the item rows named by their
 *       receipts (FOR UPDATE / FOR NO KEY UPDATE on those rows); they wait only for a concurrent claim of the same
 *       row, then re-check the receipt against the row as that claim left it. No lock on the queue row.
 * </ul>
 *
 * The receipt check is {@link #held(Receipt)} for one message and {@link #heldUnderReceipt()} for a batch joined with
 * {@link #receipts}; both are the one condition of {@link #heldAt}.
 */
public final class ClaimStatements {
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;
  private static final DataType<Long[]> BIGINT_ARRAY = SQLDataType.BIGINT.getArrayDataType();
  private static final String LOCKED = "locked";
  private static final String CLAIMED = "claimed";
  private static final Field<Long[]> CLAIMED_IDS = field(name(CLAIMED, "ids"), BIGINT_ARRAY);
  private static final Field<Long[]> REDELIVERED_IDS = field(name(CLAIMED, "redelivered"), BIGINT_ARRAY);
  /** The lease claim's fourth column, whether the item was ASSIGNED when locked, as the rendered claim reads it. */
  private static final Field<Boolean> REDELIVERED = field(name("redelivered"), SQLDataType.BOOLEAN);
  private static final String RECEIPT = "receipt";
  private static final Field<Long> RECEIPT_ID = field(name(RECEIPT, "id"), SQLDataType.BIGINT);
  private static final Field<LocalDateTime> RECEIPT_DEADLINE =
      field(name(RECEIPT, "deadline"), SQLDataType.LOCALDATETIME(3));
  /** The claim's third column, the receipt deadline in milliseconds, as the rendered claim's result reads it. */
  private static final Field<Long> CLAIM_DEADLINE_MILLIS = field(name("deadline"), SQLDataType.BIGINT);
  /** The take's and the put-back's last column: the id of the transaction that wrote them, as text. */
  private static final Field<String> TRANSACTION_ID = field(name("transactionId"), SQLDataType.VARCHAR);
  private static final String ZIPPED = "zipped";
  private static final Field<Long> ZIPPED_ID = field(name(ZIPPED, "id"), SQLDataType.BIGINT);
  private static final Field<Long> ZIPPED_MILLIS = field(name(ZIPPED, "millis"), SQLDataType.BIGINT);
  private static final Field<LocalDateTime> ONE_MILLISECOND_LATER =
      I.READ_AFTER.plus(val(DayToSecond.valueOf(Duration.ofMillis(1))));

  private ClaimStatements() { }

  /** Turns one claimed row into the caller's message object: the claim's only per-message allocation. */
  @FunctionalInterface
  public interface ClaimedRow<T> {
    T claimed(Receipt receipt, JSONB payload);
  }

  /**
   * Claims up to {@code max} items of {@code queue}, lowest id first, in one statement, and returns them (unordered)
   * with the deadline it stored as their receipt and whether each was a redelivery.
   *
   * <p>Claimable means {@code "readAfter" <= now AND "expiresAt" > now}, locked FOR UPDATE SKIP LOCKED. Without a
   * lease (the default mode) the claim also requires {@code status = 'PENDING'}, the classic claim condition, and
   * stores {@code "readAfter" = "expiresAt"}: the item can never be claimable again (it would need
   * {@code "expiresAt" <= now < "expiresAt"}). With a lease it stores {@code "readAfter" = now + lease} and accepts
   * ASSIGNED items too, so an item whose lease ran out is claimable again. Because the re-claim requires the old
   * deadline to be {@code <= now} and the lease is at least 1 ms, every re-claim stores a strictly later deadline at
   * the column's millisecond precision: a receipt is never reissued.
   *
   * <p>Shape, default mode: {@code UPDATE ... WHERE id = ANY(ARRAY(SELECT id ... ORDER BY id LIMIT n FOR UPDATE SKIP
   * LOCKED)) RETURNING id, payload, "readAfter"}. Lease mode: {@code UPDATE ... FROM (SELECT array_agg(id) AS ids,
   * array_agg(id) FILTER (WHERE status = 'ASSIGNED') AS redelivered FROM (SELECT id, status ... ORDER BY id LIMIT n
   * FOR UPDATE SKIP LOCKED) locked) claimed WHERE id = ANY(claimed.ids) RETURNING id, payload, "readAfter",
   * id = ANY(claimed.redelivered)}. The status is the row's status as the lock found it (READ COMMITTED re-reads a row
   * changed while the lock waited), so ASSIGNED there means the claim took over a lease that ran out: a redelivery.
   * The default mode claims PENDING items only, so it needs no such array. In both modes the locked ids come back as
   * one array and the update finds them with one primary-key scan, fewer buffer reads per claim and a faster lease
   * claim than joining the locked rows one by one. The
   * queue name is not returned: every claimed item is in {@code queue}. Each column left out is one less value per
   * message to send and to map (the client's mapping, not the server, is what a claim of 100 spends most
   * of its time on). The limit is inlined rather than bound: with a bound limit PostgreSQL's generic plan (which it
   * switches to after five executions, or always under {@code plan_cache_mode = force_generic_plan}) cannot know the
   * limit is small, and estimated a full scan and hash join; with the literal every plan
   * walks the {@code ("queueId","id")} index and stops after n rows. One statement text per distinct {@code max},
   * which a subscriber keeps constant.
   *
   * @param lease the lease, at least 1 ms, or {@code null} for the default (no redelivery) mode
   * @return the claimed messages, in no particular order
   */
  public static <T> List<T> claim(DSLContext ctx, String queue, int max, Duration lease, ClaimedRow<T> row) {
    // Measured (pgbench, PostgreSQL 15): the array shape read 6% fewer buffers per claim than the row-by-row join and
    // ran the lease claim at 1.1-1.3x its rate at four clients; the bound limit's generic plan took 35-40 ms on
    // 100,000 rows.
    List<T> claimed = new ArrayList<>(Math.min(max, 1_000));
    if (lease == null) {
      for (Record3<Long, JSONB, Long> r : renderedClaimPending(ctx, queue, max).fetch()) {
        claimed.add(row.claimed(new Receipt(r.value1(), fromEpochMillis(r.value3()), false), r.value2()));
      }
    } else {
      for (Record4<Long, JSONB, Long, Boolean> r : renderedClaimLeased(ctx, queue, max, lease).fetch()) {
        // NULL, not false, when none of the claimed items was ASSIGNED (the filtered array_agg of none is NULL).
        claimed.add(row.claimed(new Receipt(r.value1(), fromEpochMillis(r.value3()), Boolean.TRUE.equals(r.value4())),
            r.value2()));
      }
    }
    return claimed;
  }

  /** The statement {@link #claim} runs. */
  public static ResultQuery<?> claimQuery(DSLContext ctx, String queue, int max, Duration lease) {
    return lease == null ? claimPending(ctx, queue, max) : claimLeased(ctx, queue, max, lease);
  }

  /** What the claim's text depends on besides its bind values (the queue, the lease). */
  private record ClaimShape(int max, boolean leased) { }

  // The claim as run: rendered once per shape (RenderedStatements), bound to the queue and, with a lease, the lease.
  private static ResultQuery<Record3<Long, JSONB, Long>> renderedClaimPending(
      DSLContext ctx, String queue, int max) {
    return RenderedStatements.resultQuery(ctx, new ClaimShape(max, false), () -> claimPending(ctx, queue, max),
            queue)
        .coerce(I.ID, I.PAYLOAD, CLAIM_DEADLINE_MILLIS);
  }

  private static ResultQuery<Record4<Long, JSONB, Long, Boolean>> renderedClaimLeased(
      DSLContext ctx, String queue, int max, Duration lease) {
    return RenderedStatements.resultQuery(ctx, new ClaimShape(max, true), () -> claimLeased(ctx, queue, max, lease),
            DayToSecond.valueOf(lease), queue)
        .coerce(I.ID, I.PAYLOAD, CLAIM_DEADLINE_MILLIS, REDELIVERED);
  }

  private static ResultQuery<Record3<Long, JSONB, Long>> claimPending(DSLContext ctx, String queue, int max) {
    // No CTE and no join: the locked ids come back as one array (an InitPlan), and the UPDATE finds them with one
    // primary-key scan. Interleaved with the CTE-and-join shape over identical tables (EXPLAIN and
    // pg_stat_statements, PostgreSQL 15, 100,000 rows, 1,000 claims of 100 each): 1,997 buffer hits per claim against
    // 2,122, 8-10% less execution time.
    return ctx.update(I)
        .set(I.STATUS, inline(MessageQueueItemStatus.ASSIGNED))
        .set(I.READ_AFTER, I.EXPIRES_AT)
        .where(I.ID.eq(lockedPendingIds(queue, max)))
        .returningResult(I.ID, I.PAYLOAD, epochMillis(I.READ_AFTER));
  }

  private static ResultQuery<Record4<Long, JSONB, Long, Boolean>> claimLeased(
      DSLContext ctx, String queue, int max, Duration lease) {
    // The locked rows come back as one row of two arrays, all ids and those locked while ASSIGNED (a lease that ran
    // out: a redelivery), and the UPDATE finds them with one primary-key scan, as in the default mode. Against a CTE
    // of (id, status) joined row by row, interleaved with pgbench over identical tables (PostgreSQL 15, 100,000
    // rows, claim of 100 plus its ack per transaction, three rounds): 31,872-35,792 msg/s against 26,364-29,239 at
    // four clients, 21,924-24,357 against 21,991-23,541 at one (docs/benchmark.md).
    var claimable = I.as("claimable");
    Table<?> locked = select(claimable.ID, claimable.STATUS).from(claimable)
        .where(claimable(claimable, queue))
        .orderBy(claimable.ID)
        .limit(inline(max))
        .forUpdate()
        .skipLocked()
        .asTable(LOCKED);
    Field<Long> lockedId = locked.field(claimable.ID);
    Table<?> claimed = select(
            arrayAgg(lockedId).as(CLAIMED_IDS.getName()),
            arrayAgg(lockedId).filterWhere(locked.field(claimable.STATUS).eq(inline(MessageQueueItemStatus.ASSIGNED)))
                .as(REDELIVERED_IDS.getName()))
        .from(locked)
        .asTable(CLAIMED);
    return ctx.update(I)
        .set(I.STATUS, inline(MessageQueueItemStatus.ASSIGNED))
        .set(I.READ_AFTER, utcNowPlus(lease))
        .from(claimed)
        .where(I.ID.eq(any(CLAIMED_IDS)))
        .returningResult(I.ID, I.PAYLOAD, epochMillis(I.READ_AFTER), field(I.ID.eq(any(REDELIVERED_IDS))));
  }

  /**
   * Takes up to {@code max} PENDING items of {@code queue}, lowest id first: deletes them and returns them with their
   * {@code "expiresAt"} as the receipt deadline (what {@link #releaseTaken} writes back), and the id of the
   * transaction that deleted them. The Subscriber's at-most-once mode: a taken item can never be delivered again, so
   * it needs no ack.
   *
   * <p>Run inside a transaction: if its commit goes unanswered, {@link #transactionStatus} of the returned
   * transaction id tells whether the items were taken, so a lost reply neither loses them unseen nor delivers them
   * twice. A take that deletes nothing is assigned no transaction id.
   *
   * <p>Shape: {@code DELETE ... WHERE id = ANY(ARRAY(SELECT id ... ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED))
   * RETURNING id, payload, "expiresAt", pg_current_xact_id()}, the claim's row search with the claim's condition, and a
   * delete instead of the update. Why: the claim's update sets {@code status} and {@code "readAfter"}, both in the
   * production expiry index, so it writes a new row version and three index entries per message, and the ack then
   * deletes it; a delete writes no index entry, and the take drains several times as fast as the claim with its ack
   * (measured: docs/benchmark.md). The limit is inlined, as in {@link #claim}.
   *
   * @return the taken messages, in no particular order, and the transaction's id (0 if none was taken)
   */
  public static <T> Taken<T> take(DSLContext tx, String queue, int max, ClaimedRow<T> row) {
    List<T> taken = new ArrayList<>(Math.min(max, 1_000));
    long transactionId = 0;
    var rendered = RenderedStatements
        .resultQuery(tx, new TakeShape(max), () -> takePending(tx, queue, max), queue)
        .coerce(I.ID, I.PAYLOAD, CLAIM_DEADLINE_MILLIS, TRANSACTION_ID);
    for (Record4<Long, JSONB, Long, String> r : rendered.fetch()) {
      taken.add(row.claimed(new Receipt(r.value1(), fromEpochMillis(r.value3()), false), r.value2()));
      transactionId = Long.parseLong(r.value4());
    }
    return new Taken<>(taken, transactionId);
  }

  /**
   * What a take returned: the messages and the id of the transaction that deleted them (0 if it deleted none).
   *
   * @param transactionId the full (epoch-extended) transaction id, for {@link #transactionStatus}
   */
  public record Taken<T>(List<T> messages, long transactionId) { }

  /** What the take's text depends on besides the queue. */
  private record TakeShape(int max) { }

  /** The statement {@link #take} runs. */
  public static ResultQuery<Record4<Long, JSONB, Long, String>> takePending(DSLContext ctx, String queue, int max) {
    return ctx.deleteFrom(I)
        .where(I.ID.eq(lockedPendingIds(queue, max)))
        .returningResult(I.ID, I.PAYLOAD, epochMillis(I.EXPIRES_AT), currentTransactionId());
  }

  /**
   * The id of the running transaction, as text ({@code xid8}, which jOOQ has no type for, read through its text
   * form). It assigns the transaction an id if it has none: use it only in statements that write.
   */
  static Field<String> currentTransactionId() {
    return function("pg_current_xact_id", SQLDataType.OTHER).cast(SQLDataType.VARCHAR);
  }

  /**
   * Whether a recent transaction committed, by its full id ({@code pg_xact_status}): {@code "committed"},
   * {@code "aborted"}, {@code "in progress"}, or {@code null} if it is too old for the server to know.
   */
  public static String transactionStatus(DSLContext ctx, long transactionId) {
    return ctx.select(transactionStatus(val(Long.toString(transactionId)))).fetchOne(Record1::value1);
  }

  /** {@code pg_xact_status} of a full transaction id given as text. */
  static Field<String> transactionStatus(Field<String> fullTransactionId) {
    // A cast to xid8 as a template: jOOQ has no data type for xid8.
    return function("pg_xact_status", SQLDataType.VARCHAR,
        field("cast({0} as xid8)", SQLDataType.OTHER, fullTransactionId));
  }

  /**
   * Puts taken items that no handler started back into {@code queue}: under their own ids (so they keep their place,
   * lowest id first), PENDING, claimable at once, with the expiry they were taken with. Items there already are left
   * alone ({@code ON CONFLICT DO NOTHING} on the primary key). Run inside a transaction: it returns the transaction's
   * id, so a put-back whose commit goes unanswered is repeated only if {@link #transactionStatus} says it did not
   * commit; repeating a committed one would put back items another consumer took meanwhile, delivering them twice.
   *
   * <p>Plain SQL around typed names and fields because jOOQ cannot render {@code OVERRIDING SYSTEM VALUE}, which an
   * insert of an explicit value into the {@code GENERATED ALWAYS} identity needs. The three arrays are zipped with
   * PostgreSQL's multi-array {@code unnest}, as the receipts are. The foreign key takes KEY SHARE on the queue row as
   * a publish's does; a missing queue fails with 23503.
   *
   * @param payloads the payloads' JSON text, in the order of {@code ids}
   * @param expiresAtMillis the items' {@code "expiresAt"} in {@link ServerTime#epochMillis(Field) milliseconds}
   * @return the ids put back (those not there already) and the transaction's id (0 if it put back none)
   */
  public static Taken<Long> releaseTaken(DSLContext tx, String queue, Long[] ids, String[] payloads,
      Long[] expiresAtMillis) {
    List<Long> released = new ArrayList<>(ids.length);
    long transactionId = 0;
    for (Record r : releaseTakenQuery(tx, queue, ids, payloads, expiresAtMillis).fetch()) {
      released.add(r.get(0, Long.class));
      transactionId = Long.parseLong(r.get(1, String.class));
    }
    return new Taken<>(released, transactionId);
  }

  /** The statement {@link #releaseTaken} runs. */
  public static ResultQuery<?> releaseTakenQuery(DSLContext ctx, String queue, Long[] ids, String[] payloads,
      Long[] expiresAtMillis) {
    Field<Long> takenId = field(name("taken", "id"), SQLDataType.BIGINT);
    Field<String> takenPayload = field(name("taken", "payload"), SQLDataType.CLOB);
    Field<Long> takenMillis = field(name("taken", "millis"), SQLDataType.BIGINT);
    return ctx.resultQuery(
        "insert into {0} ({1}, {2}, {3}, {4}, {5}) overriding system value"
            + " select {6}, cast({7} as jsonb), {8}, {9}, {10}"
            + " from unnest({11}, {12}, {13}) as taken (id, payload, millis)"
            + " on conflict ({1}) do nothing returning {1}, {14}",
        I, I.ID.getUnqualifiedName(), I.PAYLOAD.getUnqualifiedName(), I.READ_AFTER.getUnqualifiedName(),
        I.EXPIRES_AT.getUnqualifiedName(), I.QUEUE_ID.getUnqualifiedName(),
        takenId, takenPayload, utcNow(), fromEpochMillis(takenMillis), val(queue, I.QUEUE_ID),
        val(ids, BIGINT_ARRAY), val(payloads, SQLDataType.CLOB.getArrayDataType()),
        val(expiresAtMillis, BIGINT_ARRAY), currentTransactionId());
  }

  /**
   * {@code ANY(ARRAY(SELECT id ... PENDING ... ORDER BY id LIMIT max FOR UPDATE SKIP LOCKED))}: the lowest claimable
   * PENDING ids of {@code queue}, locked, as one array (an InitPlan) for one primary-key scan of the outer statement.
   */
  private static QuantifiedSelect<Record1<Long>> lockedPendingIds(String queue, int max) {
    var claimable = I.as("claimable");
    return any(array(select(claimable.ID).from(claimable)
            .where(claimable(claimable, queue).and(claimable.STATUS.eq(inline(MessageQueueItemStatus.PENDING))))
            .orderBy(claimable.ID)
            .limit(inline(max))
            .forUpdate()
            .skipLocked()));
  }

  /** Claimable in either mode: in {@code queue}, readable now and not expired. */
  private static Condition claimable(MessageQueueItem item, String queue) {
    return item.QUEUE_ID.eq(queue)
        .and(item.READ_AFTER.le(utcNow()))
        .and(item.EXPIRES_AT.gt(utcNow()));
  }

  /**
   * Deletes the items whose receipts still match: {@code id}, {@code status = 'ASSIGNED'} and {@code "readAfter"}
   * equal to the deadline the claim stored. An item re-claimed by another consumer (or released) carries another
   * deadline and is left alone.
   *
   * <p>The receipts travel as two arrays joined with {@code unnest(ids, deadlines)}: two bind values whatever the
   * batch size, planned as a nested loop over the primary key. A row-value list {@code ("id","readAfter") IN ((?,?),
   * ...)} takes 200 bind values for 100 receipts and took far longer to plan and run.
   *
   * @return the ids deleted
   */
  public static List<Long> ack(DSLContext ctx, Collection<Receipt> receipts) {
    // The row-value list took about 15 times as long to plan and run (measured).
    // Rendered once (RenderedStatements), bound to the two receipt arrays.
    Param<Long[]>[] arrays = receiptArrays(receipts);
    return RenderedStatements.resultQuery(ctx, "ack", () -> deleteHeld(ctx, arrays).returningResult(I.ID), arrays)
        .coerce(I.ID)
        .fetch(Record1::value1);
  }

  /** {@link #ack} without returning the ids: @return how many were deleted */
  public static int ackCount(DSLContext ctx, Collection<Receipt> receipts) {
    Param<Long[]>[] arrays = receiptArrays(receipts);
    return RenderedStatements.query(ctx, "ackCount", () -> deleteHeld(ctx, arrays), arrays).execute();
  }

  private static DeleteConditionStep<MessageQueueItemRecord> deleteHeld(DSLContext ctx, Param<Long[]>[] arrays) {
    return ctx.deleteFrom(I)
        .using(receipts(arrays))
        .where(heldUnderReceipt());
  }

  /**
   * Releases a claimed item whose receipt still matches: PENDING again, claimable from now + {@code delay}.
   *
   * @return 1 if released, 0 if the receipt no longer matches
   */
  public static int release(DSLContext ctx, Receipt receipt, Duration delay) {
    return ctx.update(I)
        .set(I.STATUS, MessageQueueItemStatus.PENDING)
        .set(I.READ_AFTER, utcNowPlus(delay))
        .where(held(receipt))
        .execute();
  }

  /**
   * Releases claimed items whose receipts still match, claimable at once: the batched form of {@link #release} with
   * no delay, for messages a subscriber claimed but never started (it is closing, or their lease would run out
   * before they could start).
   *
   * @return the ids released
   */
  public static List<Long> release(DSLContext ctx, Collection<Receipt> receipts) {
    return ctx.update(I)
        .set(I.STATUS, inline(MessageQueueItemStatus.PENDING))
        .set(I.READ_AFTER, utcNow())
        .from(receipts(receipts))
        .where(heldUnderReceipt())
        .returning(I.ID)
        .fetch(I.ID);
  }

  /**
   * Sets a held item's deadline to now + {@code lease}, or to 1 ms past its current deadline if that is later: a
   * deadline only moves forward, so a receipt is never issued twice and an old receipt can never match again.
   *
   * @return the new deadline (the new receipt), or empty if the receipt no longer matches
   */
  public static Optional<LocalDateTime> extendLease(DSLContext ctx, Receipt receipt, Duration lease) {
    return ctx.update(I)
        .set(I.READ_AFTER, greatest(utcNowPlus(lease), ONE_MILLISECOND_LATER))
        .where(held(receipt))
        .returningResult(I.READ_AFTER)
        .fetchOptional(I.READ_AFTER);
  }

  /**
   * {@link #extendLease} for many receipts in one statement, joined with the receipts as two arrays
   * ({@code unnest(ids, deadlines)}): two bind values and one plan whatever the batch size.
   *
   * @return (id, new deadline) of the items whose receipt matched
   */
  public static List<Record2<Long, LocalDateTime>> extendLeases(
      DSLContext ctx, Collection<Receipt> receipts, Duration lease) {
    return ctx.update(I)
        .set(I.READ_AFTER, greatest(utcNowPlus(lease), ONE_MILLISECOND_LATER))
        .from(receipts(receipts))
        .where(heldUnderReceipt())
        .returningResult(I.ID, I.READ_AFTER)
        .fetch();
  }

  /**
   * The receipts as a table {@code receipt(id, deadline)}, from two {@code bigint} arrays: the ids and the deadlines
   * in {@link ServerTime#epochMillis(Field) milliseconds}. The {@code unnest} is plain SQL because jOOQ's
   * {@code unnest} takes one array, and PostgreSQL's multi-array form is what zips the two into rows.
   */
  static Table<?> receipts(Collection<Receipt> receipts) {
    return receipts(receiptArrays(receipts));
  }

  /** The two bind values of {@link #receipts}: the ids and the deadlines in milliseconds. */
  @SuppressWarnings("unchecked")
  private static Param<Long[]>[] receiptArrays(Collection<Receipt> receipts) {
    Long[] ids = new Long[receipts.size()];
    Long[] deadlines = new Long[receipts.size()];
    int i = 0;
    for (Receipt receipt : receipts) {
      ids[i] = receipt.id();
      deadlines[i] = epochMillis(receipt.deadline());
      i++;
    }
    return new Param[] {val(ids, BIGINT_ARRAY), val(deadlines, BIGINT_ARRAY)};
  }

  private static Table<?> receipts(Param<Long[]>[] arrays) {
    Table<?> zipped = table("unnest({0}, {1})", arrays[0], arrays[1])
        .as(ZIPPED, ZIPPED_ID.getName(), ZIPPED_MILLIS.getName());
    return select(ZIPPED_ID.as(RECEIPT_ID.getName()), fromEpochMillis(ZIPPED_MILLIS).as(RECEIPT_DEADLINE.getName()))
        .from(zipped)
        .asTable(RECEIPT);
  }

  /** The receipt check against {@link #receipts}, for the statements that settle or extend claims in bulk. */
  static Condition heldUnderReceipt() {
    return heldAt(RECEIPT_ID, RECEIPT_DEADLINE);
  }

  /** The receipt check for one message, its id and deadline bound directly. */
  static Condition held(Receipt receipt) {
    return heldAt(val(receipt.id(), I.ID), val(receipt.deadline(), I.READ_AFTER));
  }

  /**
   * The receipt check: the item is still ASSIGNED under the deadline its claim (or last extension) stored. A
   * re-claim, release, ack or extension changes one of the three, so an old receipt never matches again.
   */
  private static Condition heldAt(Field<Long> id, Field<LocalDateTime> deadline) {
    return I.ID.eq(id)
        .and(I.READ_AFTER.eq(deadline))
        .and(I.STATUS.eq(inline(MessageQueueItemStatus.ASSIGNED)));
  }
}
