package dev.msgqueue;

import static dev.msgqueue.QueueStatements.RECEIPT_DEADLINE;
import static dev.msgqueue.QueueStatements.RECEIPT_ID;
import static dev.msgqueue.QueueStatements.receipts;
import static dev.msgqueue.QueueStatements.utcNow;
import static dev.msgqueue.QueueStatements.utcNowPlus;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.jooq.impl.DSL.coalesce;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.greatest;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.selectOne;
import static org.jooq.impl.DSL.val;

import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.MessageQueue;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import dev.msgqueue.jooq.tables.MessageQueueItemFailure;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.Collection;
import java.util.Optional;
import org.jooq.CommonTableExpression;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.JSONB;
import org.jooq.Record1;
import org.jooq.Record2;
import org.jooq.Record8;
import org.jooq.Result;
import org.jooq.Table;
import org.jooq.types.DayToSecond;

/**
 * The statements of lease extension, retries and dead letters, with the locks they take. None of them runs on the
 * happy path: claim and ack never read or write {@code "MessageQueueItemFailure"}, whose row for an item exists only
 * once a delivery of it failed.
 *
 * <ul>
 *   <li>{@link #extendLease} / {@link #extendLeases}: an UPDATE of the item rows named by their receipts (FOR NO KEY
 *       UPDATE on them), like an ack; no lock on the queue row.
 *   <li>{@link #releaseForRetry} and {@link #deadLetter}: the receipt-checked UPDATE of the item row and the upsert of
 *       its failure row in one statement, so both happen or neither. Two consumers failing or acking under the same
 *       receipt serialize on the item row; the second finds the receipt changed and does nothing.
 *       {@link #deadLetter} also changes {@code "queueId"}: its foreign-key check takes KEY SHARE on the dead-letter
 *       queue's row, after the statement's own upsert of that row (NO KEY UPDATE) made sure it exists and is durable.
 *   <li>{@link #republish}: moves a dead letter back, reading its original queue's row FOR KEY SHARE (like a publish
 *       in a caller's transaction), so a reaper cannot delete that queue in between and the statement raises no
 *       23503.
 * </ul>
 */
final class RetryStatements {
  private static final MessageQueue Q = MESSAGE_QUEUE;
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;
  private static final MessageQueueItemFailure F = MESSAGE_QUEUE_ITEM_FAILURE;
  private static final Field<LocalDateTime> ONE_MILLISECOND_LATER = I.READ_AFTER.plus(val(DayToSecond.valueOf(
      Duration.ofMillis(1))));

  private RetryStatements() { }

  /**
   * Sets a held item's deadline to now + {@code lease}, or to 1 ms past its current deadline if that is later: a
   * deadline only moves forward, so a receipt is never issued twice and an old receipt can never match again.
   *
   * @return the new deadline (the new receipt), or empty if the receipt no longer matches
   */
  static Optional<LocalDateTime> extendLease(DSLContext ctx, ClaimedMessage message, Duration lease) {
    return ctx.update(I)
        .set(I.READ_AFTER, greatest(utcNowPlus(lease), ONE_MILLISECOND_LATER))
        .where(held(message))
        .returningResult(I.READ_AFTER)
        .fetchOptional(I.READ_AFTER);
  }

  /**
   * {@link #extendLease} for many receipts in one statement, joined with the receipts as two arrays
   * ({@code unnest(ids, deadlines)}): two bind values and one plan whatever the batch size.
   *
   * @return (id, new deadline) of the items whose receipt matched
   */
  static Result<Record2<Long, LocalDateTime>> extendLeases(
      DSLContext ctx, Collection<ClaimedMessage> messages, Duration lease) {
    return ctx.update(I)
        .set(I.READ_AFTER, greatest(utcNowPlus(lease), ONE_MILLISECOND_LATER))
        .from(receipts(messages))
        .where(I.ID.eq(RECEIPT_ID))
        .and(I.READ_AFTER.eq(RECEIPT_DEADLINE))
        .and(I.STATUS.eq(MessageQueueItemStatus.ASSIGNED))
        .returningResult(I.ID, I.READ_AFTER)
        .fetch();
  }

  /**
   * How many earlier deliveries of a held item failed (0 if none did), or empty if the receipt no longer matches. A
   * plain read: the statement that acts on the count re-checks the receipt, and while the receipt matches only its
   * holder writes the item's failure row.
   */
  static Optional<Integer> failedDeliveries(DSLContext ctx, ClaimedMessage message) {
    return ctx.select(coalesce(F.FAILED_DELIVERIES, inline(0)))
        .from(I)
        .leftJoin(F).on(F.ITEM_ID.eq(I.ID))
        .where(held(message))
        .fetchOptional(Record1::value1);
  }

  /**
   * Releases a held item for a retry (PENDING, claimable from now + {@code backoff}) and counts the failed delivery
   * with its error, in one statement.
   *
   * @return 1 if released, 0 if the receipt no longer matches
   */
  static int releaseForRetry(
      DSLContext ctx, ClaimedMessage message, Duration backoff, String errorClass, String errorMessage) {
    CommonTableExpression<Record1<Long>> released = name("released").fields("id")
        .as(ctx.update(I)
            .set(I.STATUS, MessageQueueItemStatus.PENDING)
            .set(I.READ_AFTER, utcNowPlus(backoff))
            .where(held(message))
            .returningResult(I.ID));
    Field<Long> releasedId = released.field("id", Long.class);
    return ctx.with(released)
        .insertInto(F, F.ITEM_ID, F.FAILED_DELIVERIES, F.LAST_ERROR_CLASS, F.LAST_ERROR_MESSAGE, F.LAST_FAILED_AT)
        .select(select(releasedId, inline(1), val(errorClass, F.LAST_ERROR_CLASS), val(errorMessage,
            F.LAST_ERROR_MESSAGE), utcNow()).from(released))
        .onConflict(F.ITEM_ID)
        .doUpdate()
        .set(F.FAILED_DELIVERIES, F.FAILED_DELIVERIES.plus(inline(1)))
        .set(F.LAST_ERROR_CLASS, val(errorClass, F.LAST_ERROR_CLASS))
        .set(F.LAST_ERROR_MESSAGE, val(errorMessage, F.LAST_ERROR_MESSAGE))
        .set(F.LAST_FAILED_AT, utcNow())
        .execute();
  }

  /**
   * Moves a held item to the dead-letter queue, in one statement: makes sure the dead-letter queue's row exists and
   * is durable and not auto-deleted (an upsert that writes an existing row only if it is not), changes the item's
   * queue (PENDING, readable now, expiring after {@code ttl}), and records the original queue, the error and the
   * time in its failure row. {@code countedDeliveries} is added to the failed deliveries: 1 for a delivery that
   * failed now, 0 when the failure was already counted (a lease that ran out, counted on redelivery).
   *
   * @return 1 if moved, 0 if the receipt no longer matches
   */
  static int deadLetter(DSLContext ctx, ClaimedMessage message, String deadLetterQueue, Duration ttl,
      int countedDeliveries, String errorClass, String errorMessage) {
    CommonTableExpression<Record1<String>> queueRow = name("dead_letter_queue").fields("name")
        .as(ctx.insertInto(Q)
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
            .returningResult(Q.NAME));
    CommonTableExpression<Record1<Long>> moved = name("moved").fields("id")
        .as(ctx.update(I)
            .set(I.QUEUE_ID, deadLetterQueue)
            .set(I.STATUS, MessageQueueItemStatus.PENDING)
            .set(I.READ_AFTER, utcNow())
            .set(I.EXPIRES_AT, utcNowPlus(ttl))
            .where(held(message))
            .and(I.QUEUE_ID.eq(message.queueName()))
            .returningResult(I.ID));
    Field<Long> movedId = moved.field("id", Long.class);
    return ctx.with(queueRow).with(moved)
        .insertInto(F, F.ITEM_ID, F.FAILED_DELIVERIES, F.LAST_ERROR_CLASS, F.LAST_ERROR_MESSAGE, F.LAST_FAILED_AT,
            F.ORIGINAL_QUEUE_ID, F.DEAD_LETTERED_AT)
        .select(select(movedId, inline(Math.max(1, countedDeliveries)), val(errorClass, F.LAST_ERROR_CLASS),
            val(errorMessage, F.LAST_ERROR_MESSAGE), utcNow(), val(message.queueName(), F.ORIGINAL_QUEUE_ID),
            utcNow()).from(moved))
        .onConflict(F.ITEM_ID)
        .doUpdate()
        .set(F.FAILED_DELIVERIES, F.FAILED_DELIVERIES.plus(inline(countedDeliveries)))
        .set(F.LAST_ERROR_CLASS, val(errorClass, F.LAST_ERROR_CLASS))
        .set(F.LAST_ERROR_MESSAGE, val(errorMessage, F.LAST_ERROR_MESSAGE))
        .set(F.LAST_FAILED_AT, utcNow())
        .set(F.ORIGINAL_QUEUE_ID, val(message.queueName(), F.ORIGINAL_QUEUE_ID))
        .set(F.DEAD_LETTERED_AT, utcNow())
        .execute();
  }

  /**
   * Counts a failed delivery, as a lease that ran out ({@link DeadLetter#LEASE_EXPIRED}), for each held item, in one
   * statement.
   *
   * @return (id, failed deliveries now) of the items whose receipt matched
   */
  static Result<Record2<Long, Integer>> countExpiredLeases(
      DSLContext ctx, Collection<ClaimedMessage> messages, String errorMessage) {
    return ctx.insertInto(F, F.ITEM_ID, F.FAILED_DELIVERIES, F.LAST_ERROR_CLASS, F.LAST_ERROR_MESSAGE,
            F.LAST_FAILED_AT)
        .select(select(I.ID, inline(1), val(DeadLetter.LEASE_EXPIRED, F.LAST_ERROR_CLASS),
                val(errorMessage, F.LAST_ERROR_MESSAGE), utcNow())
            .from(I)
            .join(receipts(messages)).on(I.ID.eq(RECEIPT_ID).and(I.READ_AFTER.eq(RECEIPT_DEADLINE)))
            .where(I.STATUS.eq(MessageQueueItemStatus.ASSIGNED)))
        .onConflict(F.ITEM_ID)
        .doUpdate()
        .set(F.FAILED_DELIVERIES, F.FAILED_DELIVERIES.plus(inline(1)))
        .set(F.LAST_ERROR_CLASS, val(DeadLetter.LEASE_EXPIRED, F.LAST_ERROR_CLASS))
        .set(F.LAST_ERROR_MESSAGE, val(errorMessage, F.LAST_ERROR_MESSAGE))
        .set(F.LAST_FAILED_AT, utcNow())
        .returningResult(F.ITEM_ID, F.FAILED_DELIVERIES)
        .fetch();
  }

  /**
   * Up to {@code limit} unexpired dead letters in {@code deadLetterQueue} with ids above {@code afterId}, lowest id
   * first: id, payload, original queue, failed deliveries, error class, error message, dead-lettered at, expires at.
   */
  static Result<Record8<Long, JSONB, String, Integer, String, String, LocalDateTime, LocalDateTime>> deadLetters(
      DSLContext ctx, String deadLetterQueue, long afterId, int limit) {
    return ctx.select(I.ID, I.PAYLOAD, F.ORIGINAL_QUEUE_ID, F.FAILED_DELIVERIES, F.LAST_ERROR_CLASS,
            F.LAST_ERROR_MESSAGE, F.DEAD_LETTERED_AT, I.EXPIRES_AT)
        .from(I)
        .join(F).on(F.ITEM_ID.eq(I.ID))
        .where(I.QUEUE_ID.eq(deadLetterQueue))
        .and(I.ID.gt(afterId))
        .and(I.EXPIRES_AT.gt(utcNow()))
        .and(F.DEAD_LETTERED_AT.isNotNull())
        .orderBy(I.ID)
        .limit(limit)
        .fetch();
  }

  /**
   * Moves a dead letter back to its original queue (PENDING, readable now, expiring after {@code ttl}) and deletes
   * its failure row, so it gets a fresh set of deliveries, in one statement. Only an unexpired dead letter that no
   * consumer holds right now moves, and only while its original queue exists.
   *
   * @return the original queue's name if it moved, else empty
   */
  static Optional<String> republish(DSLContext ctx, long id, Duration ttl) {
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
  static RepublishOutcome whyNotRepublished(DSLContext ctx, long id) {
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
   * Deletes up to {@code limit} failure rows whose item is gone (acked, expired and cleaned up, dead letter
   * consumed). There is no foreign key to cascade the delete (see the changeset): this is what keeps the table small.
   * Locks: FOR UPDATE SKIP LOCKED on the failure rows, so two cleanups running at once (overlapping housekeeper ticks)
   * delete disjoint rows and never wait for, or deadlock with, each other.
   *
   * @return how many it deleted
   */
  static int deleteOrphanedFailures(DSLContext ctx, int limit) {
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

  /** The receipt check: still ASSIGNED under the deadline the claim (or last extension) stored. */
  private static Condition held(ClaimedMessage message) {
    return I.ID.eq(message.id())
        .and(I.READ_AFTER.eq(message.receiptDeadline()))
        .and(I.STATUS.eq(MessageQueueItemStatus.ASSIGNED));
  }

  /** No consumer holds the item now: PENDING, or a lease that ran out. */
  private static Condition notHeld() {
    return I.STATUS.eq(MessageQueueItemStatus.PENDING).or(I.READ_AFTER.le(utcNow()))
        .and(I.EXPIRES_AT.gt(utcNow()));
  }
}
