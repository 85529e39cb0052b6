package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.it.Await;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import java.sql.DriverManager;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.stream.IntStream;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

// Kept in dev.msgqueue: reads Subscriber's package-private counters, wake() and thread prefix.
/**
 * The {@link Subscriber}'s pipeline against PostgreSQL: the room a claim may take, close() while a claim is in the
 * database, the threads an idle subscriber costs, and a bounded stress run with restarts. A jOOQ listener on the
 * repository's context can hold a claim statement after it ran (its rows taken or ASSIGNED, its result not yet
 * returned).
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class SubscriberPipelineIT {
  /** A bound on liveness, not a speed claim: generous, since other builds share the machine. */
  private static final long AWAIT_SECONDS = 120;
  private static final Duration POLL = Duration.ofMillis(50);
  private static final Duration STRESS = Duration.ofSeconds(Long.getLong("msgqueue.stress.seconds", 8));

  private final TestDatabase db;
  private final HikariDataSource pool;
  private final ClaimHold claimHold = new ClaimHold();
  private final MsgQueueRepository repository;
  private final List<AutoCloseable> toClose = new ArrayList<>();

  SubscriberPipelineIT(TestDatabase db) {
    this.db = db;
    this.pool = db.pool(12);
    this.repository = RepositoryFixture.listenedRepository(pool, claimHold, MsgQueueConfig.defaults());
  }

  @AfterEach
  void closeAll() throws Exception {
    claimHold.release();
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    pool.close();
  }

  @Test
  void claimsNeverTakeMoreThanTheFreeHandlersPlusThePrefetch() throws Exception {
    QueueSpec spec = QueueSpec.durable("room");
    List<Long> ids = publish(spec, 400);
    Semaphore mayFinish = new Semaphore(0);
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    AtomicInteger running = new AtomicInteger();
    Subscriber subscriber = started(Subscriber.builder(repository, spec, message -> {
      running.incrementAndGet();
      mayFinish.acquire();
      handled.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet();
      running.decrementAndGet();
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(3).prefetch(7).batchSize(100).pollInterval(POLL));

    // Three handlers blocked, seven waiting: the room is full, and wake-ups and polls must not claim past it.
    await("the handlers running", () -> running.get() == 3);
    await("the room claimed", () -> claimedOf(spec, ids) == 10);
    long claimsWhenFull = subscriber.claimRounds();
    for (int i = 0; i < 5; i++) {
      subscriber.wake();
    }
    assertThat(claimedOf(spec, ids)).isEqualTo(10);
    assertThat(subscriber.claimRounds()).isEqualTo(claimsWhenFull);
    assertThat(subscriber.mostHeld()).isEqualTo(10);

    // Let them finish one at a time, then all: every claim fits the room freed before it was sent.
    for (int i = 0; i < 20; i++) {
      int before = handled.size();
      mayFinish.release();
      await("one more handled", () -> handled.size() == before + 1);
      assertThat(subscriber.mostHeld()).isLessThanOrEqualTo(10);
    }
    mayFinish.release(ids.size());
    await("every message handled, none left", () -> handled.size() == ids.size() && itemsOf(spec) == 0);
    assertThat(subscriber.mostHeld()).isLessThanOrEqualTo(10);
    assertThat(subscriber.largestAck()).isZero(); // the default mode's claims take their messages: no ack to write
    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isOne());
  }

  @Test
  void closeWaitsForAClaimInTheDatabaseAndHandsItsMessagesBackInLeaseMode() throws Exception {
    closeWithAClaimInFlight(QueueSpec.durable("close-claim-lease"), Duration.ofMinutes(5), true);
  }

  @Test
  void closeWaitsForAClaimInTheDatabaseAndHandsItsMessagesBackInDefaultMode() throws Exception {
    closeWithAClaimInFlight(QueueSpec.durable("close-claim-default"), null, true);
  }

  @Test
  void aClaimThatOutlivesCloseHandsItsMessagesBackWhenItReturnsInLeaseMode() throws Exception {
    closeWithAClaimInFlight(QueueSpec.durable("late-claim-lease"), Duration.ofMinutes(5), false);
  }

  @Test
  void aClaimThatOutlivesCloseHandsItsMessagesBackWhenItReturnsInDefaultMode() throws Exception {
    closeWithAClaimInFlight(QueueSpec.durable("late-claim-default"), null, false);
  }

  /**
   * Holds the subscriber's second claim after it ran (its messages ASSIGNED in lease mode, taken in the default mode)
   * until close() began, or until close() returned when {@code closeWaits} is false; then nothing is lost: the first
   * claim's messages are handled once and settled, the held claim's are PENDING again under their ids, claimable at
   * once by anyone.
   */
  private void closeWithAClaimInFlight(QueueSpec spec, Duration lease, boolean closeWaits) throws Exception {
    List<Long> ids = publish(spec, 60);
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    CountDownLatch closeReturned = new CountDownLatch(1);
    List<Subscriber> subscriber = new ArrayList<>();
    claimHold.holdClaim(2, () -> {
      if (closeWaits) {
        await("close() called", () -> subscriber.get(0).isClosing());
      } else {
        await("close() returned", () -> closeReturned.getCount() == 0);
      }
    });
    Subscriber.Builder builder = Subscriber.builder(repository, spec,
            message -> handled.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet()).mode(ConsumeMode.AT_MOST_ONCE)
        .concurrency(2).prefetch(0).batchSize(10).ackDelay(Duration.ZERO).pollInterval(POLL);
    if (lease != null) {
      builder.mode(ConsumeMode.LEASE).lease(lease);
    }
    subscriber.add(builder.start());
    assertThat(claimHold.held.await(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
    assertThat(claimedOf(spec, ids)).isPositive(); // the held claim's messages, at least

    // Not waiting for the held claim: close() gives up on it after two seconds, by when the handlers have finished.
    boolean handlersFinished = subscriber.get(0).close(closeWaits ? Duration.ofSeconds(60) : Duration.ofSeconds(2));
    assertThat(handlersFinished).isTrue();
    closeReturned.countDown();
    if (lease == null) {
      // The held take commits only now (what it deleted was visible to other sessions until then), then puts back.
      await("the held claim's messages handed back", () -> subscriber.get(0).released() > 0);
    }
    await("nothing left ASSIGNED", () -> assignedOf(spec) == 0);
    // Default mode: the held claim took its messages, and puts them back once it returns.
    await("every message handled or back in the queue", () -> handled.size() + pendingOf(spec).size() == ids.size());

    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isOne());
    Set<Long> pending = new HashSet<>(pendingOf(spec));
    assertThat(pending).doesNotContainAnyElementsOf(handled.keySet());
    Set<Long> accounted = new HashSet<>(pending);
    accounted.addAll(handled.keySet());
    assertThat(accounted).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(pending).isNotEmpty(); // the held claim's messages came back
  }

  @Test
  void idleSubscribersShareABoundedSetOfThreadsAndAPublishWakesOne() throws Exception {
    int queues = 200;
    WakeupListener wakeups = WakeupListener.start(() -> DriverManager.getConnection(db.jdbcUrl()));
    toClose.add(wakeups);
    await("the listener connected", wakeups::isListening);
    Map<String, AtomicInteger> handled = new ConcurrentHashMap<>();
    List<Subscriber> subscribers = new ArrayList<>();
    for (int i = 0; i < queues; i++) {
      QueueSpec spec = QueueSpec.durable("idle-" + i);
      subscribers.add(started(Subscriber.builder(repository, spec,
              message -> handled.computeIfAbsent(message.queueName(), q -> new AtomicInteger()).incrementAndGet()).mode(ConsumeMode.AT_MOST_ONCE)
          .pollInterval(Subscriber.MAX_POLL_INTERVAL).wakeups(wakeups)));
    }
    String shared = subscribers.get(0).sharedThreadPrefix();
    // Other test classes run in this JVM at the same time: count this repository's threads and the listener's.
    String handlers = shared.replace("msgqueue-consume-", "msgqueue-handler-");
    BooleanSupplier bounded = () -> threadsNamed(shared + "-") + threadsNamed(handlers + "-") + 1 <= 100;
    assertThat(bounded.getAsBoolean()).as("msgqueue threads with %d idle subscribers", queues).isTrue();

    Subscriber target = subscribers.get(137);
    repository.publish(target.queue(), "{\"wake\":true}");
    await("the published message handled", () -> handled.containsKey(target.queue().name()));
    // The wake-up leaves after the publish returns: the target's first claim may have been quicker.
    await("the publish's wake-up received", () -> target.wakeups() > 0);
    assertThat(handled).containsOnlyKeys(target.queue().name());
    assertThat(bounded.getAsBoolean()).isTrue();

    for (Subscriber subscriber : subscribers) {
      subscriber.close();
    }
    await("the shared threads stopped with the last subscriber", () -> threadsNamed(shared + "-") == 0);
  }

  @Test
  void theIdlePollBacksOffWhileWakeupsWorkUnlessMaxIdlePollIntervalTurnsItOff() throws Exception {
    WakeupListener wakeups = WakeupListener.start(() -> DriverManager.getConnection(db.jdbcUrl()));
    toClose.add(wakeups);
    await("the listener connected", wakeups::isListening);
    Duration poll = Duration.ofMillis(100);
    Subscriber steady = started(Subscriber.builder(repository, QueueSpec.durable("steady-poll"), message -> { }).mode(ConsumeMode.AT_MOST_ONCE)
        .pollInterval(poll).maxIdlePollInterval(poll).wakeups(wakeups));
    Subscriber backingOff = started(Subscriber.builder(repository, QueueSpec.durable("backing-off"), message -> { }).mode(ConsumeMode.AT_MOST_ONCE)
        .pollInterval(poll).wakeups(wakeups));
    // Past the rechecks after the start: both poll now, one every 100 ms, the other ever more rarely.
    await("the steady subscriber polling", () -> steady.claimRounds() >= 15);
    long steadyFrom = steady.claimRounds();
    long backingOffFrom = backingOff.claimRounds();
    await("30 more steady polls", () -> steady.claimRounds() >= steadyFrom + 30);
    long backingOffPolls = backingOff.claimRounds() - backingOffFrom;
    // 30 polls of the steady one take at least 3 s; the backing-off one waits 0.1, 0.2, 0.4, 0.8, 1.6, 3.2 s at most.
    assertThat(backingOffPolls).as("polls of the backed-off subscriber during 30 steady polls").isLessThanOrEqualTo(6);
    assertThat(backingOff.claimRounds()).isPositive();
  }

  @Test
  void aStressRunWithRestartsHandlesEveryMessageExactlyOnceInEitherMode() throws Exception {
    QueueSpec leased = QueueSpec.durable("stress-lease");
    QueueSpec plain = QueueSpec.durable("stress-default");
    List.of(leased, plain).forEach(repository::bindQueue);
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    MessageHandler handler = message -> {
      handled.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet();
      if (message.id() % 7 == 0) {
        Thread.sleep(1); // some slower handlers, so claims, handlers and acks overlap unevenly
      }
    };
    List<Subscriber> running = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      running.add(stressSubscriber(leased, Duration.ofMinutes(5), handler));
      running.add(stressSubscriber(plain, null, handler));
    }
    List<Long> published = new ArrayList<>();
    long end = System.nanoTime() + STRESS.toNanos();
    int round = 0;
    while (System.nanoTime() - end < 0) {
      published.addAll(repository.publishBatch(leased, payloads(50)));
      published.addAll(repository.publishBatch(plain, payloads(50)));
      if (++round % 20 == 0) {
        // Close one subscriber of each queue with claims and handlers in flight, and start a fresh one.
        int victim = (round / 20) % 3 * 2;
        for (int k = 0; k < 2; k++) {
          Subscriber old = running.get(victim + k);
          assertThat(old.close(Duration.ofSeconds(60))).isTrue();
          running.set(victim + k, stressSubscriber(old.queue(), k == 0 ? Duration.ofMinutes(5) : null, handler));
        }
      }
      Thread.sleep(5);
    }
    await("every message handled and acked", () -> itemsOf(leased) == 0 && itemsOf(plain) == 0);
    for (Subscriber subscriber : running) {
      assertThat(subscriber.close(Duration.ofSeconds(60))).isTrue();
      assertThat(subscriber.largestAck()).isLessThanOrEqualTo(20);
    }
    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(published);
    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isOne());
  }

  private Subscriber stressSubscriber(QueueSpec spec, Duration lease, MessageHandler handler) {
    Subscriber.Builder builder = Subscriber.builder(repository, spec, handler).mode(ConsumeMode.AT_MOST_ONCE)
        .concurrency(4).batchSize(20).pollInterval(POLL);
    if (lease != null) {
      builder.mode(ConsumeMode.LEASE).lease(lease);
    }
    return builder.start();
  }

  private Subscriber started(Subscriber.Builder builder) {
    Subscriber subscriber = builder.start();
    toClose.add(subscriber);
    return subscriber;
  }

  private List<Long> publish(QueueSpec spec, int count) {
    repository.bindQueue(spec);
    return repository.publishBatch(spec, payloads(count));
  }

  private static List<String> payloads(int count) {
    return IntStream.range(0, count).mapToObj(i -> "{\"n\":" + i + "}").toList();
  }

  private int itemsOf(QueueSpec spec) {
    return db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name()));
  }

  /** Messages of {@code published} claimed so far: taken (default mode) or ASSIGNED (lease mode), not PENDING. */
  private int claimedOf(QueueSpec spec, List<Long> published) {
    return published.size() - pendingOf(spec).size();
  }

  private int assignedOf(QueueSpec spec) {
    return db.dsl().fetchCount(MESSAGE_QUEUE_ITEM,
        MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name()).and(MESSAGE_QUEUE_ITEM.STATUS.eq(MessageQueueItemStatus.ASSIGNED)));
  }

  private List<Long> pendingOf(QueueSpec spec) {
    return db.dsl().select(MESSAGE_QUEUE_ITEM.ID).from(MESSAGE_QUEUE_ITEM)
        .where(MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name()).and(MESSAGE_QUEUE_ITEM.STATUS.eq(MessageQueueItemStatus.PENDING)))
        .fetch(MESSAGE_QUEUE_ITEM.ID);
  }

  private static long threadsNamed(String prefix) {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(Thread::isAlive)
        .filter(thread -> thread.getName().startsWith(prefix))
        .count();
  }

  private static void await(String what, BooleanSupplier condition) {
    Await.until(what, Duration.ofSeconds(AWAIT_SECONDS), condition);
  }

  /** Holds the n-th claim statement after it ran, in the claiming thread, until a condition the test sets holds. */
  private static final class ClaimHold implements ExecuteListener {
    final CountDownLatch held = new CountDownLatch(1);
    private final AtomicInteger claims = new AtomicInteger();
    private final CountDownLatch released = new CountDownLatch(1);
    private volatile int holdNth;
    private volatile Runnable until;

    void holdClaim(int nth, Runnable condition) {
      this.until = condition;
      this.holdNth = nth;
    }

    void release() {
      released.countDown();
    }

    @Override
    public void executeEnd(ExecuteContext ctx) {
      String sql = ctx.sql() == null ? "" : ctx.sql().toLowerCase(Locale.ROOT);
      // A claim is the one statement that locks with SKIP LOCKED and sets ASSIGNED (lease mode) or deletes what it
      // locked (the default mode's take); docs/statements.sql.
      boolean claim = sql.contains("skip locked") && (sql.contains("'assigned'") || sql.startsWith("delete"));
      if (holdNth == 0 || !claim) {
        return;
      }
      if (claims.incrementAndGet() == holdNth) {
        held.countDown();
        until.run();
      }
    }
  }
}
