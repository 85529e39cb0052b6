package dev.msgqueue.bench;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * One cell: {@code publishers} threads, each on its own autocommit connection, publish back to back with one
 * strategy for a warm-up and then a measured window. Only publishes that start and end inside the window count; the
 * window stays open until at least one has.
 * The caller resets the database and creates the queue before; this reads the server's counters around the window.
 */
final class ClosedLoopCell {
  private static final Duration MAX_WINDOW_EXTENSION = Duration.ofSeconds(30);

  private ClosedLoopCell() { }

  /**
   * What a cell measured.
   *
   * @param windowSeconds the measured window
   * @param calls publish calls completed inside the window
   * @param messages messages those calls stored
   * @param latencies the calls' latencies
   * @param lockWait waiting-on-lock session-seconds sampled in the window
   * @param walBytes WAL written in the window (server-wide)
   * @param parentRowWrites updates of the {@code "MessageQueue"} table over the whole cell, warm-up included
   * @param keepAliveSpanSeconds the span of {@code parentRowWrites}: from the start of the cell (the caller binds the
   *     queue just before, which starts msgqueue's keep-alive clock) until every publisher has stopped
   * @param failures publish calls that threw, over the whole cell
   * @param firstFailure the first of them, or {@code null}
   */
  record Measurement(
      String strategy,
      int publishers,
      double windowSeconds,
      long calls,
      long messages,
      Latencies latencies,
      LockWaitSampler.Result lockWait,
      long walBytes,
      long parentRowWrites,
      double keepAliveSpanSeconds,
      long failures,
      String firstFailure) {

    Latencies.Summary latency() {
      return latencies.summary();
    }

    /**
     * This and {@code other} (the same strategy and publisher count, measured at another time) as one cell: every
     * measure is a sum over time, so slices add up exactly.
     */
    Measurement plus(Measurement other) {
      return new Measurement(strategy, publishers, windowSeconds + other.windowSeconds, calls + other.calls,
          messages + other.messages, Latencies.merge(List.of(latencies, other.latencies)),
          lockWait.plus(other.lockWait),
          walBytes + other.walBytes, parentRowWrites + other.parentRowWrites,
          keepAliveSpanSeconds + other.keepAliveSpanSeconds,
          failures + other.failures, firstFailure != null ? firstFailure : other.firstFailure);
    }

    double messagesPerSecond() {
      return messages / windowSeconds;
    }

    double callsPerSecond() {
      return calls / windowSeconds;
    }

    double walBytesPerMessage() {
      return messages == 0 ? Double.NaN : (double) walBytes / messages;
    }

    /** Waiting-session-seconds as a share of all publisher-session-seconds of the window. */
    double lockWaitShare() {
      return lockWait.waitingSessionSeconds() / (publishers * windowSeconds);
    }
  }

  static Measurement run(BenchDatabase database, PublishStrategy strategy, int publishers, Duration warmup,
      Duration window) throws SQLException, InterruptedException {
    long cellStart = System.nanoTime();
    DSLContext control = database.control();
    BenchSql.ParentRowCounters before = BenchSql.parentRowCounters(control);
    List<Connection> connections = new ArrayList<>();
    List<Integer> pids = new ArrayList<>();
    List<Worker> workers = new ArrayList<>();
    CountDownLatch start = new CountDownLatch(1);
    AtomicReference<String> firstFailure = new AtomicReference<>();
    Clock clock = new Clock();
    try {
      for (int i = 0; i < publishers; i++) {
        Connection connection = database.connect();
        connections.add(connection);
        DSLContext ctx = DSL.using(connection, SQLDialect.POSTGRES);
        pids.add(BenchSql.backendPid(ctx));
        workers.add(new Worker(strategy.open(ctx), start, clock, firstFailure, strategy.id() + "-" + i));
      }
      workers.forEach(Thread::start);
      start.countDown();
      TimeUnit.NANOSECONDS.sleep(warmup.toNanos());

      long walBefore = BenchSql.currentWalBytes(control);
      LockWaitSampler.Result lockWait;
      try (LockWaitSampler sampler = LockWaitSampler.start(database)) {
        clock.windowStart = System.nanoTime();
        TimeUnit.NANOSECONDS.sleep(window.toNanos());
        awaitFirstCountedCall(clock);
        clock.windowEnd = System.nanoTime();
        lockWait = sampler.stop();
      }
      long walAfter = BenchSql.currentWalBytes(control);

      clock.stopped = true;
      for (Worker worker : workers) {
        worker.join();
      }
      double keepAliveSpanSeconds = (System.nanoTime() - cellStart) / 1e9;
      closeAll(connections);
      database.awaitBackendsGone(pids);
      BenchSql.ParentRowCounters writes = BenchSql.parentRowCounters(control).minus(before);

      long calls = workers.stream().mapToLong(w -> w.calls).sum();
      long messages = workers.stream().mapToLong(w -> w.messages).sum();
      long failures = workers.stream().mapToLong(w -> w.failures).sum();
      Latencies latencies = Latencies.merge(workers.stream().map(w -> w.latencies).toList());
      double windowSeconds = (clock.windowEnd - clock.windowStart) / 1e9;
      return new Measurement(strategy.id(), publishers, windowSeconds, calls, messages, latencies, lockWait,
          walAfter - walBefore, writes.updates(), keepAliveSpanSeconds, failures, firstFailure.get());
    } finally {
      clock.stopped = true;
      start.countDown();
      for (Worker worker : workers) {
        worker.join();
      }
      closeAll(connections);
    }
  }

  private static void closeAll(List<Connection> connections) {
    for (Connection connection : connections) {
      try {
        connection.close();
      } catch (SQLException e) {
        // A connection that fails to close is gone either way.
      }
    }
  }

  /**
   * A window shorter than one call (a large batch on a loaded machine, in a short run) would count nothing: the window
   * stays open until one call that started inside it has finished, for at most {@link #MAX_WINDOW_EXTENSION}.
   */
  private static void awaitFirstCountedCall(Clock clock) throws InterruptedException {
    long giveUpAt = System.nanoTime() + MAX_WINDOW_EXTENSION.toNanos();
    while (clock.countedCalls.get() == 0 && System.nanoTime() - giveUpAt < 0) {
      TimeUnit.MILLISECONDS.sleep(5);
    }
  }

  /** The cell's phases, shared by its threads. Long.MAX_VALUE until set. */
  private static final class Clock {
    volatile long windowStart = Long.MAX_VALUE;
    volatile long windowEnd = Long.MAX_VALUE;
    volatile boolean stopped;
    final AtomicLong countedCalls = new AtomicLong();
  }

  private static final class Worker extends Thread {
    private final PublishStrategy.Publisher publisher;
    private final CountDownLatch start;
    private final Clock clock;
    private final AtomicReference<String> firstFailure;
    final Latencies latencies = new Latencies();
    long calls;
    long messages;
    long failures;

    Worker(PublishStrategy.Publisher publisher, CountDownLatch start, Clock clock,
        AtomicReference<String> firstFailure, String name) {
      super(name);
      this.publisher = publisher;
      this.start = start;
      this.clock = clock;
      this.firstFailure = firstFailure;
    }

    @Override
    public void run() {
      try {
        start.await();
      } catch (InterruptedException e) {
        return;
      }
      while (!clock.stopped) {
        long begin = System.nanoTime();
        int stored;
        try {
          stored = publisher.publish();
        } catch (RuntimeException e) {
          failures++;
          firstFailure.compareAndSet(null, e.toString());
          // A broken connection fails at once: do not spin the shared CPUs on it.
          LockSupport.parkNanos(1_000_000);
          continue;
        }
        long end = System.nanoTime();
        if (begin >= clock.windowStart && end <= clock.windowEnd) {
          latencies.record(end - begin);
          calls++;
          clock.countedCalls.incrementAndGet();
          messages += stored;
        }
      }
    }
  }
}
