package dev.msgqueue;

import dev.msgqueue.internal.maintenance.Maintenance;
import dev.msgqueue.internal.support.Arguments;
import dev.msgqueue.internal.support.Contexts;
import dev.msgqueue.internal.support.DaemonThreads;
import dev.msgqueue.internal.support.QueueContext;
import java.sql.Connection;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.jooq.DSLContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs the maintenance a service needs — {@link MsgQueueRepository#reapIdleQueues()} and
 * {@link MsgQueueRepository#cleanUpExpiredMessages()} — on an interval, on one daemon thread it owns.
 *
 * <p><b>One replica per tick.</b> Each tick first takes a transaction-level advisory lock
 * ({@code pg_try_advisory_xact_lock(key)}) on a connection of its own, holds it while the jobs run (each job in its own
 * short transactions, on other connections), and releases it by ending that transaction. If another replica holds the
 * lock, the tick is {@link HousekeepingRun.Outcome#SKIPPED SKIPPED} at once: it never waits. A transaction-level lock
 * lives and dies with its transaction, so it is safe behind a pooler in transaction mode (PgBouncer), and a replica
 * that dies mid-tick frees it with its connection.
 *
 * <p><b>Overlapping ticks.</b> The lock makes overlap rare, not impossible: a replica whose lock session dies (killed,
 * or its connection lost) learns it only when its tick ends its lock transaction, so its jobs go on for the rest of
 * the tick while another replica already holds the lock and runs its own. That tick then
 * reports {@link HousekeepingRun.Outcome#FAILED FAILED}, though what its jobs committed stands. Overlap is safe:
 * every statement of both jobs locks its rows {@code FOR UPDATE SKIP LOCKED}, so two reapers, two cleanups, or a
 * reaper and a cleanup running at once each act on rows the other does not hold, never wait for each other and cannot
 * deadlock; a queue whose expired messages the other job holds is kept until the next tick, never deleted under a
 * message. Overlap can only make a tick find less to do. It cannot orphan or delete an unexpired message, delete a
 * queue twice, or fail a tick.
 *
 * <p><b>Statistics.</b> When {@link MicrometerMetrics} are bound to the repository with their queue gauges (the
 * default), every tick (on every replica that binds them,
 * whether it did the work or skipped it) also reads the statistics of every queue once and refreshes the statistics
 * gauges from it: a scrape never queries the database. While the message table holds at most 50,000 messages (the
 * planner's estimate) they are exact, as {@link MsgQueueRepository#queueStatistics()}; above, they are estimated
 * from a block sample of about 20,000 messages, so a tick's read costs about the same at 10 million messages as at
 * 50,000 instead of a full scan per replica per tick.
 *
 * <p><b>Failures</b> are logged, recorded as the {@link #lastRun()}, and the next tick runs as usual.
 *
 * <p><b>Scheduling.</b> {@link #start()} runs the first tick after a random delay in [0, {@code firstRunJitter}]
 * (so replicas started together spread out), then one tick {@code interval} after the end of the previous one.
 * Services with a scheduler of their own skip {@link #start()} and call {@link #runOnce()}. {@link #close()} stops the
 * thread.
 *
 * <p>The repository must take its connections from a pool or data source (not a single connection): the lock's
 * transaction stays open on one connection while the jobs commit on others, so a tick needs two connections at once.
 * The lock, the jobs and the statistics read all run on the repository's own connections (its {@code ownConnections}
 * when it was created over a transaction-joining context): a tick run inside a caller's transaction neither commits
 * nor ends it.
 */
public final class Housekeeper implements AutoCloseable {
  /** The interval when none is set: one minute. */
  public static final Duration DEFAULT_INTERVAL = Duration.ofMinutes(1);
  /** The shortest interval accepted. */
  public static final Duration MIN_INTERVAL = Duration.ofSeconds(1);
  /** The longest interval accepted. */
  public static final Duration MAX_INTERVAL = Duration.ofDays(1);
  /**
   * The advisory lock key when none is set: the bytes of {@code "msgqueue"} as a {@code bigint}. Every replica of
   * every service sharing one msgqueue schema must use the same key; schemas sharing a database may use distinct keys.
   */
  public static final long DEFAULT_ADVISORY_LOCK_KEY = 0x6d73677175657565L;
  /** How long {@link #close()} waits for a tick in progress before interrupting it. */
  static final Duration CLOSE_WAIT = Duration.ofSeconds(30);

  private static final Logger log = LoggerFactory.getLogger(Housekeeper.class);

  private final QueueContext context;
  private final Maintenance maintenance;
  private final Duration interval;
  private final Duration firstRunJitter;
  private final long advisoryLockKey;
  private final Runnable whileHoldingLock;
  private final Clock clock = Clock.systemUTC();
  private final AtomicReference<HousekeepingRun> lastRun = new AtomicReference<>();
  private final AtomicReference<QueueStatisticsSnapshot> lastStatistics = new AtomicReference<>();
  private final AtomicInteger consecutiveFailures = new AtomicInteger();
  private final AtomicBoolean started = new AtomicBoolean();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final ScheduledExecutorService scheduler;

  private Housekeeper(Builder builder) {
    this.context = builder.repository.context();
    this.maintenance = new Maintenance(context);
    this.interval = builder.interval;
    this.firstRunJitter = builder.firstRunJitter == null ? builder.interval : builder.firstRunJitter;
    this.advisoryLockKey = builder.advisoryLockKey;
    this.whileHoldingLock = builder.whileHoldingLock;
    ScheduledThreadPoolExecutor executor =
        new ScheduledThreadPoolExecutor(1, runnable -> DaemonThreads.newThread("msgqueue-housekeeper", runnable));
    executor.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
    executor.setContinueExistingPeriodicTasksAfterShutdownPolicy(false);
    this.scheduler = executor;
  }

  /** A builder for a housekeeper of {@code repository}, which must take connections from a pool or data source. */
  public static Builder builder(MsgQueueRepository repository) {
    return new Builder(repository);
  }

  /**
   * Starts the schedule on the housekeeper's thread: the first tick after a random delay of at most
   * {@code firstRunJitter}, then every {@code interval} after the previous tick ended.
   *
   * @return this
   * @throws IllegalStateException if already started or closed
   */
  public Housekeeper start() {
    if (closed.get()) {
      throw new IllegalStateException("housekeeper is closed");
    }
    if (!started.compareAndSet(false, true)) {
      throw new IllegalStateException("housekeeper already started");
    }
    long firstDelayMillis = ThreadLocalRandom.current().nextLong(firstRunJitter.toMillis() + 1);
    scheduler.scheduleWithFixedDelay(this::tick, firstDelayMillis, interval.toMillis(), TimeUnit.MILLISECONDS);
    log.info("housekeeper started: every {}, first run in {} ms", interval, firstDelayMillis);
    return this;
  }

  /**
   * Runs one tick now on the calling thread: takes the advisory lock without waiting, and if it got it, reaps idle
   * queues and deletes expired messages. Never throws for a database failure: it is logged and returned as a
   * {@link HousekeepingRun.Outcome#FAILED FAILED} run.
   *
   * @return what the tick did (also kept as {@link #lastRun()})
   */
  public HousekeepingRun runOnce() {
    Instant startedAt = clock.instant();
    long startNanos = System.nanoTime();
    HousekeepingRun run;
    try {
      Work work = underLock();
      Duration took = Duration.ofNanos(System.nanoTime() - startNanos);
      run = work == null
          ? new HousekeepingRun(startedAt, took, HousekeepingRun.Outcome.SKIPPED, 0, 0, null)
          : new HousekeepingRun(startedAt, took, HousekeepingRun.Outcome.COMPLETED, work.reaped(), work.deleted(),
              null);
      consecutiveFailures.set(0);
      log.debug("housekeeping {}", run);
    } catch (RuntimeException e) {
      run = new HousekeepingRun(startedAt, Duration.ofNanos(System.nanoTime() - startNanos),
          HousekeepingRun.Outcome.FAILED, 0, 0, e.toString());
      int failures = consecutiveFailures.incrementAndGet();
      log.warn("housekeeping failed ({} in a row); the next tick runs as usual", failures, e);
    }
    lastRun.set(run);
    refreshStatistics();
    return run;
  }

  /** Every replica refreshes its statistics gauges each tick, whichever replica did the work. */
  private void refreshStatistics() {
    try {
      QueueStatisticsSnapshot read = maintenance.refreshStatistics();
      if (read != null) {
        lastStatistics.set(read);
      }
    } catch (RuntimeException e) {
      log.warn("housekeeper: could not read the queue statistics; the gauges keep their previous values", e);
    }
  }

  /** The most recent tick, scheduled or {@link #runOnce() explicit}; empty before the first. */
  public Optional<HousekeepingRun> lastRun() {
    return Optional.ofNullable(lastRun.get());
  }

  /**
   * The statistics of every queue as the most recent tick that read them read them (for the statistics gauges of
   * {@link MicrometerMetrics}): empty before the first such tick, and while no metrics with queue gauges are bound to
   * the repository, since a tick reads them only then. A failed read keeps the previous one.
   */
  public Optional<QueueStatisticsSnapshot> lastStatistics() {
    return Optional.ofNullable(lastStatistics.get());
  }

  /** How many ticks in a row have failed; 0 after any tick that completed or was skipped. */
  public int consecutiveFailures() {
    return consecutiveFailures.get();
  }

  public Duration interval() {
    return interval;
  }

  /** Whether {@link #start()} was called and {@link #close()} was not. */
  public boolean isRunning() {
    return started.get() && !closed.get();
  }

  /**
   * Stops the schedule and its thread: no tick starts after this returns, and a tick in progress is waited for (up
   * to 30 s, then interrupted). Idempotent; {@link #runOnce()} still works afterwards.
   */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    scheduler.shutdown();
    try {
      if (!scheduler.awaitTermination(CLOSE_WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
        log.warn("housekeeper: a tick still running after {}; interrupting it", CLOSE_WAIT);
        scheduler.shutdownNow();
      }
    } catch (InterruptedException e) {
      scheduler.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  /** Whether the housekeeper's thread has ended (after {@link #close()}). */
  boolean isTerminated() {
    return scheduler.isTerminated();
  }

  private void tick() {
    try {
      runOnce();
    } catch (Throwable t) {
      // A periodic task that throws is never run again: log and keep the schedule alive.
      log.error("housekeeping tick failed unexpectedly; the next tick runs as usual", t);
    }
  }

  /** @return the work done, or {@code null} if another housekeeper holds the lock */
  private Work underLock() {
    // The repository's own connections: a tick's commit must never be the commit of a transaction the caller has
    // open on this thread (a repository created over a transaction-joining context).
    DSLContext ctx = context.own();
    return ctx.connectionResult(connection -> {
      boolean autoCommit = connection.getAutoCommit();
      connection.setAutoCommit(false);
      boolean committed = false;
      try {
        Work work = null;
        // The lock statement on the connection it must hold the lock on, under the repository's deadlines.
        if (Maintenance.tryTurn(ctx.configuration().derive(connection).dsl(), advisoryLockKey)) {
          whileHoldingLock.run();
          List<String> reaped = maintenance.reapIdleQueues();
          int deleted = maintenance.cleanUpExpiredMessages();
          work = new Work(reaped.size(), deleted);
        }
        // Ending the transaction releases the lock; the jobs committed on their own connections.
        connection.commit();
        committed = true;
        return work;
      } finally {
        if (!committed) {
          rollbackQuietly(connection);
        }
        restoreAutoCommit(connection, autoCommit);
      }
    });
  }

  private static void rollbackQuietly(Connection connection) {
    try {
      connection.rollback();
    } catch (Exception e) {
      log.debug("housekeeper: rollback of the lock transaction failed", e);
    }
  }

  private static void restoreAutoCommit(Connection connection, boolean autoCommit) {
    try {
      if (!connection.isClosed()) {
        connection.setAutoCommit(autoCommit);
      }
    } catch (Exception e) {
      log.debug("housekeeper: could not restore the lock connection's autocommit", e);
    }
  }

  private record Work(int reaped, int deleted) { }

  /** Builds a {@link Housekeeper}; every value is checked when it is set. */
  public static final class Builder {
    private final MsgQueueRepository repository;
    private Duration interval = DEFAULT_INTERVAL;
    private Duration firstRunJitter;
    private long advisoryLockKey = DEFAULT_ADVISORY_LOCK_KEY;
    private Runnable whileHoldingLock = () -> { };

    private Builder(MsgQueueRepository repository) {
      if (repository == null) {
        throw new IllegalArgumentException("repository is null");
      }
      if (Contexts.overOneConnection(repository.context().own())) {
        throw new IllegalArgumentException("the housekeeper needs a repository that takes connections from a pool or"
            + " data source, not one bound to a single connection");
      }
      this.repository = repository;
    }

    /**
     * Time between the end of one tick and the start of the next; default {@link #DEFAULT_INTERVAL}.
     *
     * @throws IllegalArgumentException unless in [{@link #MIN_INTERVAL}, {@link #MAX_INTERVAL}]
     */
    public Builder interval(Duration value) {
      Arguments.requireWithin(value, "interval", MIN_INTERVAL, MAX_INTERVAL);
      this.interval = value;
      return this;
    }

    /**
     * The longest random delay before the first scheduled tick; default: the interval. Zero runs the first tick at
     * once.
     *
     * @throws IllegalArgumentException unless in [0, {@link #MAX_INTERVAL}]
     */
    public Builder firstRunJitter(Duration value) {
      Arguments.requireWithin(value, "firstRunJitter", Duration.ZERO, MAX_INTERVAL);
      this.firstRunJitter = value;
      return this;
    }

    /** The advisory lock key the replicas take turns on; default {@link #DEFAULT_ADVISORY_LOCK_KEY}. */
    public Builder advisoryLockKey(long value) {
      this.advisoryLockKey = value;
      return this;
    }

    /** Runs after the lock is taken and before the jobs: lets tests hold a tick in progress. */
    Builder whileHoldingLock(Runnable value) {
      this.whileHoldingLock = Objects.requireNonNull(value, "whileHoldingLock");
      return this;
    }

    /** A housekeeper ready for {@link Housekeeper#runOnce()} or {@link Housekeeper#start()}. */
    public Housekeeper build() {
      return new Housekeeper(this);
    }
  }
}
