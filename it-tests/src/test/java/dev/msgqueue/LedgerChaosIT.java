package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import com.zaxxer.hikari.metrics.IMetricsTracker;
import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.RestartablePostgres;
import dev.msgqueue.it.TestDatabase;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.jooq.Record2;
import org.jooq.SQLDialect;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

// Kept in dev.msgqueue: reads WakeupListener's package-private connection counter.
/**
 * The chaos run (docs/reliability.md): a ledger stress run under connection faults.
 *
 * <p>16 publishers write to 8 auto-deleted and 2 durable queues, each auto-deleted queue going quiet for a phase in
 * every cycle; 4 lease-mode subscribers consume; the reaper and the expired-item cleanup loop with a 1 s idle
 * threshold and a 250 ms keep-alive; a fault thread terminates random application backends (publishers', subscribers',
 * the LISTEN connection, the reaper's) a few times a second. Every publish records its token (publisher, sequence) and
 * outcome in an in-memory ledger; every delivery records the token it carried. After a drain the ledger must balance.
 *
 * <p><b>Subscribers and reaps.</b> A running subscriber touches its queue every keep-alive interval, so a queue with a
 * live subscriber is never reaped (by design). The two durable queues therefore have one long-lived subscriber each
 * (never restarted: they must recover from faults by themselves), and the eight auto-deleted queues are consumed by two
 * rotating subscribers, each visiting its four queues in turn for {@value #DWELL_MILLIS} ms (closing one subscriber
 * and starting the next, as a consumer that comes and goes would). A queue drained by its visitor, left alone by its
 * publishers (quiet phase) and idle past the threshold is reaped; the next publish heals it, or the next visit binds it.
 *
 * <p>Duration: {@code -Dmsgqueue.chaos.seconds} (default 60); faults: {@code -Dmsgqueue.chaos.faults=false} turns them
 * off for a comparison run.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class LedgerChaosIT {
  private static final Duration RUN = Duration.ofSeconds(Long.getLong("msgqueue.chaos.seconds", 60));
  private static final boolean FAULTS = Boolean.parseBoolean(System.getProperty("msgqueue.chaos.faults", "true"));
  private static final Duration DRAIN_LIMIT = Duration.ofSeconds(120);

  private static final int PUBLISHERS = 16;
  private static final int AUTO_DELETED_QUEUES = 8;
  private static final int DURABLE_QUEUES = 2;
  private static final Duration KEEP_ALIVE = Duration.ofMillis(250);
  private static final Duration REAP_THRESHOLD = Duration.ofSeconds(1);
  private static final Duration LEASE = Duration.ofSeconds(3);
  /** Long enough that no acknowledged message can expire before the drain ends: "handled at least once" must hold. */
  private static final Duration TTL = RUN.plus(DRAIN_LIMIT).plusMinutes(10);
  /** One publish in ten is short-lived, so the cleanup has work and reaped queues can leave (expired) orphans. */
  private static final Duration EPHEMERAL_TTL = Duration.ofMillis(400);
  /** Each auto-deleted queue is quiet (no publisher picks it) for one phase in every three. */
  private static final long PHASE_MILLIS = 2_500;
  private static final long DWELL_MILLIS = 1_000;
  private static final int PROBE_PUBLISHER = 99;
  private static final long RESTART_EVERY_MILLIS = 6_000;
  private static final long RESTART_DOWN_MILLIS = 500;
  /** No restart this close to the end of publishing, so every recovery is measured while publishers still run. */
  private static final long RESTART_QUIET_END_MILLIS = 10_000;
  /** Handlers fail: a poison message always (dead-lettered after three deliveries), a flaky one on its first try. */
  private static final QueueSpec DEAD_LETTERS = QueueSpec.durable("chaos-dead-letters");
  private static final RetryPolicy RETRY = RetryPolicy.builder(DEAD_LETTERS.name())
      .initialBackoff(Duration.ofMillis(50)).maxBackoff(Duration.ofMillis(500)).maxDeliveries(3).build();
  private static final Pattern TOKEN = Pattern.compile("\"p\": (\\d+), \"s\": (\\d+)");

  /** What the publisher knows about a message after its publish call returned or threw. */
  private enum Outcome {
    /** publish returned an id: committed, must be handled (TTL outlasts the run) */
    COMMITTED,
    /** committed with a short TTL: may expire before anyone handles it */
    COMMITTED_EPHEMERAL,
    /** MsgQueueConnectionException: the connection failed, the commit was not acknowledged */
    UNKNOWN,
    /** any other exception: a test failure */
    FAILED
  }

  private final Map<Long, Outcome> ledger = new ConcurrentHashMap<>();
  private final Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
  /** Tokens found in the dead-letter queue: settled, like handled ones. */
  private final Set<Long> deadLettered = ConcurrentHashMap.newKeySet();
  private final Map<Long, AtomicInteger> flakyAttempts = new ConcurrentHashMap<>();
  private final LongAdder handlerFailures = new LongAdder();
  private final LongAdder slowHandlers = new LongAdder();
  private final ConcurrentLinkedQueue<String> publishFailures = new ConcurrentLinkedQueue<>();
  /** Unexpected failures of the reaper, cleanup and subscriber starts (reported, not expected). */
  private final ConcurrentLinkedQueue<String> reaperFailures = new ConcurrentLinkedQueue<>();
  private final LongAdder deliveries = new LongAdder();
  private final LongAdder publishConnectionFailures = new LongAdder();
  private final LongAdder publisherRecoveries = new LongAdder();
  private final LongAdder reaperConnectionFailures = new LongAdder();
  private final LongAdder reaperRecoveries = new LongAdder();
  private final LongAdder subscriberStartFailures = new LongAdder();
  private final LongAdder heals = new LongAdder();
  private final LongAdder reaps = new LongAdder();
  private final LongAdder expiredDeleted = new LongAdder();
  private final LongAdder orphanScans = new LongAdder();
  private final LongAdder unexpiredOrphansSeen = new LongAdder();
  private final Map<String, LongAdder> connectionsOpened = new ConcurrentHashMap<>();
  private final Map<String, AtomicInteger> faultsByRole = new ConcurrentHashMap<>();
  /** Which statement failed, for each publish with an unknown outcome: shows which ones had committed after all. */
  private final Map<Long, String> unknownStage = new ConcurrentHashMap<>();
  private final AtomicLong[] lastDurableDelivery = {new AtomicLong(), new AtomicLong()};

  /** When a publish last returned ids, and a handler last ran: how the restart fault sees recovery. */
  private final AtomicLong lastCommitted = new AtomicLong();
  private final AtomicLong lastDelivered = new AtomicLong();
  private final List<Recovery> recoveries = new CopyOnWriteArrayList<>();
  private Duration run = RUN;
  private volatile long publishEnd;
  private volatile WakeupListener activeListener;
  private int listenerReconnects; // read after the listener is closed
  private long lastProbePublished;

  private volatile boolean publishing = true;
  private volatile boolean consuming = true;

  @Test
  void theLedgerBalancesUnderReapsHealsAndConnectionFaults(TestDatabase db) throws Exception {
    runLedger(db, RUN, FAULTS ? this::injectFaults : null);
  }

  /**
   * The same run on a server the test owns, restarted every {@value #RESTART_EVERY_MILLIS} ms (alternately with
   * {@code pg_ctl stop -m fast} and {@code -m immediate}, the latter with crash recovery) instead of connection kills.
   * Nothing is restarted by the test but the server: publishers, subscribers, the LISTEN connection and the
   * housekeeper must recover by themselves, and the ledger must balance.
   */
  @Test
  void theLedgerBalancesAcrossServerRestarts() throws Exception {
    Duration restartRun = Duration.ofSeconds(Long.getLong("msgqueue.restart.seconds", 40));
    try (RestartablePostgres server = RestartablePostgres.start();
         TestDatabase db = TestDatabase.createMigrated(server.server(), "LedgerRestart")) {
      runLedger(db, restartRun, ignored -> restartRepeatedly(server));
    }
    recoveries.forEach(recovery -> System.out.println("chaos: " + recovery));
    assertThat(recoveries).as("restarts").hasSizeGreaterThanOrEqualTo(
        (int) Math.min(3, (restartRun.toMillis() - RESTART_QUIET_END_MILLIS) / RESTART_EVERY_MILLIS));
    assertThat(recoveries).extracting(Recovery::mode).contains(RestartablePostgres.Shutdown.values());
    assertThat(recoveries).allSatisfy(recovery -> {
      assertThat(recovery.publishMillis()).as("publishers recovered after %s", recovery).isNotNegative();
      assertThat(recovery.deliveryMillis()).as("subscribers recovered after %s", recovery).isNotNegative();
      assertThat(recovery.listenMillis()).as("the LISTEN connection recovered after %s", recovery).isNotNegative();
    });
    assertThat(listenerReconnects).as("LISTEN reconnects").isGreaterThanOrEqualTo(recoveries.size());
  }

  private void runLedger(TestDatabase db, Duration run, Consumer<TestDatabase> faultInjector) throws Exception {
    this.run = run;
    MsgQueueConfig config = MsgQueueConfig.builder()
        .keepAliveInterval(KEEP_ALIVE)
        .reapIdleThreshold(REAP_THRESHOLD)
        .defaultMessageTtl(TTL)
        .build();
    List<QueueSpec> autoDeleted = new ArrayList<>();
    for (int i = 0; i < AUTO_DELETED_QUEUES; i++) {
      autoDeleted.add(QueueSpec.autoDeleted("chaos-auto-" + i));
    }
    List<QueueSpec> durable = List.of(QueueSpec.durable("chaos-durable-0"), QueueSpec.durable("chaos-durable-1"));

    // One pool per role, each tagged with application_name so the fault thread knows whose backend it kills.
    HikariDataSource publishPool = pool(db, "chaos-publisher", 8);
    HikariDataSource consumePool = pool(db, "chaos-subscriber", 12);
    HikariDataSource reaperPool = pool(db, "chaos-reaper", 2);
    List<Thread> threads = new ArrayList<>();
    WakeupListener listener = null;
    List<Subscriber> durableSubscribers = new ArrayList<>();
    long started = System.nanoTime();
    publishEnd = started + run.toNanos();
    long drainedAt = 0;
    try {
      MsgQueueRepository publisher = MsgQueueRepository.create(countingHeals(publishPool), config);
      MsgQueueRepository consumer = MsgQueueRepository.create(consumePool, config);
      MsgQueueRepository housekeeper = MsgQueueRepository.create(reaperPool, config);
      durable.forEach(publisher::bindQueue);
      listener = WakeupListener.start(() -> connect(db, "chaos-listener"));
      activeListener = listener;

      for (int d = 0; d < DURABLE_QUEUES; d++) {
        int index = d;
        durableSubscribers.add(subscriber(consumer, durable.get(d), listener,
            () -> lastDurableDelivery[index].set(System.nanoTime())));
      }
      for (int r = 0; r < 2; r++) {
        List<QueueSpec> visits = List.of(autoDeleted.get(r), autoDeleted.get(r + 2), autoDeleted.get(r + 4),
            autoDeleted.get(r + 6));
        WakeupListener wakeups = listener;
        threads.add(start("chaos-rotating-subscriber-" + r, () -> rotate(consumer, visits, wakeups)));
      }
      for (int p = 0; p < PUBLISHERS; p++) {
        int publisherId = p;
        threads.add(start("chaos-publisher-" + p,
            () -> publish(publisher, publisherId, autoDeleted, durable, started, publishEnd)));
      }
      threads.add(start("chaos-housekeeper", () -> houseKeep(housekeeper)));
      threads.add(start("chaos-orphan-watch", () -> watchOrphans(db)));
      Thread faults = faultInjector != null ? start("chaos-faults", () -> faultInjector.accept(db)) : null;

      for (Thread thread : threads.subList(2, 2 + PUBLISHERS)) {
        thread.join(run.plusSeconds(120).toMillis());
        assertThat(thread.isAlive()).as("%s stopped", thread.getName()).isFalse();
      }
      publishing = false; // stops the fault thread too: the drain runs on a healthy database
      if (faults != null) {
        faults.join(10_000);
        assertThat(faults.isAlive()).as("fault thread stopped").isFalse();
      }

      // Probes: one message per queue once the faults have stopped. The long-lived subscribers must deliver theirs,
      // which shows they recovered from every fault by themselves (they were never restarted).
      long probesPublished = System.nanoTime();
      List<QueueSpec> everyQueue = new ArrayList<>(autoDeleted);
      everyQueue.addAll(durable);
      for (int q = 0; q < everyQueue.size(); q++) {
        // The pools may still hold connections killed just before the faults stopped: retry, as a caller would.
        for (int attempt = 0; ; attempt++) {
          long token = token(PROBE_PUBLISHER, attempt * 100L + q);
          try {
            assertThat(publisher.publish(everyQueue.get(q), payload(token))).isPositive();
            ledger.put(token, Outcome.COMMITTED);
            break;
          } catch (MsgQueueConnectionException e) {
            ledger.put(token, Outcome.UNKNOWN);
            assertThat(attempt).as("probe publish attempts to %s", everyQueue.get(q).name()).isLessThan(10);
          }
        }
      }
      lastProbePublished = probesPublished;

      long drainStart = System.nanoTime();
      DSLContext observer = db.dsl();
      while (System.nanoTime() - drainStart < DRAIN_LIMIT.toNanos()) {
        boolean pendingItems;
        try {
          pendingItems = observer.fetchExists(MESSAGE_QUEUE_ITEM,
              MESSAGE_QUEUE_ITEM.EXPIRES_AT.gt(ServerTime.utcNow())
                  .and(MESSAGE_QUEUE_ITEM.QUEUE_ID.isDistinctFrom(DEAD_LETTERS.name())));
          readDeadLetters(observer);
        } catch (DataAccessException | MsgQueueException e) {
          Thread.sleep(100); // a pooled connection broken by a restart: the pool replaces it
          continue;
        }
        if (unhandledCommitted().isEmpty() && !pendingItems) {
          drainedAt = System.nanoTime();
          break;
        }
        Thread.sleep(100);
      }
    } finally {
      publishing = false;
      consuming = false;
      for (Thread thread : threads) {
        thread.join(60_000);
      }
      durableSubscribers.forEach(Subscriber::close);
      if (listener != null) {
        boolean listening = listener.isListening();
        int connects = listener.connects();
        listenerReconnects = connects - 1;
        listener.close();
        System.out.printf("chaos: LISTEN connection up at the end: %s, connects: %d%n", listening, connects);
      }
      publishPool.close();
      consumePool.close();
      reaperPool.close();
    }
    for (Thread thread : threads) {
      assertThat(thread.isAlive()).as("%s stopped", thread.getName()).isFalse();
    }
    orphanScan(db.dsl()); // once more, with everything stopped

    report(started, drainedAt, faultInjector != null);

    assertThat(publishFailures).as("publishes that failed other than by a lost connection (23503 included)")
        .isEmpty();
    assertThat(reaperFailures).as("reaper, cleanup or subscriber-start failures other than a lost connection")
        .isEmpty();
    assertThat(unhandledCommitted()).as("committed (acknowledged) messages never handled").isEmpty();
    assertThat(phantoms()).as("handled messages that were never published or whose publish failed").isEmpty();
    Set<Long> committedPoison = ledger.entrySet().stream()
        .filter(entry -> entry.getValue() == Outcome.COMMITTED && isPoison(entry.getKey()))
        .map(Map.Entry::getKey).collect(Collectors.toSet());
    assertThat(deadLettered).as("every committed poison message dead-lettered").containsAll(committedPoison);
    assertThat(committedPoison).as("poison messages were published").isNotEmpty();
    assertThat(handled.keySet()).as("a poison message is never handled").noneMatch(LedgerChaosIT::isPoison);
    assertThat(handlerFailures.sum()).isPositive();
    assertThat(unexpiredOrphansSeen.sum()).as("unexpired items with queueId NULL, over %d scans", orphanScans.sum())
        .isZero();
    assertThat(drainedAt).as("drained within %s", DRAIN_LIMIT).isPositive();
    assertThat(count(Outcome.COMMITTED)).isPositive();
    assertThat(reaps.sum()).as("queues went idle and were reaped").isPositive();
    if (faultInjector != null) {
      int listenerFaults = faultsByRole.getOrDefault("chaos-listener", new AtomicInteger()).get();
      assertThat(faultsByRole.values().stream().mapToInt(AtomicInteger::get).sum()).as("faults injected")
          .isPositive();
      if (listenerFaults > 0) {
        // connects() counts only connections that were up: a kill during a reconnect fails that connect instead.
        assertThat(listenerReconnects).as("LISTEN reconnects after %d kills", listenerFaults).isPositive();
      }
      for (AtomicLong last : lastDurableDelivery) {
        assertThat(last.get() - lastProbePublished).as("a long-lived subscriber delivered its probe after the faults")
            .isPositive();
      }
    }
  }

  // --- the actors ---------------------------------------------------------------------------------------------------

  private void publish(MsgQueueRepository repository, int publisherId, List<QueueSpec> autoDeleted,
      List<QueueSpec> durable, long started, long end) {
    ThreadLocalRandom random = ThreadLocalRandom.current();
    long sequence = 0;
    boolean failedSinceLastSuccess = false;
    while (publishing && System.nanoTime() - end < 0) {
      long phase = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started) / PHASE_MILLIS;
      List<QueueSpec> candidates = new ArrayList<>(durable);
      for (int q = 0; q < autoDeleted.size(); q++) {
        if ((phase + q) % 3 != 0) { // queue q is quiet in every third phase, staggered
          candidates.add(autoDeleted.get(q));
        }
      }
      QueueSpec queue = candidates.get(random.nextInt(candidates.size()));
      int burst = random.nextInt(1, 6);
      for (int i = 0; i < burst; i++) {
        boolean ephemeral = random.nextInt(10) == 0;
        boolean batch = random.nextInt(8) == 0;
        List<Long> tokens = new ArrayList<>();
        for (int m = 0; m < (batch ? 3 : 1); m++) {
          tokens.add(token(publisherId, sequence++));
        }
        PublishOptions options = PublishOptions.defaults().withTtl(ephemeral ? EPHEMERAL_TTL : TTL);
        Outcome outcome;
        try {
          if (batch) {
            assertThat(repository.publishBatch(queue, tokens.stream().map(LedgerChaosIT::payload).toList(), options))
                .hasSize(tokens.size());
          } else {
            assertThat(repository.publish(queue, payload(tokens.get(0)), options)).isPositive();
          }
          outcome = ephemeral ? Outcome.COMMITTED_EPHEMERAL : Outcome.COMMITTED;
          lastCommitted.set(System.nanoTime());
          if (failedSinceLastSuccess) {
            publisherRecoveries.increment();
            failedSinceLastSuccess = false;
          }
        } catch (MsgQueueConnectionException e) {
          outcome = Outcome.UNKNOWN;
          String stage = failedStatement(e);
          tokens.forEach(token -> unknownStage.put(token, stage));
          publishConnectionFailures.increment();
          failedSinceLastSuccess = true;
        } catch (RuntimeException | AssertionError e) {
          outcome = Outcome.FAILED;
          publishFailures.add(queue.name() + ": " + e);
        }
        for (Long token : tokens) {
          ledger.put(token, outcome);
        }
      }
      sleepMillis(random.nextInt(50, 250));
    }
  }

  private Subscriber subscriber(MsgQueueRepository repository, QueueSpec queue, WakeupListener wakeups,
      Runnable onDelivery) {
    return Subscriber.builder(repository, queue, message -> {
          long token = tokenOf(message.payload());
          if (isPoison(token)) {
            handlerFailures.increment();
            throw new IllegalStateException("poison message " + token);
          }
          if (isFlaky(token) && flakyAttempts.computeIfAbsent(token, t -> new AtomicInteger()).getAndIncrement() == 0) {
            handlerFailures.increment();
            throw new IllegalStateException("flaky message " + token + ", first try");
          }
          if (isSlow(token)) {
            slowHandlers.increment();
            Thread.sleep(LEASE.toMillis() * 3 / 2); // outlives its first lease: renewed, not redelivered
          }
          handled.computeIfAbsent(token, t -> new AtomicInteger()).incrementAndGet();
          deliveries.increment();
          lastDelivered.set(System.nanoTime());
          onDelivery.run();
        })
        .mode(ConsumeMode.LEASE).lease(LEASE)
        .retryPolicy(RETRY)
        .concurrency(4)
        .batchSize(10)
        .pollInterval(Duration.ofMillis(200))
        .wakeups(wakeups)
        .closeTimeout(Duration.ofSeconds(10))
        .start();
  }

  /** A consumer that comes and goes: one subscriber at a time, on each of its queues in turn. */
  private void rotate(MsgQueueRepository repository, List<QueueSpec> queues, WakeupListener wakeups) {
    int next = 0;
    while (consuming) {
      QueueSpec queue = queues.get(next++ % queues.size());
      Subscriber subscriber;
      try {
        subscriber = subscriber(repository, queue, wakeups, () -> { });
      } catch (RuntimeException e) {
        // Its bind hit a killed connection (or the pool was slow to replace one): try the next queue shortly.
        subscriberStartFailures.increment();
        if (!(e instanceof MsgQueueConnectionException
            || e instanceof DataAccessException access && isConnectionFailure(access))) {
          reaperFailures.add("subscriber start: " + e);
        }
        sleepMillis(100);
        continue;
      }
      try {
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(DWELL_MILLIS);
        while (consuming && System.nanoTime() - until < 0) {
          sleepMillis(20);
        }
      } finally {
        subscriber.close();
      }
    }
  }

  private void houseKeep(MsgQueueRepository repository) {
    boolean failedSinceLastSuccess = false;
    while (consuming) {
      try {
        reaps.add(repository.reapIdleQueues().size());
        expiredDeleted.add(repository.cleanUpExpiredMessages());
        if (failedSinceLastSuccess) {
          reaperRecoveries.increment();
          failedSinceLastSuccess = false;
        }
      } catch (MsgQueueConnectionException e) {
        reaperConnectionFailures.increment();
        failedSinceLastSuccess = true;
      } catch (DataAccessException e) {
        // Outside a statement (BEGIN, COMMIT, taking the connection) a lost connection is jOOQ's own exception.
        if (isConnectionFailure(e)) {
          reaperConnectionFailures.increment();
          failedSinceLastSuccess = true;
        } else {
          reaperFailures.add(e.toString());
        }
      }
      sleepMillis(50);
    }
  }

  private void watchOrphans(TestDatabase db) {
    DSLContext observer = db.dsl();
    while (consuming) {
      try {
        orphanScan(observer);
      } catch (DataAccessException e) {
        // the server is restarting: scan again once it is back
      }
      sleepMillis(100);
    }
  }

  private void orphanScan(DSLContext observer) {
    unexpiredOrphansSeen.add(observer.fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.isNull()
        .and(MESSAGE_QUEUE_ITEM.EXPIRES_AT.gt(ServerTime.utcNow()))));
    orphanScans.increment();
  }

  /** Terminates a random application backend a few times a second, from its own connection (never a victim). */
  private void injectFaults(TestDatabase db) {
    Connection observer = null;
    try {
      while (publishing) {
        sleepMillis(ThreadLocalRandom.current().nextInt(150, 450));
        try {
          if (observer == null) {
            observer = db.connect();
          }
          DSLContext dsl = DSL.using(observer, SQLDialect.POSTGRES);
          // pg_stat_activity is a system view: no generated table, so its columns are named here.
          List<Record2<Integer, String>> victims = dsl
              .select(field(name("pid"), Integer.class), field(name("application_name"), String.class))
              .from(table(name("pg_catalog", "pg_stat_activity")))
              .where(field(name("datname"), String.class).eq(db.name()))
              .and(field(name("application_name"), String.class).like("chaos-%"))
              .and(field(name("pid"), Integer.class).ne(DSL.field("pg_backend_pid()", Integer.class)))
              .fetch();
          if (victims.isEmpty()) {
            continue;
          }
          Record2<Integer, String> victim = victims.get(ThreadLocalRandom.current().nextInt(victims.size()));
          Boolean terminated = dsl.select(function("pg_terminate_backend", Boolean.class, val(victim.value1())))
              .fetchSingle().value1();
          if (Boolean.TRUE.equals(terminated)) {
            faultsByRole.computeIfAbsent(victim.value2(), role -> new AtomicInteger()).incrementAndGet();
          }
        } catch (SQLException | DataAccessException e) {
          closeQuietly(observer);
          observer = null;
        }
      }
    } finally {
      closeQuietly(observer);
    }
  }

  /**
   * Restarts the server every {@value #RESTART_EVERY_MILLIS} ms, alternating fast and immediate shutdown, until
   * {@value #RESTART_QUIET_END_MILLIS} ms before publishing ends; after each restart measures how long publishers,
   * subscribers and the LISTEN connection took to work again (-1: not within 60 s).
   */
  private void restartRepeatedly(RestartablePostgres server) {
    int restarts = 0;
    long next = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RESTART_EVERY_MILLIS);
    while (publishing && publishEnd - next > TimeUnit.MILLISECONDS.toNanos(RESTART_QUIET_END_MILLIS)) {
      while (publishing && System.nanoTime() - next < 0) {
        sleepMillis(20);
      }
      if (!publishing) {
        return;
      }
      RestartablePostgres.Shutdown mode = RestartablePostgres.Shutdown.values()[restarts++ % 2];
      int connectsBefore = activeListener.connects();
      long stopping = System.nanoTime();
      server.restart(mode, RESTART_DOWN_MILLIS);
      long up = System.nanoTime();
      faultsByRole.computeIfAbsent("server-restart-" + mode, role -> new AtomicInteger()).incrementAndGet();
      long publish = awaitSince(up, () -> lastCommitted.get() - up > 0);
      long delivery = awaitSince(up, () -> lastDelivered.get() - up > 0);
      long listen = awaitSince(up, () -> activeListener.connects() > connectsBefore && activeListener.isListening());
      recoveries.add(new Recovery(mode, TimeUnit.NANOSECONDS.toMillis(up - stopping), publish, delivery, listen));
      next += TimeUnit.MILLISECONDS.toNanos(RESTART_EVERY_MILLIS); // a fixed schedule, however long recovery took
    }
  }

  /** Milliseconds from {@code since} until {@code condition} holds, or -1 if it does not within 60 s. */
  private long awaitSince(long since, java.util.function.BooleanSupplier condition) {
    while (System.nanoTime() - since < TimeUnit.SECONDS.toNanos(60)) {
      if (condition.getAsBoolean()) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - since);
      }
      sleepMillis(5);
    }
    return -1;
  }

  /** One server restart: how long the server was stopping and down, and each actor's time to recover once it was up. */
  private record Recovery(RestartablePostgres.Shutdown mode, long downMillis, long publishMillis, long deliveryMillis,
      long listenMillis) {
    @Override
    public String toString() {
      return String.format("restart (%s): server down %d ms; after it was up: first publish %d ms, first delivery"
          + " %d ms, LISTEN again %d ms", mode, downMillis, publishMillis, deliveryMillis, listenMillis);
    }
  }

  // --- the ledger ---------------------------------------------------------------------------------------------------

  private Set<Long> unhandledCommitted() {
    return ledger.entrySet().stream()
        .filter(entry -> entry.getValue() == Outcome.COMMITTED && !handled.containsKey(entry.getKey())
            && !deadLettered.contains(entry.getKey()))
        .map(Map.Entry::getKey)
        .collect(Collectors.toSet());
  }

  /** Handled tokens that no publish returned for, nor left with an unknown outcome. */
  private Set<Long> phantoms() {
    return Stream.concat(handled.keySet().stream(), deadLettered.stream())
        .filter(token -> {
          Outcome outcome = ledger.get(token);
          return outcome == null || outcome == Outcome.FAILED;
        })
        .collect(Collectors.toSet());
  }

  private long count(Outcome outcome) {
    return ledger.values().stream().filter(outcome::equals).count();
  }

  private void report(long started, long drainedAt, boolean faultsOn) {
    long handledUnknown = ledger.entrySet().stream()
        .filter(entry -> entry.getValue() == Outcome.UNKNOWN && handled.containsKey(entry.getKey())).count();
    long handledEphemeral = ledger.entrySet().stream()
        .filter(entry -> entry.getValue() == Outcome.COMMITTED_EPHEMERAL && handled.containsKey(entry.getKey()))
        .count();
    Map<String, String> unknownByStage = new TreeMap<>();
    unknownStage.entrySet().stream()
        .collect(Collectors.groupingBy(Map.Entry::getValue, TreeMap::new, Collectors.partitioningBy(
            entry -> handled.containsKey(entry.getKey()), Collectors.counting())))
        .forEach((stage, byHandled) -> unknownByStage.put(stage,
            (byHandled.get(true) + byHandled.get(false)) + " (" + byHandled.get(true) + " committed)"));
    long duplicates = handled.values().stream().mapToLong(times -> Math.max(0, times.get() - 1)).sum();
    Map<String, Integer> faults = new TreeMap<>();
    faultsByRole.forEach((role, n) -> faults.put(role, n.get()));
    System.out.printf("chaos: %d s publishing (faults %s), drained %s%n", run.toSeconds(), faultsOn ? "on" : "off",
        drainedAt == 0 ? "NOT within " + DRAIN_LIMIT.toSeconds() + " s"
            : "after " + TimeUnit.NANOSECONDS.toMillis(drainedAt - started - run.toNanos()) + " ms");
    System.out.printf("chaos: published %d: committed %d (+%d short-lived), unknown outcome %d, failed %d%n",
        ledger.size(), count(Outcome.COMMITTED), count(Outcome.COMMITTED_EPHEMERAL), count(Outcome.UNKNOWN),
        count(Outcome.FAILED));
    System.out.printf("chaos: handled %d distinct (%d deliveries, %d duplicates); unknown-but-committed %d;"
            + " short-lived handled %d; committed never handled %d; phantoms %d%n",
        handled.size(), deliveries.sum(), duplicates, handledUnknown, handledEphemeral, unhandledCommitted().size(),
        phantoms().size());
    System.out.printf("chaos: handler failures %d (poison and first tries of flaky messages), slow handlers %d,"
        + " dead-lettered %d%n", handlerFailures.sum(), slowHandlers.sum(), deadLettered.size());
    System.out.printf("chaos: unknown outcomes by the statement that failed: %s%n", unknownByStage);
    System.out.printf("chaos: reaps %d, heals %d, expired items deleted %d, unexpired orphans seen %d in %d scans%n",
        reaps.sum(), heals.sum(), expiredDeleted.sum(), unexpiredOrphansSeen.sum(), orphanScans.sum());
    System.out.printf("chaos: faults injected %d %s; recoveries: publishers %d (after %d connection failures),"
            + " reaper %d (after %d), LISTEN reconnects %d, rotating-subscriber start failures %d%n",
        faults.values().stream().mapToInt(Integer::intValue).sum(), faults, publisherRecoveries.sum(),
        publishConnectionFailures.sum(), reaperRecoveries.sum(), reaperConnectionFailures.sum(), listenerReconnects,
        subscriberStartFailures.sum());
    Map<String, Long> opened = new TreeMap<>();
    connectionsOpened.forEach((role, n) -> opened.put(role, n.sum()));
    System.out.printf("chaos: physical connections opened per pool (the rest of each count replaced killed ones): %s%n",
        opened);
    if (!publishFailures.isEmpty() || !reaperFailures.isEmpty()) {
      System.out.printf("chaos: publish failures %s; reaper failures %s%n",
          publishFailures.stream().limit(5).toList(), reaperFailures.stream().limit(5).toList());
    }
  }

  // --- plumbing -----------------------------------------------------------------------------------------------------

  /** The publish path's statement a connection failure hit, from the statement the exception names. */
  private static String failedStatement(MsgQueueConnectionException e) {
    String message = String.valueOf(e.getMessage());
    if (message.contains("pg_notify")) {
      return "notify";
    } else if (message.contains("\"healed\"")) {
      return "heal";
    } else if (message.contains("update \"MessageQueue\"")) {
      return "keep-alive";
    } else if (message.contains("insert into \"MessageQueueItem\"")) {
      return "insert";
    }
    return "other";
  }

  private static long token(int publisherId, long sequence) {
    return publisherId * 1_000_000_000L + sequence;
  }

  private static String payload(long token) {
    return "{\"p\": " + token / 1_000_000_000L + ", \"s\": " + token % 1_000_000_000L + "}";
  }

  private static boolean isPoison(long token) {
    return token % 101 == 0;
  }

  private static boolean isFlaky(long token) {
    return token % 37 == 0;
  }

  private static boolean isSlow(long token) {
    return token % 211 == 0;
  }

  /** Reads every dead letter's token (the dead-letter queue holds them until their TTL). */
  private void readDeadLetters(DSLContext observer) {
    MsgQueueRepository reader = MsgQueueRepository.create(observer, MsgQueueConfig.defaults());
    long afterId = 0;
    List<DeadLetter> page;
    do {
      page = reader.deadLetters(DEAD_LETTERS.name(), afterId, 1_000);
      for (DeadLetter letter : page) {
        deadLettered.add(tokenOf(letter.payload()));
        afterId = letter.id();
      }
    } while (page.size() == 1_000);
  }

  private static long tokenOf(String payload) {
    Matcher matcher = TOKEN.matcher(payload);
    if (!matcher.find()) {
      throw new IllegalStateException("no token in " + payload);
    }
    return token(Integer.parseInt(matcher.group(1)), Long.parseLong(matcher.group(2)));
  }

  /** A jOOQ context over {@code pool} that counts heals: the publish path's queue-re-creating statement. */
  private DSLContext countingHeals(DataSource pool) {
    ExecuteListener healCounter = new ExecuteListener() {
      @Override
      public void end(ExecuteContext ctx) {
        // Only the heal statement names the CTE "healed" (PublishStatements.healAndInsertItems).
        if (ctx.exception() == null && ctx.sql() != null && ctx.sql().contains("\"healed\"")) {
          heals.increment();
        }
      }
    };
    return DSL.using(pool, SQLDialect.POSTGRES).configuration().deriveAppending(healCounter).dsl();
  }

  private HikariDataSource pool(TestDatabase db, String role, int size) {
    LongAdder opened = connectionsOpened.computeIfAbsent(role, name -> new LongAdder());
    HikariConfig config = new HikariConfig();
    // Counts every physical connection the pool opens: past the first few, each one replaces a killed connection.
    config.setMetricsTrackerFactory((poolName, poolStats) -> new IMetricsTracker() {
      @Override
      public void recordConnectionCreatedMillis(long connectionCreatedMillis) {
        opened.increment();
      }
    });
    config.setJdbcUrl(db.jdbcUrl());
    config.addDataSourceProperty("ApplicationName", role);
    config.setMaximumPoolSize(size);
    config.setMinimumIdle(0);
    config.setPoolName(role);
    return new HikariDataSource(config);
  }

  private static Connection connect(TestDatabase db, String role) throws SQLException {
    Properties properties = new Properties();
    properties.setProperty("ApplicationName", role);
    return DriverManager.getConnection(db.jdbcUrl(), properties);
  }

  private static boolean isConnectionFailure(DataAccessException e) {
    for (Throwable cause = e; cause != null; cause = cause.getCause()) {
      if (cause instanceof SQLException sql && sql.getSQLState() != null
          && (sql.getSQLState().startsWith("08") || sql.getSQLState().startsWith("57P"))) {
        return true;
      }
    }
    return false;
  }

  private static Thread start(String name, Runnable body) {
    Thread thread = new Thread(body, name);
    thread.setDaemon(true);
    thread.start();
    return thread;
  }

  private static void sleepMillis(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static void closeQuietly(Connection connection) {
    if (connection != null) {
      try {
        connection.close();
      } catch (SQLException e) {
        // already broken; nothing to do
      }
    }
  }
}
