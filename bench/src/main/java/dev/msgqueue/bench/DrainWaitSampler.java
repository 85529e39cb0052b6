package dev.msgqueue.bench;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.jooq.Field;
import org.jooq.Record3;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * Samples, on its own connection every {@value #INTERVAL_MILLIS} ms, what the drain's backends are doing
 * ({@code pg_stat_activity}): running ({@code active} without a wait event), waiting for the client
 * ({@code Client:ClientRead}: the consumer has not sent its next statement), or waiting inside the server (WAL flush
 * at commit {@code IO:WALSync}, a lightweight lock such as {@code LWLock:WALWrite} or a buffer's content lock). The
 * shares split a drain's wall time between the server's work, the client's and waits, which rates alone cannot.
 */
final class DrainWaitSampler extends SamplingSession {
  static final String RUNNING = "running";
  private static final long INTERVAL_MILLIS = 20;

  private final List<Integer> notTheDrain;
  private final Map<String, Long> samplesByState = new TreeMap<>();
  private long rounds;

  /** @param notTheDrain backends of this database that are not the drain's (the control session, other samplers) */
  DrainWaitSampler(BenchDatabase database, List<Integer> notTheDrain) throws Exception {
    super(database, "drain-wait-sampler");
    this.notTheDrain = notTheDrain;
  }

  @Override
  void sample() throws InterruptedException {
    Field<String> type = field(name("wait_event_type"), String.class);
    Field<String> event = field(name("wait_event"), String.class);
    Field<String> state = field(name("state"), String.class);
    while (!Thread.currentThread().isInterrupted()) {
      // The drain's pool opens after the sampler starts: rounds before the first backend appears do not count.
      boolean any = false;
      for (Record3<String, String, String> backend : session().select(type, event, state)
          .from(table(name("pg_catalog", "pg_stat_activity")))
          .where(field(name("datname"), String.class).eq(DSL.currentCatalog()))
          .and(field(name("pid"), Integer.class).ne(function("pg_backend_pid", SQLDataType.INTEGER)))
          .and(field(name("pid"), Integer.class).notIn(notTheDrain))
          .fetch()) {
        any = true;
        String what = backend.value1() != null ? backend.value1() + ":" + backend.value2()
            : "active".equals(backend.value3()) ? RUNNING : String.valueOf(backend.value3());
        synchronized (samplesByState) {
          samplesByState.merge(what, 1L, Long::sum);
        }
      }
      if (any) {
        synchronized (samplesByState) {
          rounds++;
        }
      }
      Thread.sleep(INTERVAL_MILLIS);
    }
  }

  /**
   * How many of the drain's backends were in each state on average ({@link #RUNNING}, {@code IO:WALSync},
   * {@code LWLock:...}; idle pool connections and backends waiting for their client's next statement both show as
   * {@code Client:ClientRead}).
   */
  Map<String, Double> averageBackends() {
    Map<String, Double> averages = new TreeMap<>();
    synchronized (samplesByState) {
      samplesByState.forEach((what, count) -> averages.put(what, (double) count / Math.max(1, rounds)));
    }
    return averages;
  }
}
