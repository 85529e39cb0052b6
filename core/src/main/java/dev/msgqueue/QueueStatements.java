package dev.msgqueue;

import static dev.msgqueue.internal.sql.ServerTime.epochMillis;
import static dev.msgqueue.internal.sql.ServerTime.fromEpochMillis;
import static dev.msgqueue.internal.sql.ServerTime.utcNow;
import static dev.msgqueue.internal.sql.ServerTime.utcNowMinus;
import static dev.msgqueue.internal.sql.ServerTime.utcNowPlus;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.row;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.noCondition;
import static org.jooq.impl.DSL.val;
import static org.jooq.impl.DSL.unnest;

import dev.msgqueue.internal.sql.RenderedStatements;
import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.MessageQueue;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import dev.msgqueue.jooq.tables.records.MessageQueueRecord;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.function.Function;
import org.jooq.CommonTableExpression;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.DeleteConditionStep;
import org.jooq.DataType;
import org.jooq.Field;
import org.jooq.InsertOnDuplicateSetMoreStep;
import org.jooq.InsertResultStep;
import org.jooq.JSONB;
import org.jooq.Param;
import org.jooq.Record1;
import org.jooq.Record3;
import org.jooq.Record4;
import org.jooq.ResultQuery;
import org.jooq.Row2;
import org.jooq.Table;
import org.jooq.UpdateConditionStep;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.SQLDataType;
import org.jooq.types.DayToSecond;

/**
 * Every statement msgqueue runs, in one place, with the row locks each one takes (PostgreSQL's row-level lock
 * conflict table and the lock table of every statement are in docs/design.md):
 *
 * <ul>
 *   <li>{@link #insertItems} (autocommit) and {@link #insertItemsIfQueueExists} (in a caller's transaction): FOR KEY
 *       SHARE on the queue row, the lock the foreign-key check takes. KEY SHARE conflicts only with FOR UPDATE (a
 *       delete), so publishers never block each other, nor the keep-alive write.
 *   <li>{@link #keepAliveIfStale}: FOR NO KEY UPDATE on the queue row, SKIP LOCKED: compatible with publishers' KEY
 *       SHARE, and it never waits for another keep-alive writer or for the reaper.
 *   <li>{@link #healAndInsertItems}, {@link #createOrTouch} and {@link #bind}: an upsert, NO KEY UPDATE on an existing
 *       row.
 *   <li>The maintenance jobs' statements, with their locks, are in {@link MaintenanceStatements}.
 *   <li>{@link #claim}: FOR UPDATE SKIP LOCKED on the claimed item rows only, so competing consumers never wait for
 *       each other nor get the same item. It does not change {@code "queueId"}, so the foreign key takes no lock on
 *       the queue row: consumers never touch {@code "MessageQueue"}.
 *   <li>{@link #ack} and {@link #release}: a DELETE / UPDATE of the item rows named by their receipts (FOR UPDATE / FOR
 *       NO KEY UPDATE on those rows); they wait only for a concurrent claim of the same row, then re-check the receipt
 *       against the row as that claim left it. No lock on the queue row.
 *   <li>{@link #notifyWakeup}: no row lock; PostgreSQL takes a database-wide lock on its notification queue while the
 *       transaction commits, which is why {@link Wakeups} coalesces these.
 * </ul>
 *
 * All timestamps are computed by the server in UTC ({@link ServerTime#utcNow()}), whatever the session's TimeZone: the columns
 * are {@code timestamp} without time zone.
 */
final class QueueStatements {
  private static final MessageQueue Q = MESSAGE_QUEUE;
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;
  private static final Field<Long> ORDINAL = field(name("v", "ordinal"), SQLDataType.BIGINT);
  private static final Field<JSONB> PAYLOAD = field(name("v", "payload"), SQLDataType.JSONB);
  private static final String CLAIMED = "claimed";
  private static final Field<Long> CLAIMED_ID = field(name(CLAIMED, "id"), SQLDataType.BIGINT);
  private static final Field<MessageQueueItemStatus> PREVIOUS_STATUS =
      field(name(CLAIMED, "previousStatus"), I.STATUS.getDataType());
  private static final String RECEIPT = "receipt";
  /** The columns of {@link #receipts}. */
  static final Field<Long> RECEIPT_ID = field(name(RECEIPT, "id"), SQLDataType.BIGINT);
  static final Field<LocalDateTime> RECEIPT_DEADLINE =
      field(name(RECEIPT, "deadline"), SQLDataType.LOCALDATETIME(3));
  private static final DataType<Long[]> BIGINT_ARRAY = SQLDataType.BIGINT.getArrayDataType();
  private static final String ZIPPED = "zipped";
  private static final Field<Long> ZIPPED_ID = field(name(ZIPPED, "id"), SQLDataType.BIGINT);
  private static final Field<Long> ZIPPED_MILLIS = field(name(ZIPPED, "millis"), SQLDataType.BIGINT);
  /** The claim's third column, the receipt deadline in milliseconds, as the rendered claim's result reads it. */
  private static final Field<Long> CLAIM_DEADLINE_MILLIS = field(name("deadline"), SQLDataType.BIGINT);

  /** The longest JSON array of payloads one publish binds as one {@code jsonb} value (see {@link #payloadRows}). */
  private static final long JSON_ARRAY_MAX_CHARS = 64L * 1024 * 1024;

  /** SQLSTATE foreign_key_violation: the only foreign key of "MessageQueueItem" is its queue. */
  private static final String FOREIGN_KEY_VIOLATION = "23503";

  private QueueStatements() { }

  /**
   * The publish fast path outside a transaction (autocommit): a plain insert of the payloads, the cheapest statement
   * there is. Its foreign-key check takes KEY SHARE on the queue row; if the queue is missing (or a concurrent reaper
   * deletes it while the check waits), it fails with 23503 ({@link #isMissingQueue}), which in autocommit aborts
   * nothing but this statement.
   */
  static InsertResultStep<MessageQueueItemRecord> insertItems(
      DSLContext ctx, String queue, List<JSONB> payloads, Duration delay, Duration ttl) {
    if (payloads.size() == 1) {
      // One message (an uncoalesced publish): a one-row VALUES is cheaper to render, bind and plan than unnest.
      return ctx.insertInto(I, I.PAYLOAD, I.READ_AFTER, I.EXPIRES_AT, I.QUEUE_ID)
          .values(val(payloads.get(0)), utcNowPlus(delay), utcNowPlus(ttl), val(queue))
          .returning(I.ID);
    }
    return ctx.insertInto(I, I.PAYLOAD, I.READ_AFTER, I.EXPIRES_AT, I.QUEUE_ID)
        .select(select(PAYLOAD, utcNowPlus(delay), utcNowPlus(ttl), val(queue))
            .from(payloadRows(payloads))
            .orderBy(ORDINAL))
        .returning(I.ID);
  }

  /** Whether {@code failure} is the foreign-key violation of an item whose queue row does not exist. */
  static boolean isMissingQueue(DataAccessException failure) {
    return FOREIGN_KEY_VIOLATION.equals(failure.sqlState());
  }

  /**
   * The publish fast path inside a caller's transaction, where a 23503 would abort the whole transaction: inserts
   * the payloads into an existing queue, as one statement that reads the queue row {@code FOR KEY SHARE}. If the row
   * does not exist (or a concurrent reaper deletes it while this waits), the statement inserts nothing and returns no
   * ids instead of raising 23503. The foreign-key check then finds the row already locked by this transaction.
   */
  static InsertResultStep<MessageQueueItemRecord> insertItemsIfQueueExists(
      DSLContext ctx, String queue, List<JSONB> payloads, Duration delay, Duration ttl) {
    Table<?> rows = payloadRows(payloads);
    return ctx.insertInto(I, I.PAYLOAD, I.READ_AFTER, I.EXPIRES_AT, I.QUEUE_ID)
        .select(select(PAYLOAD, utcNowPlus(delay), utcNowPlus(ttl), Q.NAME)
            .from(Q)
            .crossJoin(rows)
            .where(Q.NAME.eq(queue))
            .orderBy(ORDINAL)
            .forKeyShare()
            .of(Q))
        .returning(I.ID);
  }

  /**
   * The heal path: re-creates a reaped auto-deleted queue with the publisher's attributes and inserts the payloads,
   * in one statement, so no reaper can run between the two. A concurrent healer's row wins (its attributes stay) and
   * only {@code "lastActive"} is written.
   */
  static InsertResultStep<MessageQueueItemRecord> healAndInsertItems(
      DSLContext ctx, QueueSpec spec, List<JSONB> payloads, Duration delay, Duration ttl) {
    CommonTableExpression<Record1<String>> healed = name("healed").fields(Q.NAME.getName())
        .as(upsertQueue(ctx, spec, false).returningResult(Q.NAME));
    Field<String> healedName = healed.field(Q.NAME.getName(), String.class);
    return ctx.with(healed)
        .insertInto(I, I.PAYLOAD, I.READ_AFTER, I.EXPIRES_AT, I.QUEUE_ID)
        .select(select(PAYLOAD, utcNowPlus(delay), utcNowPlus(ttl), healedName)
            .from(healed)
            .crossJoin(payloadRows(payloads))
            .orderBy(ORDINAL))
        .returning(I.ID);
  }

  /**
   * Creates the queue with {@code spec}'s attributes, or, if it exists, only writes its {@code "lastActive"}: the heal
   * of a publish in a caller's transaction, run in autocommit on the repository's own connection. An upsert, NO KEY
   * UPDATE on an existing row for the statement's duration.
   */
  static int createOrTouch(DSLContext ctx, QueueSpec spec) {
    return upsertQueue(ctx, spec, false).execute();
  }

  /** Creates the queue, or updates all its attributes, and sets {@code "lastActive"}. */
  static int bind(DSLContext ctx, QueueSpec spec) {
    return upsertQueue(ctx, spec, true).execute();
  }

  private static InsertOnDuplicateSetMoreStep<MessageQueueRecord> upsertQueue(
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
  static int keepAliveIfStale(DSLContext ctx, String queue, Duration maxAge) {
    return keepAlive(ctx, queue, row -> row.LAST_ACTIVE.isNull().or(row.LAST_ACTIVE.lt(utcNowMinus(maxAge))));
  }

  /** Like {@link #keepAliveIfStale} whatever the row's age: a consumer's explicit keep-alive. */
  static int keepAlive(DSLContext ctx, String queue) {
    return keepAlive(ctx, queue, row -> noCondition());
  }

  private static int keepAlive(DSLContext ctx, String queue, Function<MessageQueue, Condition> due) {
    MessageQueue locked = Q.as("locked");
    return ctx.update(Q)
        .set(Q.LAST_ACTIVE, utcNow())
        .where(Q.NAME.in(select(locked.NAME)
            .from(locked)
            .where(locked.NAME.eq(queue))
            .and(due.apply(locked))
            .forNoKeyUpdate()
            .skipLocked()))
        .execute();
  }

  /**
   * Claims up to {@code max} items of {@code queue}, lowest id first, in one statement, and returns them (unordered)
   * with the deadline it stored as their receipt and the status each had before this claim.
   *
   * <p>Claimable means {@code "readAfter" <= now AND "expiresAt" > now}, locked FOR UPDATE SKIP LOCKED. Without a
   * lease (the default mode) the claim also requires {@code status = 'PENDING'}, the classic claim condition, and
   * stores {@code "readAfter" = "expiresAt"}: the item can never be claimable again (it would need
   * {@code "expiresAt" <= now < "expiresAt"}). With a lease it stores {@code "readAfter" = now + lease} and accepts
   * ASSIGNED items too, so an item whose lease ran out is claimable again. Because the re-claim requires the old
   * deadline to be {@code <= now} and the lease is at least 1 ms, every re-claim stores a strictly later deadline at
   * the column's millisecond precision: a receipt is never reissued.
   *
   * <p>Shape: {@code WITH claimed AS (SELECT id[, status] ... ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED) UPDATE ...
   * FROM claimed WHERE id = claimed.id RETURNING id, payload, "readAfter"[, claimed.status]}. The CTE's status is the
   * row's status as the lock found it (READ COMMITTED re-reads a row changed while the lock waited), so ASSIGNED there
   * means the claim took over a lease that ran out: a redelivery. Only lease mode selects it: the default mode claims
   * PENDING items only. The queue name is not returned: every claimed item is in {@code queue}. Each column left out
   * is one less value per message to send and to map (the client's mapping, not the server, is what a claim of 100
   * spends most of its time on). The limit is inlined rather than bound: with a bound limit
   * PostgreSQL's generic plan (which it switches to after five executions, or always under
   * {@code plan_cache_mode = force_generic_plan}) cannot know the limit is small, and estimated a full scan and hash
   * join (35-40 ms on 100,000 rows); with the literal every plan walks the {@code ("queueId","id")} index and stops
   * after n rows. One statement text per distinct {@code max}, which a subscriber keeps constant.
   *
   * @param lease the lease, at least 1 ms, or {@code null} for the default (no redelivery) mode
   * @return the claimed messages, in no particular order
   */
  static List<ClaimedMessage> claim(DSLContext ctx, String queue, int max, Duration lease) {
    List<ClaimedMessage> claimed = new ArrayList<>(Math.min(max, 1_000));
    if (lease == null) {
      for (Record3<Long, JSONB, Long> row : renderedClaimPending(ctx, queue, max).fetch()) {
        claimed.add(new ClaimedMessage(row.value1(), queue, row.value2(), fromEpochMillis(row.value3()), false));
      }
    } else {
      for (Record4<Long, JSONB, Long, MessageQueueItemStatus> row
          : renderedClaimLeased(ctx, queue, max, lease).fetch()) {
        claimed.add(new ClaimedMessage(row.value1(), queue, row.value2(), fromEpochMillis(row.value3()),
            row.value4() == MessageQueueItemStatus.ASSIGNED));
      }
    }
    return claimed;
  }

  /** The statement {@link #claim} runs. */
  static ResultQuery<?> claimQuery(DSLContext ctx, String queue, int max, Duration lease) {
    return lease == null ? claimPending(ctx, queue, max) : claimLeased(ctx, queue, max, lease);
  }

  private static ResultQuery<Record3<Long, JSONB, Long>> claimPending(DSLContext ctx, String queue, int max) {
    return claimUpdate(ctx, queue, max, null).returningResult(I.ID, I.PAYLOAD, epochMillis(I.READ_AFTER));
  }

  private static ResultQuery<Record4<Long, JSONB, Long, MessageQueueItemStatus>> claimLeased(
      DSLContext ctx, String queue, int max, Duration lease) {
    return claimUpdate(ctx, queue, max, lease)
        .returningResult(I.ID, I.PAYLOAD, epochMillis(I.READ_AFTER), PREVIOUS_STATUS);
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

  private static ResultQuery<Record4<Long, JSONB, Long, MessageQueueItemStatus>> renderedClaimLeased(
      DSLContext ctx, String queue, int max, Duration lease) {
    return RenderedStatements.resultQuery(ctx, new ClaimShape(max, true), () -> claimLeased(ctx, queue, max, lease),
            queue, DayToSecond.valueOf(lease))
        .coerce(I.ID, I.PAYLOAD, CLAIM_DEADLINE_MILLIS, PREVIOUS_STATUS);
  }

  private static UpdateConditionStep<MessageQueueItemRecord> claimUpdate(
      DSLContext ctx, String queue, int max, Duration lease) {
    var claimable = I.as("claimable");
    Condition condition = claimable.QUEUE_ID.eq(queue)
        .and(claimable.READ_AFTER.le(utcNow()))
        .and(claimable.EXPIRES_AT.gt(utcNow()));
    if (lease == null) {
      condition = condition.and(claimable.STATUS.eq(inline(MessageQueueItemStatus.PENDING)));
    }
    var candidates = lease == null
        ? select(claimable.ID).from(claimable)
        : select(claimable.ID, claimable.STATUS).from(claimable);
    String[] columns = lease == null
        ? new String[] {CLAIMED_ID.getName()}
        : new String[] {CLAIMED_ID.getName(), PREVIOUS_STATUS.getName()};
    CommonTableExpression<?> claimed = name(CLAIMED).fields(columns)
        .as(candidates
            .where(condition)
            .orderBy(claimable.ID)
            .limit(inline(max))
            .forUpdate()
            .skipLocked());
    Field<LocalDateTime> deadline = lease == null ? I.EXPIRES_AT : utcNowPlus(lease);
    return ctx.with(claimed)
        .update(I)
        .set(I.STATUS, inline(MessageQueueItemStatus.ASSIGNED))
        .set(I.READ_AFTER, deadline)
        .from(claimed)
        .where(I.ID.eq(CLAIMED_ID));
  }

  /**
   * Deletes the items whose receipts still match: {@code id}, {@code status = 'ASSIGNED'} and {@code "readAfter"}
   * equal to the deadline the claim stored. An item re-claimed by another consumer (or released) carries another
   * deadline and is left alone.
   *
   * <p>The receipts travel as two arrays joined with {@code unnest(ids, deadlines)}: two bind values whatever the
   * batch size, planned as a nested loop over the primary key. A row-value list {@code ("id","readAfter") IN ((?,?),
   * ...)} took 200 bind values for 100 receipts and about 15 times as long to plan and run.
   *
   * @return the ids deleted
   */
  static List<Long> ack(DSLContext ctx, Collection<ClaimedMessage> messages) {
    // Rendered once (RenderedStatements), bound to the two receipt arrays.
    Param<Long[]>[] arrays = receiptArrays(messages);
    return RenderedStatements.resultQuery(ctx, "ack",
            () -> deleteHeld(ctx, arrays).returningResult(I.ID), arrays)
        .coerce(I.ID)
        .fetch(Record1::value1);
  }

  /** {@link #ack} without returning the ids: @return how many were deleted */
  static int ackCount(DSLContext ctx, Collection<ClaimedMessage> messages) {
    Param<Long[]>[] arrays = receiptArrays(messages);
    return RenderedStatements.query(ctx, "ackCount",
            () -> deleteHeld(ctx, arrays), arrays)
        .execute();
  }

  private static DeleteConditionStep<MessageQueueItemRecord> deleteHeld(DSLContext ctx, Param<Long[]>[] arrays) {
    return ctx.deleteFrom(I)
        .using(receipts(arrays))
        .where(heldUnderReceipt());
  }

  /**
   * Hands claimed items whose receipts still match back to the queue, claimable at once: the batched form of
   * {@link #release} with no delay, for messages a subscriber claimed but never started (it is closing, or their lease
   * would run out before they could start).
   *
   * @return the ids released
   */
  static List<Long> release(DSLContext ctx, Collection<ClaimedMessage> messages) {
    return ctx.update(I)
        .set(I.STATUS, inline(MessageQueueItemStatus.PENDING))
        .set(I.READ_AFTER, utcNow())
        .from(receipts(messages))
        .where(heldUnderReceipt())
        .returning(I.ID)
        .fetch(I.ID);
  }

  /** Whether the queue row exists; a plain read that takes no lock and waits for none. */
  static boolean queueExists(DSLContext ctx, String queue) {
    return ctx.fetchExists(Q, Q.NAME.eq(queue));
  }

  /**
   * The receipts as a table {@code receipt(id, deadline)}, from two {@code bigint} arrays: the ids and the deadlines
   * in {@link ServerTime#epochMillis(Field) milliseconds}. The {@code unnest} is plain SQL because jOOQ's {@code unnest} takes
   * one array, and PostgreSQL's multi-array form is what zips the two into rows.
   */
  static Table<?> receipts(Collection<ClaimedMessage> messages) {
    return receipts(receiptArrays(messages));
  }

  /** The two bind values of {@link #receipts}: the ids and the deadlines in milliseconds. */
  @SuppressWarnings("unchecked")
  private static Param<Long[]>[] receiptArrays(Collection<ClaimedMessage> messages) {
    Long[] ids = new Long[messages.size()];
    Long[] deadlines = new Long[messages.size()];
    int i = 0;
    for (ClaimedMessage message : messages) {
      ids[i] = message.id();
      deadlines[i] = epochMillis(message.receiptDeadline());
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
  /**
   * The receipt check against {@link #receipts}: the item is still ASSIGNED under the deadline its claim (or last
   * extension) stored. Every statement that settles or extends claims in bulk checks it this way.
   */
  static Condition heldUnderReceipt() {
    return I.ID.eq(RECEIPT_ID)
        .and(I.READ_AFTER.eq(RECEIPT_DEADLINE))
        .and(I.STATUS.eq(inline(MessageQueueItemStatus.ASSIGNED)));
  }

  /** The receipt check for one message: {@link #heldUnderReceipt()} with its id and deadline bound directly. */
  static Condition held(ClaimedMessage message) {
    return I.ID.eq(message.id())
        .and(I.READ_AFTER.eq(message.receiptDeadline()))
        .and(I.STATUS.eq(inline(MessageQueueItemStatus.ASSIGNED)));
  }


  /**
   * Releases a claimed item whose receipt still matches: PENDING again, claimable from now + {@code delay}.
   *
   * @return 1 if released, 0 if the receipt no longer matches
   */
  static int release(DSLContext ctx, ClaimedMessage message, Duration delay) {
    return ctx.update(I)
        .set(I.STATUS, MessageQueueItemStatus.PENDING)
        .set(I.READ_AFTER, utcNowPlus(delay))
        .where(held(message))
        .execute();
  }

  /**
   * Sends {@code NOTIFY msgqueue_wakeup, '<queue>'} through {@code pg_notify}, a function call jOOQ can express (it
   * has no NOTIFY statement). Inside a transaction PostgreSQL delivers it on commit, and not at all on rollback. The
   * payload is only the queue name (at most {@value QueueSpec#MAX_NAME_BYTES} bytes, far below the 8000-byte limit).
   */
  static void notifyWakeup(DSLContext ctx, String queue) {
    ctx.select(function("pg_notify", SQLDataType.OTHER, inline(Wakeups.CHANNEL), val(queue))).execute();
  }

  /**
   * The payloads as rows {@code (payload, ordinal)}: {@code jsonb_array_elements(?::jsonb) WITH ORDINALITY}, one
   * bind for all of them, the payloads joined into one JSON array (a multi-row VALUES costs a bind and its parsing per
   * row, several times the client CPU). The JSON array is plain concatenation of the validated payloads, where a
   * {@code jsonb[]} bind escaped every quote of every payload into an array literal that the server then unescaped:
   * that escaping was the largest part of the client's time for publishBatch(1000) after validation. Batches above
   * {@value #JSON_ARRAY_MAX_CHARS} characters, near jsonb's 256 MB limit for one value, still travel as
   * {@code unnest(?::jsonb[])}. jOOQ has no {@code jsonb_array_elements} table function, hence the plain SQL.
   */
  private static Table<?> payloadRows(List<JSONB> payloads) {
    long chars = payloads.size() + 1L;
    for (JSONB payload : payloads) {
      chars += payload.data().length();
    }
    if (chars > JSON_ARRAY_MAX_CHARS) {
      Field<JSONB[]> array = val(payloads.toArray(new JSONB[0]), SQLDataType.JSONB.getArrayDataType());
      return unnest(array).withOrdinality().as("v", PAYLOAD.getName(), ORDINAL.getName());
    }
    StringBuilder array = new StringBuilder((int) chars + 1).append('[');
    for (JSONB payload : payloads) {
      if (array.length() > 1) {
        array.append(',');
      }
      array.append(payload.data());
    }
    Field<JSONB> elements = val(JSONB.valueOf(array.append(']').toString()), SQLDataType.JSONB);
    return table("jsonb_array_elements({0}) with ordinality", elements)
        .as("v", PAYLOAD.getName(), ORDINAL.getName());
  }
}
