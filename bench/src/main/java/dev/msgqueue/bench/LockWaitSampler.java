package dev.msgqueue.bench;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * Samples, on its own connection, how many sessions of the benchmark database wait for a heavyweight lock
 * ({@code pg_stat_activity.wait_event_type = 'Lock'}), and integrates that over time into waiting-session-seconds.
 */
final class LockWaitSampler implements AutoCloseable {
  static final Duration DEFAULT_INTERVAL = Duration.ofMillis(10);

  private final Connection connection;
  private final DSLContext ctx;
  private final long intervalNanos;
  private final Thread thread;
  private volatile boolean running = true;
  private final Map<String, Double> waitingSessionSecondsByEvent = new TreeMap<>();
  private long samples;
  private RuntimeException failure;

  private LockWaitSampler(Connection connection, Duration interval) {
    this.connection = connection;
    this.ctx = DSL.using(connection, SQLDialect.POSTGRES);
    this.intervalNanos = interval.toNanos();
    this.thread = new Thread(this::sample, "lock-wait-sampler");
    this.thread.setDaemon(true);
  }

  static LockWaitSampler start(BenchDatabase database) throws SQLException {
    LockWaitSampler sampler = new LockWaitSampler(database.connect(), DEFAULT_INTERVAL);
    sampler.thread.start();
    return sampler;
  }

  private void sample() {
    long previous = System.nanoTime();
    try {
      while (running) {
        Map<String, Integer> waiting = BenchSql.sessionsWaitingOnLocks(ctx);
        long now = System.nanoTime();
        // Each observation stands for the time since the previous one (the sampling query itself takes time).
        double seconds = (now - previous) / 1e9;
        waiting.forEach((event, sessions) -> waitingSessionSecondsByEvent.merge(event, sessions * seconds, Double::sum));
        previous = now;
        samples++;
        Thread.sleep(intervalNanos / 1_000_000, (int) (intervalNanos % 1_000_000));
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (RuntimeException e) {
      failure = e;
    }
  }

  /** Stops sampling and returns what it measured. */
  Result stop() throws InterruptedException {
    running = false;
    thread.join();
    if (failure != null) {
      throw new IllegalStateException("sampling pg_stat_activity failed", failure);
    }
    return new Result(new TreeMap<>(waitingSessionSecondsByEvent), samples);
  }

  @Override
  public void close() throws SQLException, InterruptedException {
    running = false;
    thread.join();
    connection.close();
  }

  /** @param byWaitEvent waiting-session-seconds per {@code wait_event} (tuple, transactionid, extend, ...) */
  record Result(Map<String, Double> byWaitEvent, long samples) {
    double waitingSessionSeconds() {
      return byWaitEvent.values().stream().mapToDouble(Double::doubleValue).sum();
    }

    Result plus(Result other) {
      Map<String, Double> sum = new TreeMap<>(byWaitEvent);
      other.byWaitEvent.forEach((event, seconds) -> sum.merge(event, seconds, Double::sum));
      return new Result(sum, samples + other.samples);
    }
  }
}
