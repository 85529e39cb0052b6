package dev.msgqueue.console;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.jooq.impl.DSL.charLength;
import static org.jooq.impl.DSL.count;
import static org.jooq.impl.DSL.currentOffsetDateTime;
import static org.jooq.impl.DSL.exists;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.min;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.not;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.selectOne;
import static org.jooq.impl.DSL.substring;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.MessageQueue;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import dev.msgqueue.jooq.tables.MessageQueueItemFailure;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import org.jooq.CommonTableExpression;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record1;
import org.jooq.Record2;
import org.jooq.Table;
import org.jooq.impl.SQLDataType;
import org.jooq.types.DayToSecond;

/**
 * The console's own statements, all typed over the generated tables. Each is bounded: a page reads at most a page
 * (plus one row, to know whether there is a next) through an index, a count stops at its cap, and nothing reads the
 * message table whole. None takes a lock except {@link #purgeDeadLetters}, which locks what it deletes and skips
 * what others hold.
 */
final class ConsoleStatements {
  private static final MessageQueue Q = MESSAGE_QUEUE;
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;
  private static final MessageQueueItemFailure F = MESSAGE_QUEUE_ITEM_FAILURE;
  /** How much of a payload or an error message a list shows. */
  static final int PREVIEW_CHARS = 200;
  /** The most dead letters one purge statement deletes; a purge runs batches until none is left. */
  static final int PURGE_BATCH = 1_000;

  private final DSLContext ctx;

  ConsoleStatements(DSLContext ctx) {
    this.ctx = ctx;
  }

  record QueueRow(String name, boolean durable, boolean autoDeleted, boolean exclusive, LocalDateTime lastActive) { }

  record MessageRow(long id, String queue, MessageQueueItemStatus status, LocalDateTime readAfter,
      LocalDateTime expiresAt, String payloadPreview, int payloadChars, Integer failedDeliveries,
      LocalDateTime deadLetteredAt) { }

  record MessageDetail(long id, String queue, MessageQueueItemStatus status, LocalDateTime readAfter,
      LocalDateTime expiresAt, String payload, Integer failedDeliveries, String lastErrorClass,
      String lastErrorMessage, LocalDateTime lastFailedAt, String originalQueue, LocalDateTime deadLetteredAt) { }

  record DeadLetterRow(long id, String queue, String originalQueue, int deliveries, String errorClass,
      String errorPreview, LocalDateTime deadLetteredAt, LocalDateTime expiresAt, String payloadPreview,
      int payloadChars, boolean held) { }

  record IdleQueues(int checked, int pastThreshold, int reapable, LocalDateTime oldestReapableActive) { }

  record LockHolder(int pid, String applicationName, LocalDateTime since) { }

  record TableCounters(long inserted, long updated, long deleted) { }

  /**
   * {@code date_trunc('milliseconds', timezone('UTC', now()))}: the server's clock as the schema's UTC wall-clock
   * timestamps hold it (as core's statements compute it).
   */
  static Field<LocalDateTime> utcNow() {
    // date_trunc and timezone by name: jOOQ's trunc() knows no millisecond part, and it renders no AT TIME ZONE.
    return function("date_trunc", SQLDataType.LOCALDATETIME, inline("milliseconds"),
        function("timezone", SQLDataType.LOCALDATETIME, inline("UTC"), currentOffsetDateTime()));
  }

  LocalDateTime serverNow() {
    return ctx.select(utcNow()).fetchOne(Record1::value1);
  }

  private static Field<String> preview(Field<String> text) {
    return substring(text, inline(1), inline(PREVIEW_CHARS));
  }

  private static Field<String> payloadText() {
    return I.PAYLOAD.cast(SQLDataType.CLOB);
  }

  /** A page of queues in name order after (or, descending, before) {@code after}, through the primary key. */
  List<QueueRow> queuesByName(String after, boolean descending, int limit) {
    Condition from = after == null ? Q.NAME.isNotNull() : descending ? Q.NAME.lt(after) : Q.NAME.gt(after);
    return ctx.select(Q.NAME, Q.DURABLE, Q.AUTO_DELETED, Q.EXCLUSIVE, Q.LAST_ACTIVE)
        .from(Q)
        .where(from)
        .orderBy(descending ? Q.NAME.desc() : Q.NAME.asc())
        .limit(limit)
        .fetch(r -> new QueueRow(r.value1(), r.value2(), r.value3(), r.value4(), r.value5()));
  }

  /**
   * A page of queues in {@code "lastActive"} order (then name), from {@code offset}, through the
   * ({@code "lastActive"}, name) index walked either way (so a queue without {@code "lastActive"} comes last in
   * ascending order and first in descending); the caller bounds the offset, which the index walks past row by row.
   */
  List<QueueRow> queuesByLastActive(boolean descending, int offset, int limit) {
    return ctx.select(Q.NAME, Q.DURABLE, Q.AUTO_DELETED, Q.EXCLUSIVE, Q.LAST_ACTIVE)
        .from(Q)
        .orderBy(descending ? Q.LAST_ACTIVE.desc() : Q.LAST_ACTIVE.asc(), descending ? Q.NAME.desc() : Q.NAME.asc())
        .limit(limit)
        .offset(offset)
        .fetch(r -> new QueueRow(r.value1(), r.value2(), r.value3(), r.value4(), r.value5()));
  }

  /** The rows of the named queues (those that still exist), through the primary key. */
  List<QueueRow> queues(Collection<String> names) {
    if (names.isEmpty()) {
      return List.of();
    }
    return ctx.select(Q.NAME, Q.DURABLE, Q.AUTO_DELETED, Q.EXCLUSIVE, Q.LAST_ACTIVE)
        .from(Q)
        .where(Q.NAME.eq(org.jooq.impl.DSL.any(names.toArray(new String[0]))))
        .fetch(r -> new QueueRow(r.value1(), r.value2(), r.value3(), r.value4(), r.value5()));
  }

  Optional<QueueRow> queue(String name) {
    return queues(List.of(name)).stream().findFirst();
  }

  /** How many messages {@code queue} holds, counting at most {@code cap} (an index range that stops there). */
  int messagesUpTo(String queue, int cap) {
    return ctx.fetchCount(select(inline(1)).from(I).where(I.QUEUE_ID.eq(queue)).limit(cap));
  }

  /** The queue's messages with ids above {@code afterId}, lowest first, through the ({@code queueId}, id) index. */
  List<MessageRow> messages(String queue, long afterId, int limit) {
    return ctx.select(I.ID, I.QUEUE_ID, I.STATUS, I.READ_AFTER, I.EXPIRES_AT, preview(payloadText()),
            charLength(payloadText()), F.FAILED_DELIVERIES, F.DEAD_LETTERED_AT)
        .from(I)
        .leftJoin(F).on(F.ITEM_ID.eq(I.ID))
        .where(I.QUEUE_ID.eq(queue))
        .and(I.ID.gt(afterId))
        .orderBy(I.ID)
        .limit(limit)
        .fetch(r -> new MessageRow(r.value1(), r.value2(), r.value3(), r.value4(), r.value5(), r.value6(),
            r.value7(), r.value8(), r.value9()));
  }

  /** One message, its whole payload as text, and its failure record if it has one. */
  Optional<MessageDetail> message(long id) {
    return ctx.select(I.ID, I.QUEUE_ID, I.STATUS, I.READ_AFTER, I.EXPIRES_AT, payloadText(), F.FAILED_DELIVERIES,
            F.LAST_ERROR_CLASS, F.LAST_ERROR_MESSAGE, F.LAST_FAILED_AT, F.ORIGINAL_QUEUE_ID, F.DEAD_LETTERED_AT)
        .from(I)
        .leftJoin(F).on(F.ITEM_ID.eq(I.ID))
        .where(I.ID.eq(id))
        .fetchOptional(r -> new MessageDetail(r.value1(), r.value2(), r.value3(), r.value4(), r.value5(),
            r.value6(), r.value7(), r.value8(), r.value9(), r.value10(), r.value11(), r.value12()));
  }

  /** Held by a consumer now: claimed, and its lease (or for a claim without a lease, its expiry) not run out. */
  private static Condition held() {
    return I.STATUS.eq(MessageQueueItemStatus.ASSIGNED).and(I.READ_AFTER.gt(utcNow()));
  }

  /**
   * Unexpired dead letters with ids above {@code afterId}, lowest first: of one dead-letter queue through the
   * ({@code queueId}, id) index, or of every one through the failure table's primary key (a row exists only for a
   * message that failed).
   */
  List<DeadLetterRow> deadLetters(String queue, long afterId, int limit) {
    Condition which = queue == null ? F.ITEM_ID.gt(afterId) : I.QUEUE_ID.eq(queue).and(I.ID.gt(afterId));
    return ctx.select(I.ID, I.QUEUE_ID, F.ORIGINAL_QUEUE_ID, F.FAILED_DELIVERIES, F.LAST_ERROR_CLASS,
            preview(F.LAST_ERROR_MESSAGE), F.DEAD_LETTERED_AT, I.EXPIRES_AT, preview(payloadText()),
            charLength(payloadText()), field(held()))
        .from(F)
        .join(I).on(I.ID.eq(F.ITEM_ID))
        .where(which)
        .and(F.DEAD_LETTERED_AT.isNotNull())
        .and(I.EXPIRES_AT.gt(utcNow()))
        .orderBy(queue == null ? F.ITEM_ID : I.ID)
        .limit(limit)
        .fetch(r -> new DeadLetterRow(r.value1(), r.value2(), r.value3(), r.value4(), r.value5(), r.value6(),
            r.value7(), r.value8(), r.value9(), r.value10(), r.value11()));
  }

  /** How many unexpired dead letters there are (of one queue, or of all), counting at most {@code cap}. */
  int deadLettersUpTo(String queue, int cap) {
    Condition which = queue == null ? F.DEAD_LETTERED_AT.isNotNull()
        : F.DEAD_LETTERED_AT.isNotNull().and(I.QUEUE_ID.eq(queue));
    return ctx.fetchCount(select(inline(1)).from(F).join(I).on(I.ID.eq(F.ITEM_ID))
        .where(which).and(I.EXPIRES_AT.gt(utcNow())).limit(cap));
  }

  /**
   * Deletes up to {@link #PURGE_BATCH} dead letters of {@code queue} (of those in {@code ids}, if given) that no
   * consumer holds, with their failure records, in one statement: the item rows are locked FOR UPDATE SKIP LOCKED, so
   * a row another transaction is changing (a republish, a claim) is left alone, never waited for.
   *
   * @return how many it deleted
   */
  int purgeDeadLetters(String queue, Collection<Long> ids) {
    Condition selected = ids == null ? I.ID.isNotNull()
        : I.ID.eq(org.jooq.impl.DSL.any(ids.toArray(new Long[0])));
    CommonTableExpression<Record1<Long>> doomed = name("doomed").fields("id")
        .as(select(I.ID)
            .from(I)
            .join(F).on(F.ITEM_ID.eq(I.ID))
            .where(I.QUEUE_ID.eq(queue))
            .and(F.DEAD_LETTERED_AT.isNotNull())
            .and(selected)
            .and(not(held()))
            .orderBy(I.ID)
            .limit(PURGE_BATCH)
            .forUpdate().of(I).skipLocked());
    Field<Long> doomedId = doomed.field("id", Long.class);
    CommonTableExpression<Record1<Long>> deletedItems = name("deleted_items").fields("id")
        .as(ctx.deleteFrom(I).where(I.ID.in(select(doomedId).from(doomed))).returningResult(I.ID));
    Field<Long> deletedId = deletedItems.field("id", Long.class);
    CommonTableExpression<Record1<Long>> deletedFailures = name("deleted_failures").fields("id")
        .as(ctx.deleteFrom(F).where(F.ITEM_ID.in(select(deletedId).from(deletedItems))).returningResult(F.ITEM_ID));
    // deleted_failures is not read: PostgreSQL runs a data-modifying WITH clause whether or not anything reads it.
    return ctx.with(doomed).with(deletedItems).with(deletedFailures)
        .select(count())
        .from(deletedItems)
        .fetchOne(Record1::value1);
  }

  /**
   * The auto-deleted queues idle past {@code threshold}, of the {@code cap} idle longest (through the partial index
   * the reaper uses): how many, how many hold no live message (the reaper deletes those at its next tick), and since
   * when the longest idle of those has been idle.
   */
  IdleQueues idleQueues(Duration threshold, int cap) {
    Table<Record2<String, LocalDateTime>> idle = select(Q.NAME, Q.LAST_ACTIVE)
        .from(Q)
        .where(Q.AUTO_DELETED.isTrue())
        .and(Q.DURABLE.isFalse())
        .and(Q.LAST_ACTIVE.lt(utcNow().minus(val(DayToSecond.valueOf(threshold)))))
        .orderBy(Q.LAST_ACTIVE)
        .limit(cap)
        .asTable("idle");
    Field<String> idleName = idle.field(Q.NAME);
    Field<LocalDateTime> idleActive = idle.field(Q.LAST_ACTIVE);
    Condition empty = not(exists(selectOne().from(I).where(I.QUEUE_ID.eq(idleName))
        .and(I.EXPIRES_AT.isNull().or(I.EXPIRES_AT.gt(utcNow())))));
    var row = ctx.select(count(), count().filterWhere(empty), min(idleActive).filterWhere(empty))
        .from(idle)
        .fetchOne();
    return new IdleQueues(cap, row.value1(), row.value2(), row.value3());
  }

  /** When the message that expired longest ago expired (through the index that leads with "expiresAt"), or empty. */
  Optional<LocalDateTime> oldestExpiry() {
    return Optional.ofNullable(ctx.select(min(I.EXPIRES_AT)).from(I).where(I.EXPIRES_AT.le(utcNow()))
        .fetchOne(Record1::value1));
  }

  /** The backend that holds the housekeepers' advisory lock {@code key} in this database right now, if any. */
  Optional<LockHolder> housekeepingLockHolder(long key) {
    // The catalogs have no generated tables: tables and columns by name. A bigint key shows as its high half in
    // classid, its low half in objid, and objsubid 1; oid columns compare as bigint.
    Table<?> locks = table(name("pg_catalog", "pg_locks")).as("l");
    Table<?> activity = table(name("pg_catalog", "pg_stat_activity")).as("a");
    Field<Integer> lockPid = field(name("l", "pid"), Integer.class);
    return ctx.select(lockPid, field(name("a", "application_name"), String.class),
            field(name("a", "xact_start"), SQLDataType.OFFSETDATETIME))
        .from(locks)
        .join(activity).on(field(name("a", "pid"), Integer.class).eq(lockPid))
        .where(field(name("l", "locktype"), String.class).eq(inline("advisory")))
        .and(field(name("l", "granted"), Boolean.class).isTrue())
        .and(field(name("l", "classid")).cast(SQLDataType.BIGINT).eq(val(key >>> 32)))
        .and(field(name("l", "objid")).cast(SQLDataType.BIGINT).eq(val(key & 0xFFFF_FFFFL)))
        .and(field(name("l", "objsubid"), Integer.class).eq(inline(1)))
        .and(field(name("a", "datname"), String.class).eq(org.jooq.impl.DSL.currentCatalog()))
        .limit(1)
        .fetchOptional(r -> new LockHolder(r.value1(), r.value2(),
            r.value3() == null ? null : r.value3().atZoneSameInstant(java.time.ZoneOffset.UTC).toLocalDateTime()));
  }

  /**
   * The server's running totals of rows inserted, updated and deleted in the message table (by every client, since
   * the statistics were last reset), from the cumulative statistics functions; empty if the table is not found.
   */
  Optional<TableCounters> messageTableCounters() {
    // The statistics functions take a regclass, which jOOQ has no type for: the lookup by name is a plain SQL
    // condition, as core's statistics statement does it.
    Field<Long> oid = field(name("oid"), Long.class);
    return ctx.select(function("pg_stat_get_tuples_inserted", SQLDataType.BIGINT, oid),
            function("pg_stat_get_tuples_updated", SQLDataType.BIGINT, oid),
            function("pg_stat_get_tuples_deleted", SQLDataType.BIGINT, oid))
        .from(table(name("pg_catalog", "pg_class")))
        .where("oid = to_regclass({0})", val(ctx.render(I)))
        .fetchOptional(r -> new TableCounters(r.value1(), r.value2(), r.value3()));
  }

  /** Whether the msgqueue tables exist where this context looks for them. */
  boolean schemaPresent() {
    // A regclass has no jOOQ type: the lookup by name is a plain SQL template over the rendered generated table.
    return ctx.select(field("to_regclass({0}) is not null", Boolean.class, val(ctx.render(Q))))
        .fetchOne(Record1::value1);
  }
}
