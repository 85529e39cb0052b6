package dev.msgqueue.internal.sql;

import static dev.msgqueue.internal.sql.ClaimStatements.held;
import static dev.msgqueue.internal.sql.ClaimStatements.heldUnderReceipt;
import static dev.msgqueue.internal.sql.ClaimStatements.receipts;
import static dev.msgqueue.internal.sql.ServerTime.utcNow;
import static dev.msgqueue.internal.sql.ServerTime.utcNowPlus;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.jooq.impl.DSL.any;
import static org.jooq.impl.DSL.coalesce;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.val;

import dev.msgqueue.DeadLetter;
import dev.msgqueue.QueueNotFoundException;
import dev.msgqueue.RepublishOutcome;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.MessageQueue;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import dev.msgqueue.jooq.tables.MessageQueueItemFailure;
import dev.msgqueue.jooq.tables.records.MessageQueueItemFailureRecord;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.jooq.CommonTableExpression;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.InsertOnDuplicateSetMoreStep;
import org.jooq.InsertValuesStep7;
import org.jooq.Record1;
import org.jooq.Record2;
import org.jooq.Record7;
import org.jooq.Result;
import org.jooq.Select;

/**
 * The statements of retries and dead letters, with the locks they take. None of them runs on the happy path: claim
 * and ack never read or write {@code "MessageQueueItemFailure"}, whose row for an item exists only once a delivery of
 * it failed.
 *
 * <ul>
 *   <li>{@link #releaseFailed} and {@link #deadLetter}: the receipt-checked UPDATE of the item row and the upsert of
 *       its failure row in one statement, so both happen or neither. Two consumers failing or acking under the same
 *       receipt serialize on the item row; the second finds the receipt changed and does nothing.
 *       {@link #deadLetter} also changes {@code "queueId"}: its foreign-key check takes KEY SHARE on the dead-letter
 *       queue's row, after the statement's own upsert of that row (NO KEY UPDATE) made sure it exists and is durable.
 *   <li>{@link #countExpiredLeases}: the failure-row upsert for items joined with their receipts.
 *   <li>{@link #republish}: moves a dead letter back, reading its original queue's row FOR KEY SHARE (like a publish
 *       in a caller's transaction), so a reaper cannot delete that queue in between and the statement raises no
 *       23503.
 * </ul>
 *
 * Every failure-row write is {@link #upsertFailure}: the row is locked by the upsert (FOR NO KEY UPDATE) after the
 * statement's receipt check on the item row, so only the receipt's holder writes it.
 */
public final class RetryStatements {
  private static final MessageQueue Q = MESSAGE_QUEUE;
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;
  private static final MessageQueueItemFailure F = MESSAGE_QUEUE_ITEM_FAILURE;

  private RetryStatements() { }

  /**
   * How many earlier deliveries of a held item failed (0 if none did), or empty if the receipt no longer matches. A
   * plain read: the statement that acts on the count re-checks the receipt, and while the receipt matches only its
   * holder writes the item's failure row.
   */
  public static Optional<Integer> failedDeliveries(DSLContext ctx, Receipt receipt) {
    return ctx.select(coalesce(F.FAILED_DELIVERIES, inline(0)))
        .from(I)
        .leftJoin(F).on(F.ITEM_ID.eq(I.ID))
        .where(held(receipt))
        .fetchOptional(Record1::value1);
  }

  /**
   * Releases a held item after a failed delivery (PENDING, claimable from now + {@code backoff}) and counts the
   * failure with its error, in one statement.
   *
   * @return 1 if released, 0 if the receipt no longer matches
   */
  public static int releaseFailed(
      DSLContext ctx, Receipt receipt, Duration backoff, String errorClass, String errorMessage) {
    return releaseFailed(ctx, held(receipt), backoff, errorClass, errorMessage);
  }

  /**
   * {@link #releaseFailed(DSLContext, Receipt, Duration, String, String)} for an item this transaction holds locked
   * (the held-transaction mode): PENDING already, claimable from now + {@code backoff}.
   *
   * @return 1 if released, 0 if the item is gone
   */
  public static int releaseFailedLocked(
      DSLContext tx, long id, Duration backoff, String errorClass, String errorMessage) {
    return releaseFailed(tx, I.ID.eq(id), backoff, errorClass, errorMessage);
  }

  private static int releaseFailed(
      DSLContext ctx, Condition heldItem, Duration backoff, String errorClass, String errorMessage) {
    CommonTableExpression<Record1<Long>> released = name("released").fields("id")
        .as(ctx.update(I)
            .set(I.STATUS, MessageQueueItemStatus.PENDING)
            .set(I.READ_AFTER, utcNowPlus(backoff))
            .where(heldItem)
            .returningResult(I.ID));
    Field<Long> releasedId = released.field("id", Long.class);
    return upsertFailure(ctx.with(released).insertInto(F, F.ITEM_ID, F.FAILED_DELIVERIES, F.LAST_ERROR_CLASS,
            F.LAST_ERROR_MESSAGE, F.LAST_FAILED_AT, F.ORIGINAL_QUEUE_ID, F.DEAD_LETTERED_AT),
        failureRows(releasedId, 1, errorClass, errorMessage, null).from(released), 1, errorClass, errorMessage)
        .execute();
  }

  /**
   * Moves a held item of {@code fromQueue} to the dead-letter queue, in one statement: makes sure the dead-letter
   * queue's row exists and is durable and not auto-deleted (an upsert that writes an existing row only if it is not),
   * changes the item's queue (PENDING, readable now, expiring after {@code ttl}), and records the original queue, the
   * error and the time in its failure row. {@code countedDeliveries} is added to the failed deliveries: 1 for a
   * delivery that failed now, 0 when the failure was already counted (a lease that ran out, counted on redelivery).
   *
   * @return 1 if moved, 0 if the receipt no longer matches
   */
  public static int deadLetter(DSLContext ctx, Receipt receipt, String fromQueue, String deadLetterQueue,
      Duration ttl, int countedDeliveries, String errorClass, String errorMessage) {
    return deadLetter(ctx, held(receipt), fromQueue, deadLetterQueue, ttl, countedDeliveries, errorClass,
        errorMessage);
  }

  /**
   * {@link #deadLetter(DSLContext, Receipt, String, String, Duration, int, String, String)} for an item this
   * transaction holds locked (the held-transaction mode).
   *
   * @return 1 if moved, 0 if the item is gone or in another queue
   */
  public static int deadLetterLocked(DSLContext tx, long id, String fromQueue, String deadLetterQueue,
      Duration ttl, int countedDeliveries, String errorClass, String errorMessage) {
    return deadLetter(tx, I.ID.eq(id), fromQueue, deadLetterQueue, ttl, countedDeliveries, errorClass,
        errorMessage, false);
  }

  /**
   * Makes sure the dead-letter queue's row exists and is durable and not auto-deleted, in a statement of its own: for
   * the held-transaction mode, which moves items there inside a transaction that stays open while handlers run. The
   * upsert locks the queue row until its transaction ends, which inside that transaction would hold up every other
   * consumer dead-lettering to the same queue, and publishers to it, for the whole batch. Run it in autocommit
   * before {@link #deadLetterLocked}, whose foreign-key check then takes only KEY SHARE on the row.
   */
  public static void ensureDeadLetterQueue(DSLContext ctx, String deadLetterQueue) {
    deadLetterQueueRow(ctx, deadLetterQueue).execute();
  }

  /** The upsert of the dead-letter queue's row; it writes an existing row only if it is not durable already. */
  private static org.jooq.InsertResultStep<Record1<String>> deadLetterQueueRow(DSLContext ctx, String deadLetterQueue) {
    return ctx.insertInto(Q)
        .set(Q.NAME, deadLetterQueue)
        .set(Q.DURABLE, true)
        .set(Q.AUTO_DELETED, false)
        .set(Q.EXCLUSIVE, false)
        .set(Q.LAST_ACTIVE, utcNow())
        .onConflict(Q.NAME)
        .doUpdate()
        .set(Q.DURABLE, true)
        .set(Q.AUTO_DELETED, false)
        .where(Q.AUTO_DELETED.isTrue().or(Q.DURABLE.isFalse()))
        .returningResult(Q.NAME);
  }

  private static int deadLetter(DSLContext ctx, Condition heldItem, String fromQueue, String deadLetterQueue,
      Duration ttl, int countedDeliveries, String errorClass, String errorMessage) {
    return deadLetter(ctx, heldItem, fromQueue, deadLetterQueue, ttl, countedDeliveries, errorClass, errorMessage,
        true);
  }

  private static int deadLetter(DSLContext ctx, Condition heldItem, String fromQueue, String deadLetterQueue,
      Duration ttl, int countedDeliveries, String errorClass, String errorMessage, boolean withQueueRow) {
    CommonTableExpression<Record1<String>> queueRow = name("dead_letter_queue").fields("name")
        .as(deadLetterQueueRow(ctx, deadLetterQueue));
    CommonTableExpression<Record1<Long>> moved = name("moved").fields("id")
        .as(ctx.update(I)
            .set(I.QUEUE_ID, deadLetterQueue)
            .set(I.STATUS, MessageQueueItemStatus.PENDING)
            .set(I.READ_AFTER, utcNow())
            .set(I.EXPIRES_AT, utcNowPlus(ttl))
            .where(heldItem)
            .and(I.QUEUE_ID.eq(fromQueue))
            .returningResult(I.ID));
    Field<Long> movedId = moved.field("id", Long.class);
    var with = withQueueRow ? ctx.with(queueRow).with(moved) : ctx.with(moved);
    return upsertFailure(with.insertInto(F, F.ITEM_ID, F.FAILED_DELIVERIES,
            F.LAST_ERROR_CLASS, F.LAST_ERROR_MESSAGE, F.LAST_FAILED_AT, F.ORIGINAL_QUEUE_ID, F.DEAD_LETTERED_AT),
        failureRows(movedId, Math.max(1, countedDeliveries), errorClass, errorMessage, fromQueue).from(moved),
        countedDeliveries, errorClass, errorMessage)
        .set(F.ORIGINAL_QUEUE_ID, val(fromQueue, F.ORIGINAL_QUEUE_ID))
        .set(F.DEAD_LETTERED_AT, utcNow())
        .execute();
  }

  /**
   * Counts a failed delivery, as a lease that ran out ({@link DeadLetter#LEASE_EXPIRED}), for each held item, in one
   * statement.
   *
   * @return (id, failed deliveries now) of the items whose receipt matched
   */
  public static Result<Record2<Long, Integer>> countExpiredLeases(
      DSLContext ctx, Collection<Receipt> receipts, String errorMessage) {
    return upsertFailure(ctx.insertInto(F, F.ITEM_ID, F.FAILED_DELIVERIES, F.LAST_ERROR_CLASS, F.LAST_ERROR_MESSAGE,
            F.LAST_FAILED_AT, F.ORIGINAL_QUEUE_ID, F.DEAD_LETTERED_AT),
        failureRows(I.ID, 1, DeadLetter.LEASE_EXPIRED, errorMessage, null)
            .from(I)
            .join(receipts(receipts)).on(heldUnderReceipt()),
        1, DeadLetter.LEASE_EXPIRED, errorMessage)
        .returningResult(F.ITEM_ID, F.FAILED_DELIVERIES)
        .fetch();
  }

  /**
   * Counts a failed delivery, as a delivery whose transaction ended without commit
   * ({@link DeadLetter#TRANSACTION_ENDED}), for each of the items {@code ids} that exists, in one statement. Run on a
   * connection of its own in autocommit: the count must outlive the transaction that holds the items, which may end
   * the same way.
   *
   * @return (id, failed deliveries now) of the items counted
   */
  public static Result<Record2<Long, Integer>> countEndedDeliveries(
      DSLContext ctx, Collection<Long> ids, String errorMessage) {
    return upsertFailure(ctx.insertInto(F, F.ITEM_ID, F.FAILED_DELIVERIES, F.LAST_ERROR_CLASS, F.LAST_ERROR_MESSAGE,
            F.LAST_FAILED_AT, F.ORIGINAL_QUEUE_ID, F.DEAD_LETTERED_AT),
        failureRows(I.ID, 1, DeadLetter.TRANSACTION_ENDED, errorMessage, null)
            .from(I)
            .where(I.ID.eq(any(ids.toArray(Long[]::new)))),
        1, DeadLetter.TRANSACTION_ENDED, errorMessage)
        .returningResult(F.ITEM_ID, F.FAILED_DELIVERIES)
        .fetch();
  }

  /**
   * Up to {@code limit} unexpired dead letters in {@code deadLetterQueue} with ids above {@code afterId}, lowest id
   * first.
   */
  public static List<DeadLetter> deadLetters(DSLContext ctx, String deadLetterQueue, long afterId, int limit) {
    List<DeadLetter> letters = new ArrayList<>();
    for (var row : ctx.select(I.ID, I.PAYLOAD, F.ORIGINAL_QUEUE_ID, F.FAILED_DELIVERIES, F.LAST_ERROR_CLASS,
            F.LAST_ERROR_MESSAGE, F.DEAD_LETTERED_AT, I.EXPIRES_AT)
        .from(I)
        .join(F).on(F.ITEM_ID.eq(I.ID))
        .where(I.QUEUE_ID.eq(deadLetterQueue))
        .and(I.ID.gt(afterId))
        .and(I.EXPIRES_AT.gt(utcNow()))
        .and(F.DEAD_LETTERED_AT.isNotNull())
        .orderBy(I.ID)
        .limit(limit)
        .fetch()) {
      letters.add(new DeadLetter(row.value1(), row.value2().data(), row.value3(), deadLetterQueue, row.value4(),
          row.value5(), row.value6(), utcInstant(row.value7()), utcInstant(row.value8())));
    }
    return letters;
  }

  private static Instant utcInstant(LocalDateTime utc) {
    return utc == null ? null : utc.toInstant(ZoneOffset.UTC);
  }

  /**
   * Moves a dead letter back to its original queue (PENDING, readable now, expiring after {@code ttl}) and deletes
   * its failure row, so it gets a fresh set of deliveries, in one statement. Only an unexpired dead letter that no
   * consumer holds right now moves, and only while its original queue exists.
   *
   * @return the original queue's name if it moved, else empty
   */
  public static Optional<String> republish(DSLContext ctx, long id, Duration ttl) {
    MessageQueue original = Q.as("original");
    CommonTableExpression<Record2<Long, String>> moved = name("moved").fields("id", "queueId")
        .as(ctx.update(I)
            .set(I.QUEUE_ID, F.ORIGINAL_QUEUE_ID)
            .set(I.STATUS, MessageQueueItemStatus.PENDING)
            .set(I.READ_AFTER, utcNow())
            .set(I.EXPIRES_AT, utcNowPlus(ttl))
            .from(F)
            .where(I.ID.eq(id))
            .and(F.ITEM_ID.eq(I.ID))
            .and(F.DEAD_LETTERED_AT.isNotNull())
            .and(I.QUEUE_ID.ne(F.ORIGINAL_QUEUE_ID))
            .and(notHeld())
            .and(F.ORIGINAL_QUEUE_ID.in(select(original.NAME)
                .from(original)
                .where(original.NAME.eq(F.ORIGINAL_QUEUE_ID))
                .forKeyShare()))
            .returningResult(I.ID, I.QUEUE_ID));
    Field<Long> movedId = moved.field("id", Long.class);
    Field<String> movedQueue = moved.field("queueId", String.class);
    return ctx.with(moved)
        .delete(F)
        .using(moved)
        .where(F.ITEM_ID.eq(movedId))
        .returningResult(movedQueue)
        .fetchOptional(Record1::value1);
  }

  /**
   * Why {@link #republish} moved nothing, read in one statement that takes no lock (a plain read; the answer describes
   * the rows as this statement saw them).
   *
   * @throws QueueNotFoundException if it is a dead letter whose original queue no longer exists
   */
  public static RepublishOutcome whyNotRepublished(DSLContext ctx, long id) {
    MessageQueue original = Q.as("original");
    var row = ctx.select(I.EXPIRES_AT.isNull().or(I.EXPIRES_AT.gt(utcNow())), F.DEAD_LETTERED_AT.isNotNull(),
            F.ORIGINAL_QUEUE_ID, original.NAME.isNotNull())
        .from(I)
        .leftJoin(F).on(F.ITEM_ID.eq(I.ID))
        .leftJoin(original).on(original.NAME.eq(F.ORIGINAL_QUEUE_ID))
        .where(I.ID.eq(id))
        .fetchOne();
    if (row == null || !row.value1()) {
      return RepublishOutcome.NOT_FOUND;
    }
    if (!row.value2()) {
      return RepublishOutcome.NOT_A_DEAD_LETTER;
    }
    if (!row.value4()) {
      throw new QueueNotFoundException(row.value3());
    }
    // An unexpired dead letter whose queue exists did not move: a consumer held it (it may have let go since).
    return RepublishOutcome.HELD;
  }

  /**
   * The new failure rows' columns: the item, its first count, the error and the time, and for a dead letter the
   * queue it came from and the time it was moved ({@code null} otherwise, as the table's defaults are).
   */
  private static org.jooq.SelectSelectStep<Record7<Long, Integer, String, String, LocalDateTime, String,
      LocalDateTime>> failureRows(Field<Long> itemId, int deliveries, String errorClass, String errorMessage,
      String deadLetteredFrom) {
    return select(itemId, inline(deliveries), val(errorClass, F.LAST_ERROR_CLASS),
        val(errorMessage, F.LAST_ERROR_MESSAGE), utcNow(), val(deadLetteredFrom, F.ORIGINAL_QUEUE_ID),
        deadLetteredFrom == null ? val(null, F.DEAD_LETTERED_AT) : utcNow());
  }

  /**
   * The failure-row upsert ({@code INSERT ... ON CONFLICT ("itemId") DO UPDATE}): inserts {@code rows}, or adds
   * {@code deliveries} failed deliveries to an existing row and records the error and the time. The row is locked by
   * the upsert (FOR NO KEY UPDATE), after the statement's receipt check on the item row, so only the receipt's holder
   * writes it.
   */
  private static InsertOnDuplicateSetMoreStep<MessageQueueItemFailureRecord> upsertFailure(
      InsertValuesStep7<MessageQueueItemFailureRecord, Long, Integer, String, String, LocalDateTime, String,
          LocalDateTime> insert,
      Select<? extends Record7<Long, Integer, String, String, LocalDateTime, String, LocalDateTime>> rows,
      int deliveries, String errorClass, String errorMessage) {
    Map<Field<?>, Field<?>> update = new LinkedHashMap<>();
    update.put(F.FAILED_DELIVERIES, F.FAILED_DELIVERIES.plus(inline(deliveries)));
    update.put(F.LAST_ERROR_CLASS, val(errorClass, F.LAST_ERROR_CLASS));
    update.put(F.LAST_ERROR_MESSAGE, val(errorMessage, F.LAST_ERROR_MESSAGE));
    update.put(F.LAST_FAILED_AT, utcNow());
    return insert.select(rows).onConflict(F.ITEM_ID).doUpdate().set(update);
  }

  /** No consumer holds the item now: PENDING, or a lease that ran out. */
  private static Condition notHeld() {
    return I.STATUS.eq(MessageQueueItemStatus.PENDING).or(I.READ_AFTER.le(utcNow()))
        .and(I.EXPIRES_AT.gt(utcNow()));
  }
}
