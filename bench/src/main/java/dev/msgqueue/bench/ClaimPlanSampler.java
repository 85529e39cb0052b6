package dev.msgqueue.bench;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jooq.DSLContext;
import org.jooq.Query;
import org.jooq.impl.SQLDataType;

/**
 * Runs EXPLAIN (ANALYZE, BUFFERS) of the claim's row search, on a session of its own, twice during a drain: once as
 * the drain starts and once when three quarters of the preload are deleted, so the two show what one claim costs
 * early and late in the same drain. The search is the claim's locking subquery without its FOR UPDATE (locking would
 * take rows from the consumers and write to the table): the same index walk over the same dead entries. Progress is
 * read from {@code n_tup_del}, which the drain's backends report about once a second.
 */
final class ClaimPlanSampler extends SamplingSession {
  private static final Pattern BUFFERS = Pattern.compile("Buffers: shared hit=(\\d+)(?: read=(\\d+))?");
  private static final Pattern EXECUTION = Pattern.compile("Execution Time: ([0-9.]+) ms");
  private static final long POLL_MILLIS = 100;

  /** One EXPLAIN ANALYZE: the buffers its top node touched, its execution time, and the plan text. */
  record Sample(double deletedShare, long sharedBuffers, double milliseconds, String plan) {
    static final Sample NONE = new Sample(Double.NaN, -1, Double.NaN, "");
  }

  private final DSLContext session;
  private final int messages;
  private volatile Sample early = Sample.NONE;
  private volatile Sample late = Sample.NONE;

  ClaimPlanSampler(BenchDatabase database, int messages) throws Exception {
    super(database, "claim-plan-sampler");
    this.session = session();
    this.messages = messages;
  }

  @Override
  void sample() throws InterruptedException {
    long deletedBefore = deleted();
    early = explain(0);
    while (!Thread.currentThread().isInterrupted()) {
      Thread.sleep(POLL_MILLIS);
      double share = (double) (deleted() - deletedBefore) / messages;
      if (share >= 0.75) {
        late = explain(share);
        return;
      }
    }
  }

  private long deleted() {
    return session.select(field(name("n_tup_del"), Long.class))
        .from(table(name("pg_catalog", "pg_stat_user_tables")))
        .where(field(name("relname"), String.class).eq(MESSAGE_QUEUE_ITEM.getName()))
        .and(field(name("schemaname"), String.class).eq(function("current_schema", SQLDataType.VARCHAR)))
        .fetchOne(0, Long.class);
  }

  private Sample explain(double deletedShare) {
    Query search = session.select(MESSAGE_QUEUE_ITEM.ID).from(MESSAGE_QUEUE_ITEM)
        .where(MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(DrainScenario.QUEUE))
        .and(MESSAGE_QUEUE_ITEM.STATUS.eq(MessageQueueItemStatus.PENDING))
        .and(MESSAGE_QUEUE_ITEM.READ_AFTER.le(BenchSql.utcNow()))
        .and(MESSAGE_QUEUE_ITEM.EXPIRES_AT.gt(BenchSql.utcNow()))
        .orderBy(MESSAGE_QUEUE_ITEM.ID)
        .limit(DrainScenario.BATCH);
    // Plain SQL prefix: jOOQ's explain() has no ANALYZE or BUFFERS option.
    String plan = String.join("\n", session.fetch("EXPLAIN (ANALYZE, BUFFERS) " + session.renderInlined(search))
        .getValues(0, String.class));
    Matcher buffers = BUFFERS.matcher(plan);
    long shared = buffers.find() ? Long.parseLong(buffers.group(1))
        + (buffers.group(2) == null ? 0 : Long.parseLong(buffers.group(2))) : -1;
    Matcher execution = EXECUTION.matcher(plan);
    double millis = execution.find() ? Double.parseDouble(execution.group(1)) : Double.NaN;
    return new Sample(deletedShare, shared, millis, plan);
  }

  Sample early() {
    return early;
  }

  /** The sample at three quarters deleted, or {@link Sample#NONE} if the drain ended between two polls. */
  Sample late() {
    return late;
  }
}
