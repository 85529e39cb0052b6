package dev.msgqueue.internal.sql;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.count;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.min;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import dev.msgqueue.QueueStatistics;
import dev.msgqueue.QueueStatisticsSnapshot;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.MessageQueue;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.List;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record;
import org.jooq.Record1;
import org.jooq.Table;

/**
 * The statistics of one queue or of all, in one statement: the queue table left-joined to its messages, one group per
 * queue, each count an aggregate {@code FILTER}. For one queue the join reads only that queue's messages through the
 * {@code ("queueId", "id")} index; for all queues it reads the message table once (a hash join), not once per queue.
 * No row locks: a plain MVCC read, it never waits and never blocks anyone.
 *
 * <p>{@link #forGauges} is what a housekeeping tick reads: exact while the message table is small, and above
 * {@link #EXACT_UP_TO_MESSAGES} an estimate from a block sample of about {@link #SAMPLED_MESSAGES} messages, so that
 * its cost stays flat however many messages the table holds (the exact read is a full scan).
 */
public final class StatisticsStatements {
  private static final MessageQueue Q = MESSAGE_QUEUE;
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;

  /**
   * Up to this many messages (the planner's row estimate of the table) the gauges are exact: the exact read is a full
   * scan, whose cost grows with the table (measured: docs/scaling.md).
   */
  // The exact read cost 1.2-3.3 s per million messages on PostgreSQL 15 on a loaded 2-core machine, so up to this
  // bound about 60-170 ms.
  static final long EXACT_UP_TO_MESSAGES = 50_000;
  /** About how many messages the estimate reads: each count is then within a few percent for a queue holding 1%. */
  static final long SAMPLED_MESSAGES = 20_000;

  private StatisticsStatements() { }

  /** The statistics of {@code queue}, or an empty list if no such queue exists. */
  public static List<QueueStatistics> ofQueue(DSLContext ctx, String queue) {
    return fetch(ctx, Q.NAME.eq(queue));
  }

  /** The statistics of every queue, in name order. */
  public static List<QueueStatistics> ofAll(DSLContext ctx) {
    return fetch(ctx, Q.NAME.isNotNull());
  }

  /**
   * The statistics of every queue, in name order: exact while the table holds at most {@link #EXACT_UP_TO_MESSAGES}
   * messages by the planner's estimate ({@code pg_class.reltuples}, kept by autovacuum and ANALYZE; a table never
   * analyzed is read exactly), else estimated from a {@code TABLESAMPLE SYSTEM} block sample of about
   * {@link #SAMPLED_MESSAGES} messages: each count scaled up by the sampled share of the table, and the oldest ready
   * age that of the oldest ready message in the sample (a lower bound). A queue holding fewer messages than one
   * sampled block's worth of the table may show zero or a multiple of that share.
   */
  public static List<QueueStatistics> forGauges(DSLContext ctx) {
    return forGauges(ctx, EXACT_UP_TO_MESSAGES, SAMPLED_MESSAGES);
  }

  /** {@link #forGauges(DSLContext)} with its two bounds given (tests use small ones). */
  public static List<QueueStatistics> forGauges(DSLContext ctx, long exactUpToMessages, long sampledMessages) {
    return snapshot(ctx, exactUpToMessages, sampledMessages).queues();
  }

  /** {@link #forGauges(DSLContext)}, with when it was read and whether it was sampled. */
  public static QueueStatisticsSnapshot snapshot(DSLContext ctx) {
    return snapshot(ctx, EXACT_UP_TO_MESSAGES, SAMPLED_MESSAGES);
  }

  /** {@link #snapshot(DSLContext)} with its two bounds given (tests use small ones). */
  public static QueueStatisticsSnapshot snapshot(DSLContext ctx, long exactUpToMessages, long sampledMessages) {
    // pg_class has no generated table, and a regclass has no jOOQ type: the lookup by name is a plain SQL condition.
    Double rows = ctx.select(field(name("reltuples"), Double.class))
        .from(table(name("pg_catalog", "pg_class")))
        .where("oid = to_regclass({0})", val(ctx.render(I)))
        .fetchOne(0, Double.class);
    if (rows == null || rows <= exactUpToMessages) {
      List<QueueStatistics> exact = ofAll(ctx);
      return new QueueStatisticsSnapshot(Instant.now(), false, exact);
    }
    double percent = Math.min(100.0, 100.0 * sampledMessages / rows);
    // jOOQ renders no TABLESAMPLE clause; the template adds it to the generated table, whose columns stay typed.
    Table<?> sample = table("{0} tablesample system ({1})", I, inline(percent));
    List<QueueStatistics> sampled = fetch(ctx, Q.NAME.isNotNull(), sample, 100.0 / percent);
    return new QueueStatisticsSnapshot(Instant.now(), true, sampled);
  }

  private static List<QueueStatistics> fetch(DSLContext ctx, Condition which) {
    return fetch(ctx, which, I, 1.0);
  }

  private static List<QueueStatistics> fetch(DSLContext ctx, Condition which, Table<?> items, double scale) {
    // The server's clock read once into a one-row derived table: referenced as a column, it is not re-evaluated for
    // every message and every filter (30% of the all-queues time on 500,000 messages).
    Table<Record1<LocalDateTime>> clock = select(ServerTime.utcNow().as("now")).asTable("clock");
    Field<LocalDateTime> now = clock.field("now", LocalDateTime.class);
    Condition live = I.EXPIRES_AT.isNull().or(I.EXPIRES_AT.gt(now));
    Condition readable = live.and(I.READ_AFTER.le(now));
    Condition notYetReadable = live.and(I.READ_AFTER.gt(now));
    Field<Integer> ready = count(I.ID).filterWhere(readable).as("ready");
    Field<Integer> delayed = count(I.ID)
        .filterWhere(notYetReadable.and(I.STATUS.eq(MessageQueueItemStatus.PENDING))).as("delayed");
    Field<Integer> inFlight = count(I.ID)
        .filterWhere(notYetReadable.and(I.STATUS.eq(MessageQueueItemStatus.ASSIGNED))).as("inFlight");
    Field<Integer> expired = count(I.ID).filterWhere(I.EXPIRES_AT.le(now)).as("expired");
    Field<LocalDateTime> oldestReady = min(I.READ_AFTER).filterWhere(readable).as("oldestReady");

    List<QueueStatistics> statistics = new ArrayList<>();
    for (Record row : ctx.select(Q.NAME, ready, delayed, inFlight, expired, oldestReady, now)
        .from(clock)
        .crossJoin(Q)
        .leftJoin(items).on(I.QUEUE_ID.eq(Q.NAME))
        .where(which)
        .groupBy(Q.NAME, now)
        .orderBy(Q.NAME)
        .fetch()) {
      LocalDateTime oldest = row.get(oldestReady);
      Duration age = oldest == null ? Duration.ZERO : Duration.between(oldest, row.get(now));
      statistics.add(new QueueStatistics(row.get(Q.NAME), Math.round(row.get(ready) * scale),
          Math.round(row.get(delayed) * scale), Math.round(row.get(inFlight) * scale),
          Math.round(row.get(expired) * scale), age.isNegative() ? Duration.ZERO : age));
    }
    return statistics;
  }
}
