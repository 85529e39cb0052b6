package dev.msgqueue.bench;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.generateSeries;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;
import static org.jooq.impl.DSL.when;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.MicrometerMetrics;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import dev.msgqueue.Housekeeper;
import dev.msgqueue.HousekeepingRun;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.QueueStatistics;
import dev.msgqueue.Subscriber;
import dev.msgqueue.WakeupListener;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.Supplier;
import org.jooq.DSLContext;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.jooq.Field;
import org.jooq.Record1;
import org.jooq.SQLDialect;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.DefaultConfiguration;
import org.jooq.impl.DefaultExecuteListenerProvider;
import org.jooq.impl.SQLDataType;

/**
 * Scenario 8, scale: how msgqueue's costs grow with the backlog, the number of queues, the housekeeping load and the
 * number of idle subscribers. Four curves:
 *
 * <ul>
 *   <li><b>backlog</b>: N messages over {@value #BACKLOG_QUEUES} queues (10% expired, 10% ASSIGNED, the rest ready)
 *       plus one queue of its own; claim p50/p99 and the drain rate of that queue, table and index sizes, and the
 *       statistics refresh (exact, and the estimate the housekeeper uses on large tables);
 *   <li><b>queues</b>: publish throughput to Q distinct existing auto-deleted queues at one thread count, with the
 *       keep-alive statements and {@code "MessageQueue"} row writes it caused;
 *   <li><b>housekeeping</b>: one tick over idle queues holding expired messages: duration, rows/s, the longest
 *       transaction of the tick that held row locks, and publish and claim p99 of a concurrent load during the tick
 *       against the same load without one;
 *   <li><b>idle subscribers</b>: S subscribers on S queues sharing one pool and one WakeupListener: server
 *       transactions/s, server and client CPU and JVM threads at idle, then the delivery latency of messages published
 *       to random queues.
 * </ul>
 */
record ScaleScenario(ScaleSettings settings) implements Scenario {
  static final String ID = "scale";
  static final String CHART_PNG = "scale.png";
  static final int BACKLOG_QUEUES = 1_000;
  static final int CLAIM_BATCH = 10;
  static final int DRAIN_BATCH = 100;
  static final String HOT_QUEUE = "scale-hot";
  private static final String LOAD_QUEUE = "scale-load";
  static final String THROUGHPUT = "throughput";
  static final String TRACKING_ALL = "tracking-all";
  static final String WRITES = "writes";
  private static final String HOUSEKEEPER_APP = "scale-housekeeper";
  /** Rows per generating statement: one transaction each, so progress shows and no statement runs for minutes. */
  private static final int INSERT_CHUNK = 1_000_000;
  private static final Duration DELIVERY_TIMEOUT = Duration.ofSeconds(15);
  private static final int SUBSCRIBER_POOL = 20;
  /**
   * Messages delivered before an idle-subscriber cell's settle. Without them its first deliveries are the JVM's first
   * publishes, claims that find messages and handler starts (class loading, interpreted code), and the cell's p99
   * would be one of them. A service has published and consumed before it goes quiet.
   */
  // In two loaded runs without them the first 10 deliveries took a median of 58 and 73 ms against 23 and 17 ms for
  // the other 190, so with 50 deliveries the p99 was one of the first.
  private static final int WARMUP_DELIVERIES = 200;

  @Override
  public String id() {
    return ID;
  }

  @Override
  public String title() {
    return "8. Scale (" + settings.form() + "): claim and drain against the backlog, publish against the number of"
        + " queues, a housekeeping tick, idle subscribers";
  }

  @Override
  public int steps() {
    return (runs("backlog") ? settings.backlogs().size() : 0)
        + (runs("queues") ? 2 * settings.queueCounts().size() + 1 : 0)
        + (runs("housekeeping") ? settings.maintenanceDutyCycles().size() : 0)
        + (runs("subscribers") ? settings.subscriberCounts().size() : 0);
  }

  @Override
  public Duration estimate() {
    long seconds = 0;
    // Loading ran at about 12,500 generated messages/s on a loaded 2-core machine (10M took 13 minutes).
    for (int backlog : settings.backlogs()) {
      seconds += 5 + backlog / 12_500;
    }
    seconds += (2 * settings.queueCounts().size() + 1) * (settings.publishFor().toSeconds() + 3);
    seconds += settings.maintenanceDutyCycles().stream()
        .mapToLong(duty -> 10 + (long) ((settings.expiredMessages() / 80_000 + settings.idleQueues() / 20_000) / duty))
        .sum();
    for (int subscribers : settings.subscriberCounts()) {
      seconds += settings.settle().toSeconds() + settings.idleFor().toSeconds() + 3 + subscribers / 50;
    }
    return Duration.ofSeconds(Math.max(1, seconds));
  }

  @Override
  public Result run(BenchContext context) throws Exception {
    BenchDatabase database = context.database();
    List<BacklogRow> backlogRows = new ArrayList<>();
    for (int backlog : runs("backlog") ? settings.backlogs() : List.<Integer>of()) {
      context.step(String.format(Locale.ROOT, "scale: backlog of %,d messages", backlog));
      backlogRows.add(backlog(database, backlog));
    }
    List<QueuesRow> queueRows = new ArrayList<>();
    int defaultTracked = MsgQueueConfig.defaults().maxTrackedQueues();
    List<Integer> queueCounts = runs("queues") ? settings.queueCounts() : List.of();
    for (int queues : queueCounts) {
      context.step(String.format(Locale.ROOT, "scale: publish to %,d queues, library keep-alive", queues));
      queueRows.add(queues(database, queues, THROUGHPUT, MsgQueueConfig.defaults().keepAliveInterval(),
          defaultTracked));
    }
    int most = settings.queueCounts().get(settings.queueCounts().size() - 1);
    if (most > defaultTracked && runs("queues")) {
      context.step(String.format(Locale.ROOT, "scale: publish to %,d queues, tracking all", most));
      queueRows.add(queues(database, most, TRACKING_ALL, MsgQueueConfig.defaults().keepAliveInterval(), most));
    }
    for (int queues : queueCounts) {
      context.step(String.format(Locale.ROOT, "scale: publish to %,d queues, keep-alive every %d ms", queues,
          settings.keepAliveInterval().toMillis()));
      queueRows.add(queues(database, queues, WRITES, settings.keepAliveInterval(), defaultTracked));
    }
    List<HousekeepingRow> housekeeping = new ArrayList<>();
    for (double duty : runs("housekeeping") ? settings.maintenanceDutyCycles() : List.<Double>of()) {
      context.step(String.format(Locale.ROOT,
          "scale: housekeeping over %,d idle queues, %,d expired messages, maintenance duty cycle %.2f",
          settings.idleQueues(), settings.expiredMessages(), duty));
      housekeeping.add(housekeeping(database, duty));
    }
    List<SubscribersRow> subscriberRows = new ArrayList<>();
    for (int subscribers : runs("subscribers") ? settings.subscriberCounts() : List.<Integer>of()) {
      context.step(String.format(Locale.ROOT, "scale: %,d idle subscribers", subscribers));
      subscriberRows.add(idleSubscribers(database, subscribers));
    }
    database.reset();
    return new ScaleResult(settings.form(), backlogRows, queueRows, housekeeping, subscriberRows);
  }

  /** Whether this run includes {@code curve} ({@code --scale-cells}). */
  private boolean runs(String curve) {
    return settings.cells().contains(curve);
  }

  // ---------------------------------------------------------------- backlog

  private BacklogRow backlog(BenchDatabase database, int backlog) throws Exception {
    database.reset();
    DSLContext control = database.control();
    long loadStart = System.nanoTime();
    createQueues(control, "scale-b-", BACKLOG_QUEUES, false, Duration.ZERO);
    createQueues(control, HOT_QUEUE, 1, false, Duration.ZERO);
    for (int from = 0; from < backlog; from += INSERT_CHUNK) {
      insertMessages(control, "scale-b-", BACKLOG_QUEUES, from, Math.min(backlog, from + INSERT_CHUNK) - 1, true);
    }
    // The hot queue's rows are the newest, as a queue a consumer works through would be.
    insertMessages(control, HOT_QUEUE, 1, 0, settings.hotQueueMessages() - 1, true);
    vacuumAnalyze(control);
    double loadSeconds = (System.nanoTime() - loadStart) / 1e9;
    long tableBytes = relationBytes(control, "pg_table_size");
    long indexBytes = relationBytes(control, "pg_indexes_size");

    try (HikariDataSource pool = pool(database, "scale-backlog", 4)) {
      MsgQueueRepository repository = MsgQueueRepository.create(pool, MsgQueueConfig.defaults());
      double exactMillis = medianMillis(3, () -> repository.queueStatistics());
      List<QueueStatistics> exact = repository.queueStatistics();
      long exactTotal = exact.stream().mapToLong(QueueStatistics::total).sum();
      GaugeRefresh gauges = gaugeRefresh(database, repository);

      Latencies claims = new Latencies();
      for (int i = 0; i < settings.claimSamples(); i++) {
        long start = System.nanoTime();
        List<ClaimedMessage> claimed = repository.claim(HOT_QUEUE, CLAIM_BATCH);
        claims.record(System.nanoTime() - start);
        repository.ack(claimed);
      }
      long drained = 0;
      long drainStart = System.nanoTime();
      while (true) {
        List<ClaimedMessage> claimed = repository.claim(HOT_QUEUE, DRAIN_BATCH);
        if (claimed.isEmpty()) {
          break;
        }
        repository.ack(claimed);
        drained += claimed.size();
      }
      double drainSeconds = (System.nanoTime() - drainStart) / 1e9;
      double[] claimMillis = claims.percentilesMillis(0.50, 0.99, 1.0);
      return new BacklogRow(backlog, BACKLOG_QUEUES, settings.hotQueueMessages(), loadSeconds, tableBytes,
          indexBytes, claims.size(), claimMillis[0], claimMillis[1], claimMillis[2], drained,
          drained / Math.max(1e-9, drainSeconds), exactMillis, exact.size(), gauges.medianMillis(),
          exactTotal == 0 ? 0 : (gauges.total() - exactTotal) / (double) exactTotal);
    }
  }

  /** The gauges' statistics read of a housekeeper tick, and the sum of every count the gauges then show. */
  private record GaugeRefresh(double medianMillis, long total) { }

  /**
   * Times the statistics read of housekeeper ticks with metrics bound, three times: each tick is skipped (this
   * session holds the housekeepers' advisory lock), so besides one lock attempt the read is all it does, as on every
   * replica but the one doing the work.
   */
  private static GaugeRefresh gaugeRefresh(BenchDatabase database, MsgQueueRepository repository) {
    DSLContext control = database.control();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (MicrometerMetrics metrics = MicrometerMetrics.bind(registry, repository);
        Housekeeper housekeeper = Housekeeper.builder(repository).build()) {
      control.select(function("pg_advisory_lock", SQLDataType.OTHER,
          inline(Housekeeper.DEFAULT_ADVISORY_LOCK_KEY))).fetch();
      try {
        double[] millis = new double[3];
        for (int i = 0; i < millis.length; i++) {
          HousekeepingRun run = housekeeper.runOnce();
          if (run.outcome() != HousekeepingRun.Outcome.SKIPPED) {
            throw new IllegalStateException("the tick was meant to be skipped: " + run);
          }
          millis[i] = run.duration().toNanos() / 1e6;
        }
        Arrays.sort(millis);
        double total = registry.find("msgqueue.queue.messages").gauges().stream()
            .mapToDouble(io.micrometer.core.instrument.Gauge::value).sum();
        return new GaugeRefresh(millis[1], Math.round(total));
      } finally {
        control.select(function("pg_advisory_unlock", SQLDataType.BOOLEAN,
            inline(Housekeeper.DEFAULT_ADVISORY_LOCK_KEY))).fetch();
      }
    }
  }

  // ---------------------------------------------------------------- queues

  /**
   * Publishes from {@code publishThreads} threads to random queues of {@code queues} existing auto-deleted ones.
   * {@link #THROUGHPUT} and {@link #TRACKING_ALL}: the library's keep-alive interval, every queue row written just
   * before (a service in its steady state), so a keep-alive statement finds nothing to write and only costs its round
   * trip; {@link #WRITES}: a short interval and rows last written an hour ago, so every interval's first publish to a
   * queue writes it.
   */
  private QueuesRow queues(BenchDatabase database, int queues, String variant, Duration interval, int maxTracked)
      throws Exception {
    database.reset();
    DSLContext control = database.control();
    createQueues(control, "scale-q-", queues, true, variant.equals(WRITES) ? Duration.ofHours(1) : Duration.ZERO);
    BenchSql.ParentRowCounters before = BenchSql.parentRowCounters(control);
    QueueSpec[] specs = new QueueSpec[queues];
    for (int i = 0; i < queues; i++) {
      specs[i] = QueueSpec.autoDeleted("scale-q-" + i);
    }
    MsgQueueConfig config = MsgQueueConfig.builder().keepAliveInterval(interval)
        .reapIdleThreshold(Duration.ofHours(2)).maxTrackedQueues(maxTracked).build();
    StatementCounter counter = new StatementCounter();
    logQueueRowWrites(control);
    AtomicLongArray published = new AtomicLongArray(queues);
    AtomicLong failures = new AtomicLong();
    double seconds;
    long messages;
    long serverCpuNanos;
    long clientCpuNanos;
    long clientCpuBefore = processCpuNanos();
    try (HikariDataSource pool = pool(database, "scale-queues", settings.publishThreads() + 2)) {
      DSLContext counted = DSL.using(new DefaultConfiguration().set(pool).set(SQLDialect.POSTGRES)
          .set(new DefaultExecuteListenerProvider(counter)));
      MsgQueueRepository repository = MsgQueueRepository.create(counted, config);
      AtomicBoolean running = new AtomicBoolean(true);
      CountDownLatch done = new CountDownLatch(settings.publishThreads());
      long start = System.nanoTime();
      for (int t = 0; t < settings.publishThreads(); t++) {
        Thread thread = new Thread(() -> {
          ThreadLocalRandom random = ThreadLocalRandom.current();
          try {
            while (running.get()) {
              int queue = random.nextInt(queues);
              try {
                repository.publish(specs[queue], BenchContext.PAYLOAD);
                published.incrementAndGet(queue);
              } catch (RuntimeException e) {
                failures.incrementAndGet();
              }
            }
          } finally {
            done.countDown();
          }
        }, "scale-publisher-" + t);
        thread.start();
      }
      Thread.sleep(settings.publishFor().toMillis());
      running.set(false);
      done.await();
      seconds = (System.nanoTime() - start) / 1e9;
      // The pool's backends were started for this cell: their whole CPU time is the cell's.
      serverCpuNanos = sessionCpuNanos(control, "scale-queues");
      clientCpuNanos = processCpuNanos() - clientCpuBefore;
    }
    awaitNoOtherSessions(database);
    database.flushStatistics();
    BenchSql.ParentRowCounters written = BenchSql.parentRowCounters(control).minus(before);
    QueueRowWrites logged = QueueRowWrites.read(control);
    stopLoggingQueueRowWrites(control);
    messages = 0;
    int distinct = 0;
    for (int i = 0; i < queues; i++) {
      messages += published.get(i);
      distinct += published.get(i) > 0 ? 1 : 0;
    }
    double intervals = seconds / (interval.toNanos() / 1e9);
    return new QueuesRow(queues, variant, maxTracked, settings.publishThreads(), seconds, messages, messages / seconds, failures.get(),
        distinct, interval.toMillis(), intervals, counter.keepAlives.get(), logged.writes(), written.updates(),
        logged.mostOfOneQueue(), logged.shortestGapMillis(), counter.all.get() / (double) Math.max(1, messages),
        counter.notifies.get() / (double) Math.max(1, messages), serverCpuNanos / 1e3 / Math.max(1, messages),
        clientCpuNanos / 1e3 / Math.max(1, messages));
  }

  /**
   * Counts the statements a repository runs: all of them, its keep-alives (alone, or embedded in the publish's insert)
   * and its wake-up notifications.
   */
  private static final class StatementCounter implements ExecuteListener {
    private static final long serialVersionUID = 1L;
    final AtomicLong all = new AtomicLong();
    final AtomicLong keepAlives = new AtomicLong();
    final AtomicLong notifies = new AtomicLong();

    @Override
    public void executeEnd(ExecuteContext ctx) {
      String sql = ctx.sql();
      if (sql == null) {
        return;
      }
      all.incrementAndGet();
      if (sql.contains("pg_notify")) {
        notifies.incrementAndGet();
      }
      if (sql.contains("update \"MessageQueue\"")) {
        keepAlives.incrementAndGet();
      }
    }
  }

  /**
   * Every write of a queue row's {@code "lastActive"} during a cell, with the value written, logged by the server (a
   * trigger of the benchmark's own, on its own database): the keep-alive can be part of the publish's insert, whose
   * row count is the messages', so the client cannot tell which statements wrote. Plain SQL: jOOQ has no DDL for
   * PL/pgSQL triggers.
   */
  private static void logQueueRowWrites(DSLContext control) {
    control.execute("create table if not exists bench_last_active_writes (name varchar not null,"
        + " at timestamp(3) not null)");
    control.execute("create or replace function bench_log_last_active() returns trigger language plpgsql as $$"
        + " begin insert into bench_last_active_writes values (new.name, new.\"lastActive\"); return new; end $$");
    control.execute("create or replace trigger bench_last_active_written after update of \"lastActive\""
        + " on \"MessageQueue\" for each row when (new.\"lastActive\" is distinct from old.\"lastActive\")"
        + " execute function bench_log_last_active()");
  }

  /** Drops what {@link #logQueueRowWrites} created, so that no other cell pays for the trigger. */
  private static void stopLoggingQueueRowWrites(DSLContext control) {
    control.execute("drop trigger bench_last_active_written on \"MessageQueue\"");
    control.execute("drop function bench_log_last_active()");
    control.execute("drop table bench_last_active_writes");
  }

  /**
   * What {@link #logQueueRowWrites} logged: writes, the most of one queue, the shortest gap between two of one (between
   * the {@code "lastActive"} values written, which is what the keep-alive's age condition compares).
   */
  private record QueueRowWrites(long writes, long mostOfOneQueue, double shortestGapMillis) {
    static QueueRowWrites read(DSLContext control) {
      org.jooq.Record row = control.fetchSingle(
          "select count(*), coalesce(max(n), 0), coalesce(min(gap_ms), -1) from (select count(*) over (partition by"
              + " name) as n, extract(epoch from at - lag(at) over (partition by name order by at)) * 1000 as gap_ms"
              + " from bench_last_active_writes) w");
      return new QueueRowWrites(row.get(0, Long.class), row.get(1, Long.class), row.get(2, Double.class));
    }
  }

  // ---------------------------------------------------------------- housekeeping

  private HousekeepingRow housekeeping(BenchDatabase database, double dutyCycle) throws Exception {
    database.reset();
    DSLContext control = database.control();
    createQueues(control, "scale-h-", settings.idleQueues(), true, Duration.ofHours(2));
    for (int from = 0; from < settings.expiredMessages(); from += INSERT_CHUNK) {
      insertMessages(control, "scale-h-", settings.idleQueues(), from,
          Math.min(settings.expiredMessages(), from + INSERT_CHUNK) - 1, false);
    }
    createQueues(control, LOAD_QUEUE, 1, false, Duration.ZERO);
    vacuumAnalyze(control);
    database.checkpointAfterLoad();
    long rowsBefore = housekeepingRows(control);

    try (HikariDataSource housekeeperPool = pool(database, HOUSEKEEPER_APP, 4);
        HikariDataSource loadPool = pool(database, "scale-load", 4)) {
      MsgQueueRepository housekeeping = MsgQueueRepository.create(housekeeperPool,
          MsgQueueConfig.builder().maintenanceDutyCycle(dutyCycle).build());
      Housekeeper housekeeper = Housekeeper.builder(housekeeping).build();
      MsgQueueRepository load = MsgQueueRepository.create(loadPool, MsgQueueConfig.defaults());
      QueueSpec loadQueue = QueueSpec.durable(LOAD_QUEUE);
      // Phase 0: without a tick; phase 1: during the tick.
      AtomicLong phase = new AtomicLong();
      AtomicBoolean running = new AtomicBoolean(true);
      Latencies[][] publishes = {{new Latencies(), new Latencies()}, {new Latencies(), new Latencies()}};
      Latencies[] claims = {new Latencies(), new Latencies()};
      List<Thread> threads = new ArrayList<>();
      for (int p = 0; p < 2; p++) {
        Latencies[] own = {publishes[0][p], publishes[1][p]};
        threads.add(new Thread(() -> {
          while (running.get()) {
            int at = (int) phase.get();
            long start = System.nanoTime();
            load.publish(loadQueue, BenchContext.PAYLOAD);
            own[at].record(System.nanoTime() - start);
            pause(2);
          }
        }, "scale-load-publisher-" + p));
      }
      threads.add(new Thread(() -> {
        while (running.get()) {
          int at = (int) phase.get();
          long start = System.nanoTime();
          List<ClaimedMessage> claimed = load.claim(LOAD_QUEUE, CLAIM_BATCH);
          claims[at].record(System.nanoTime() - start);
          load.ack(claimed);
          pause(5);
        }
      }, "scale-load-claimer"));
      threads.forEach(Thread::start);
      Thread.sleep(settings.publishFor().toMillis());
      TransactionAgeSampler sampler = TransactionAgeSampler.start(database, HOUSEKEEPER_APP);
      phase.set(1);
      long tickStart = System.nanoTime();
      HousekeepingRun run;
      try {
        run = housekeeper.runOnce();
      } finally {
        running.set(false);
        for (Thread thread : threads) {
          thread.join();
        }
      }
      double tickSeconds = (System.nanoTime() - tickStart) / 1e9;
      double longestLockMillis = sampler.stop();
      long rowsDeleted = rowsBefore - housekeepingRows(control);
      Latencies publishWithout = Latencies.merge(List.of(publishes[0][0], publishes[0][1]));
      Latencies publishDuring = Latencies.merge(List.of(publishes[1][0], publishes[1][1]));
      double[] pw = publishWithout.percentilesMillis(0.5, 0.99);
      double[] pd = publishDuring.percentilesMillis(0.5, 0.99);
      double[] cw = claims[0].percentilesMillis(0.5, 0.99);
      double[] cd = claims[1].percentilesMillis(0.5, 0.99);
      return new HousekeepingRow(settings.idleQueues(), settings.expiredMessages(), dutyCycle, run.outcome().name(),
          run.reapedQueues(), run.deletedExpiredMessages(), tickSeconds, rowsDeleted / Math.max(1e-9, tickSeconds),
          longestLockMillis, publishWithout.size(), pw[0], pw[1], publishDuring.size(), pd[0], pd[1],
          claims[0].size(), cw[0], cw[1], claims[1].size(), cd[0], cd[1]);
    }
  }

  /** Queue and message rows of the housekeeping cell, the concurrent load's own excluded. */
  private static long housekeepingRows(DSLContext control) {
    return control.fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.isDistinctFrom(LOAD_QUEUE))
        + control.fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.ne(LOAD_QUEUE));
  }

  /**
   * Samples, on its own connection every 10 ms, how long the oldest open transaction of the sessions named
   * {@code applicationName} that holds a transaction id (has written or row-locked something) has been open: the
   * longest any row lock of theirs can have been held.
   */
  private static final class TransactionAgeSampler {
    private final Thread thread;
    private final AtomicBoolean running = new AtomicBoolean(true);
    private volatile double longestMillis;
    private volatile RuntimeException failure;

    private TransactionAgeSampler(BenchDatabase database, String applicationName) {
      this.thread = new Thread(() -> {
        try (Connection connection = database.connect()) {
          DSLContext ctx = DSL.using(connection, SQLDialect.POSTGRES);
          Table<?> activity = table(name("pg_catalog", "pg_stat_activity"));
          Field<Double> ageMillis = field("extract(epoch from clock_timestamp() - {0}) * 1000", Double.class,
              field(name("xact_start")));
          while (running.get()) {
            Double age = ctx.select(DSL.max(ageMillis)).from(activity)
                .where(field(name("application_name"), String.class).eq(applicationName))
                .and(field(name("backend_xid")).isNotNull())
                .fetchOne(0, Double.class);
            if (age != null && age > longestMillis) {
              longestMillis = age;
            }
            pause(10);
          }
        } catch (Exception e) {
          failure = new IllegalStateException("sampling transaction ages failed", e);
        }
      }, "scale-transaction-age-sampler");
      thread.setDaemon(true);
    }

    static TransactionAgeSampler start(BenchDatabase database, String applicationName) {
      TransactionAgeSampler sampler = new TransactionAgeSampler(database, applicationName);
      sampler.thread.start();
      return sampler;
    }

    double stop() throws InterruptedException {
      running.set(false);
      thread.join();
      if (failure != null) {
        throw failure;
      }
      return longestMillis;
    }
  }

  // ---------------------------------------------------------------- idle subscribers

  private SubscribersRow idleSubscribers(BenchDatabase database, int subscribers) throws Exception {
    database.reset();
    DSLContext control = database.control();
    createQueues(control, "scale-s-", subscribers, false, Duration.ZERO);
    java.lang.management.ThreadMXBean threadBean = ManagementFactory.getThreadMXBean();
    int threadsBefore = threadBean.getThreadCount();
    ConcurrentHashMap<Long, Long> deliveredAt = new ConcurrentHashMap<>();
    try (HikariDataSource pool = pool(database, "scale-subscribers", SUBSCRIBER_POOL)) {
      MsgQueueRepository repository = MsgQueueRepository.create(pool, MsgQueueConfig.defaults());
      WakeupListener listener = WakeupListener.start(database::connect);
      List<Subscriber> started = new ArrayList<>();
      try {
        long listenDeadline = System.nanoTime() + 10_000_000_000L;
        while (!listener.isListening() && System.nanoTime() < listenDeadline) {
          Thread.sleep(10);
        }
        for (int i = 0; i < subscribers; i++) {
          started.add(Subscriber.builder(repository, QueueSpec.durable("scale-s-" + i),
                  message -> deliveredAt.put(sentNanos(message.payload()), System.nanoTime()))
              .wakeups(listener)
              .closeTimeout(Duration.ofSeconds(2))
              .start());
        }
        warmUpDeliveries(repository, subscribers, deliveredAt);
        Thread.sleep(settings.settle().toMillis());
        int threads = threadBean.getThreadCount() - threadsBefore;
        long xactBefore = committedTransactions(control);
        long serverCpuBefore = serverCpuMillis(control);
        long clientCpuBefore = processCpuNanos();
        long idleStart = System.nanoTime();
        Thread.sleep(settings.idleFor().toMillis());
        double idleSeconds = (System.nanoTime() - idleStart) / 1e9;
        long clientCpu = processCpuNanos() - clientCpuBefore;
        long serverCpuAfter = serverCpuMillis(control);
        long xactAfter = committedTransactions(control);

        List<Long> sent = new ArrayList<>();
        for (int k = 0; k < settings.deliveries(); k++) {
          int queue = ThreadLocalRandom.current().nextInt(subscribers);
          long now = System.nanoTime();
          sent.add(now);
          repository.publish(QueueSpec.durable("scale-s-" + queue), "{\"sentNanos\": " + now + "}");
          Thread.sleep(100);
        }
        long deadline = System.nanoTime() + DELIVERY_TIMEOUT.toNanos();
        while (deliveredAt.size() < sent.size() && System.nanoTime() < deadline) {
          Thread.sleep(10);
        }
        Latencies latencies = new Latencies();
        for (long s : sent) {
          Long at = deliveredAt.get(s);
          if (at != null) {
            latencies.record(at - s);
          }
        }
        double[] millis = latencies.percentilesMillis(0.5, 0.99, 1.0);
        Long firstAt = deliveredAt.get(sent.get(0));
        double firstMillis = firstAt == null ? Double.NaN : (firstAt - sent.get(0)) / 1e6;
        double serverCpuShare = serverCpuBefore < 0 || serverCpuAfter < 0 ? -1
            : (serverCpuAfter - serverCpuBefore) / 1000.0 / idleSeconds;
        return new SubscribersRow(subscribers, idleSeconds, (xactAfter - xactBefore) / idleSeconds,
            clientCpu / 1e9 / idleSeconds, serverCpuShare, threads, sent.size(), latencies.size(), millis[0],
            millis[1], millis[2], firstMillis);
      } finally {
        closeAll(started);
        listener.close();
      }
    }
  }

  /** Publishes {@link #WARMUP_DELIVERIES} messages to random queues of the cell and waits until they are handled. */
  private static void warmUpDeliveries(MsgQueueRepository repository, int subscribers,
      ConcurrentHashMap<Long, Long> deliveredAt) throws InterruptedException {
    for (int k = 0; k < WARMUP_DELIVERIES; k++) {
      int queue = ThreadLocalRandom.current().nextInt(subscribers);
      repository.publish(QueueSpec.durable("scale-s-" + queue), "{\"sentNanos\": " + System.nanoTime() + "}");
      Thread.sleep(5);
    }
    long deadline = System.nanoTime() + DELIVERY_TIMEOUT.toNanos();
    while (deliveredAt.size() < WARMUP_DELIVERIES && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    deliveredAt.clear();
  }

  private static long sentNanos(String payload) {
    String digits = payload.replaceAll("[^0-9-]", "");
    return Long.parseLong(digits);
  }

  private static void closeAll(List<Subscriber> subscribers) throws InterruptedException {
    ExecutorService closer = Executors.newFixedThreadPool(16);
    try {
      subscribers.forEach(subscriber -> closer.execute(subscriber::close));
    } finally {
      closer.shutdown();
      closer.awaitTermination(2, TimeUnit.MINUTES);
    }
  }

  private static long committedTransactions(DSLContext control) {
    return control.select(field(name("xact_commit"), Long.class))
        .from(table(name("pg_catalog", "pg_stat_database")))
        .where(field(name("datname"), String.class).eq(function("current_database", SQLDataType.VARCHAR)))
        .fetchOne(0, Long.class);
  }

  /** CPU time of this database's server processes (from /proc, so only on the server's own machine), or -1. */
  private static long serverCpuMillis(DSLContext control) {
    List<Integer> pids = control.select(field(name("pid"), Integer.class))
        .from(table(name("pg_catalog", "pg_stat_activity")))
        .where(field(name("datname"), String.class).eq(function("current_database", SQLDataType.VARCHAR)))
        .fetch(0, Integer.class);
    long nanos = BenchSql.backendCpuNanos(pids);
    return nanos < 0 ? -1 : nanos / 1_000_000;
  }

  /** The CPU time of the backends of the sessions named {@code applicationName}, since each started. */
  private static long sessionCpuNanos(DSLContext control, String applicationName) {
    return BenchSql.backendCpuNanos(control.select(field(name("pid"), Integer.class))
        .from(table(name("pg_catalog", "pg_stat_activity")))
        .where(field(name("application_name"), String.class).eq(applicationName))
        .fetch(0, Integer.class));
  }

  private static long processCpuNanos() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }

  // ---------------------------------------------------------------- data

  /**
   * {@code count} queues {@code prefix0 .. prefix<count-1>} (or just {@code prefix} for one), in one
   * {@code INSERT ... SELECT FROM generate_series}: rows generated by the server, not sent one by one.
   */
  private static void createQueues(DSLContext ctx, String prefix, int count, boolean autoDeleted, Duration idleFor) {
    Table<Record1<Integer>> series = generateSeries(0, count - 1).as("g", "n");
    Field<Integer> n = series.field("n", Integer.class);
    Field<String> queueName = count == 1 ? inline(prefix) : inline(prefix).concat(n.cast(SQLDataType.VARCHAR));
    ctx.insertInto(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME, MESSAGE_QUEUE.DURABLE, MESSAGE_QUEUE.AUTO_DELETED,
            MESSAGE_QUEUE.LAST_ACTIVE)
        .select(select(queueName, inline(!autoDeleted), inline(autoDeleted), BenchSql.utcNowMinus(idleFor))
            .from(series))
        .execute();
  }

  /**
   * Messages {@code from .. to} spread round-robin over the {@code queues} queues of {@code prefix}, generated by the
   * server. With {@code realistic}: 10% expired, 10% ASSIGNED (a claim holding them for the next hour), the rest ready;
   * without: all expired.
   */
  private static void insertMessages(DSLContext ctx, String prefix, int queues, int from, int to, boolean realistic) {
    Table<Record1<Integer>> series = generateSeries(from, to).as("g", "n");
    Field<Integer> n = series.field("n", Integer.class);
    Field<String> queueName = queues == 1 ? inline(prefix)
        : inline(prefix).concat(n.mod(inline(queues)).cast(SQLDataType.VARCHAR));
    Field<Integer> share = n.mod(inline(10));
    Field<Boolean> expired = realistic ? share.eq(inline(0)) : DSL.trueCondition();
    Field<Boolean> assigned = realistic ? share.eq(inline(1)) : DSL.falseCondition();
    ctx.insertInto(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.PAYLOAD, MESSAGE_QUEUE_ITEM.READ_AFTER,
            MESSAGE_QUEUE_ITEM.EXPIRES_AT, MESSAGE_QUEUE_ITEM.QUEUE_ID, MESSAGE_QUEUE_ITEM.STATUS)
        .select(select(
                val(BenchContext.PAYLOAD),
                when(assigned, BenchSql.utcNowPlus(Duration.ofHours(1)))
                    .otherwise(BenchSql.utcNowMinus(Duration.ofMinutes(2))),
                when(expired, BenchSql.utcNowMinus(Duration.ofMinutes(1)))
                    .otherwise(BenchSql.utcNowPlus(Duration.ofHours(1))),
                queueName,
                when(assigned, inline(MessageQueueItemStatus.ASSIGNED))
                    .otherwise(inline(MessageQueueItemStatus.PENDING)))
            .from(series))
        .execute();
  }

  private static void vacuumAnalyze(DSLContext ctx) {
    // jOOQ has no VACUUM statement. Autovacuum would have run on a table this size; without it the visibility map is
    // empty and every plan pays for it.
    ctx.execute("VACUUM (ANALYZE) " + ctx.render(MESSAGE_QUEUE_ITEM));
    ctx.execute("VACUUM (ANALYZE) " + ctx.render(MESSAGE_QUEUE));
  }

  /** {@code function} ({@code pg_table_size} or {@code pg_indexes_size}) of the message table, in bytes. */
  private static long relationBytes(DSLContext ctx, String function) {
    // A regclass argument has no jOOQ type; the template only casts the bound table name.
    return ctx.select(field(function + "({0}::regclass)", Long.class, val(ctx.render(MESSAGE_QUEUE_ITEM))))
        .fetchOne(0, Long.class);
  }

  private static HikariDataSource pool(BenchDatabase database, String name, int size) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(database.url());
    config.setPoolName(name);
    config.setMaximumPoolSize(size);
    config.addDataSourceProperty("ApplicationName", name);
    return new HikariDataSource(config);
  }

  private static void awaitNoOtherSessions(BenchDatabase database) throws InterruptedException {
    DSLContext control = database.control();
    int own = BenchSql.backendPid(control);
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (System.nanoTime() < deadline) {
      int others = control.fetchCount(table(name("pg_catalog", "pg_stat_activity")),
          field(name("datname"), String.class).eq(function("current_database", SQLDataType.VARCHAR))
              .and(field(name("pid"), Integer.class).ne(own)));
      if (others == 0) {
        return;
      }
      Thread.sleep(5);
    }
  }

  private static double medianMillis(int runs, Supplier<List<QueueStatistics>> read) {
    double[] millis = new double[runs];
    for (int i = 0; i < runs; i++) {
      long start = System.nanoTime();
      read.get();
      millis[i] = (System.nanoTime() - start) / 1e6;
    }
    Arrays.sort(millis);
    return millis[runs / 2];
  }

  private static void pause(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  // ---------------------------------------------------------------- results

  record BacklogRow(int messages, int queues, int hotQueueMessages, double loadSeconds, long tableBytes,
      long indexBytes, int claims, double claimP50Millis, double claimP99Millis, double claimMaxMillis, long drained,
      double drainMessagesPerSecond, double statisticsExactMillis, int statisticsQueues,
      double housekeeperStatisticsMillis, double housekeeperStatisticsTotalError) { }

  record QueuesRow(int queues, String variant, int maxTrackedQueues, int threads, double seconds, long messages, double messagesPerSecond, long failures,
      int queuesPublished, long keepAliveIntervalMillis, double intervals, long keepAliveStatements,
      long keepAliveWrites, long serverQueueRowUpdates, long maxWritesOfOneQueue, double minGapBetweenWritesMillis,
      double statementsPerPublish, double notificationsPerPublish, double serverCpuMicrosPerMessage,
      double clientCpuMicrosPerMessage) {
    double keepAliveStatementsPerPublish() {
      return keepAliveStatements / (double) Math.max(1, messages);
    }
  }

  record HousekeepingRow(int idleQueues, int expiredMessages, double dutyCycle, String outcome, int reapedQueues,
      int deletedMessages, double tickSeconds, double rowsPerSecond, double longestTransactionMillis,
      int publishesWithout, double publishP50WithoutMillis, double publishP99WithoutMillis, int publishesDuring,
      double publishP50DuringMillis, double publishP99DuringMillis, int claimsWithout, double claimP50WithoutMillis,
      double claimP99WithoutMillis, int claimsDuring, double claimP50DuringMillis, double claimP99DuringMillis) { }

  record SubscribersRow(int subscribers, double idleSeconds, double serverTransactionsPerSecond,
      double clientCpuCores, double serverCpuCores, int libraryThreads, int published, int delivered,
      double deliveryP50Millis, double deliveryP99Millis, double deliveryMaxMillis, double firstDeliveryMillis) { }

  private static final ObjectMapper CSV_MAPPER = new ObjectMapper();

  record ScaleResult(String form, List<BacklogRow> backlog, List<QueuesRow> queues, List<HousekeepingRow> housekeeping,
      List<SubscribersRow> idleSubscribers) implements Result {
    @Override
    public void printTable(PrintStream out) {
      out.println("backlog (" + BACKLOG_QUEUES + " queues, 10% expired, 10% ASSIGNED; claims of " + CLAIM_BATCH
          + " and drain in claims of " + DRAIN_BATCH + " from one more queue)");
      out.printf(Locale.ROOT, "%12s %9s %9s %10s %10s %10s %12s %10s %13s %10s%n", "messages", "table MB",
          "index MB", "claim p50", "claim p99", "claim max", "drain msg/s", "exact ms", "housekeep ms", "gauge err");
      for (BacklogRow r : backlog) {
        out.printf(Locale.ROOT, "%,12d %9.0f %9.0f %10.2f %10.2f %10.2f %12.0f %10.1f %13.1f %9.1f%%%n",
            r.messages(), r.tableBytes() / 1e6, r.indexBytes() / 1e6, r.claimP50Millis(), r.claimP99Millis(),
            r.claimMaxMillis(), r.drainMessagesPerSecond(), r.statisticsExactMillis(),
            r.housekeeperStatisticsMillis(), r.housekeeperStatisticsTotalError() * 100);
      }
      out.println("exact ms: MsgQueueRepository.queueStatistics(); housekeep ms: a skipped housekeeper tick with"
          + " metrics bound (the gauges' read); gauge err: the gauges' total against the exact total");
      out.println();
      out.println("queues (publish to random existing auto-deleted queues)");
      out.printf(Locale.ROOT, "%9s %13s %9s %11s %7s %9s %11s %15s %13s %10s %13s %11s %10s %10s %12s %12s%n",
          "queues", "variant", "tracked", "keep-alive", "threads", "msg/s", "queues hit", "keep-alive/pub",
          "writes (srv)", "intervals", "max writes/q", "min gap ms", "stmts/pub", "notify/pub", "server us/msg",
          "client us/msg");
      for (QueuesRow r : queues) {
        out.printf(Locale.ROOT, "%,9d %13s %,9d %9.1f s %7d %9.0f %,11d %15.3f %13d %10.1f %13d %11.0f %10.3f %10.3f"
                + " %12.0f %12.0f%n", r.queues(),
            r.variant(), r.maxTrackedQueues(), r.keepAliveIntervalMillis() / 1000.0, r.threads(),
            r.messagesPerSecond(), r.queuesPublished(), r.keepAliveStatementsPerPublish(), r.serverQueueRowUpdates(),
            r.intervals(), r.maxWritesOfOneQueue(), r.minGapBetweenWritesMillis(), r.statementsPerPublish(),
            r.notificationsPerPublish(), r.serverCpuMicrosPerMessage(), r.clientCpuMicrosPerMessage());
      }
      out.println();
      for (HousekeepingRow h : housekeeping) {
        out.printf(Locale.ROOT, "housekeeping tick over %,d idle queues and %,d expired messages, duty cycle %.2f: %s,"
                + " %.2f s, %,.0f rows/s, reaped %,d queues, cleanup deleted %,d messages, longest row-locking"
                + " transaction %.0f ms%n",
            h.idleQueues(), h.expiredMessages(), h.dutyCycle(), h.outcome(), h.tickSeconds(), h.rowsPerSecond(),
            h.reapedQueues(), h.deletedMessages(), h.longestTransactionMillis());
        out.printf(Locale.ROOT, "  publish p50/p99 %.2f / %.2f ms without a tick (%d), %.2f / %.2f ms during (%d)%n",
            h.publishP50WithoutMillis(), h.publishP99WithoutMillis(), h.publishesWithout(), h.publishP50DuringMillis(),
            h.publishP99DuringMillis(), h.publishesDuring());
        out.printf(Locale.ROOT, "  claim   p50/p99 %.2f / %.2f ms without a tick (%d), %.2f / %.2f ms during (%d)%n",
            h.claimP50WithoutMillis(), h.claimP99WithoutMillis(), h.claimsWithout(), h.claimP50DuringMillis(),
            h.claimP99DuringMillis(), h.claimsDuring());
      }
      out.println();
      out.println("idle subscribers (one queue each, one pool of " + SUBSCRIBER_POOL + ", one WakeupListener)");
      out.printf(Locale.ROOT, "%11s %10s %11s %11s %8s %22s %9s%n", "subscribers", "server tx/s", "client CPU",
          "server CPU", "threads", "delivery p50/p99/max", "first");
      for (SubscribersRow r : idleSubscribers) {
        out.printf(Locale.ROOT, "%,11d %10.0f %10.1f%% %10.1f%% %8d %22s %6.1f ms%n", r.subscribers(),
            r.serverTransactionsPerSecond(), r.clientCpuCores() * 100, r.serverCpuCores() * 100, r.libraryThreads(),
            String.format(Locale.ROOT, "%.1f / %.1f / %.1f ms", r.deliveryP50Millis(), r.deliveryP99Millis(),
                r.deliveryMaxMillis()), r.firstDeliveryMillis());
      }
    }

    /** One line per numeric field of every row ({@code curve,x,metric,value}), so the CSV names what the JSON does. */
    @Override
    public void writeCsv(Path file) throws IOException {
      List<String> lines = new ArrayList<>();
      lines.add("curve,x,metric,value");
      backlog.forEach(r -> add(lines, "backlog", Integer.toString(r.messages()), r));
      queues.forEach(r -> add(lines, "queues", r.queues() + "-" + r.variant(), r));
      housekeeping.forEach(r -> add(lines, "housekeeping", r.idleQueues() + "-duty-" + r.dutyCycle(), r));
      idleSubscribers.forEach(r -> add(lines, "idle_subscribers", Integer.toString(r.subscribers()), r));
      Files.write(file, lines);
    }

    private static void add(List<String> lines, String curve, String x, Record row) {
      Map<String, Object> fields = CSV_MAPPER.convertValue(row, new TypeReference<Map<String, Object>>() { });
      fields.forEach((metric, value) -> {
        if (value instanceof Number number) {
          double v = number.doubleValue();
          lines.add(String.format(Locale.ROOT, "%s,%s,%s,%s", curve, x, metric,
              Double.isFinite(v) ? String.format(Locale.ROOT, "%.3f", v) : "-1"));
        }
      });
    }
  }
}
