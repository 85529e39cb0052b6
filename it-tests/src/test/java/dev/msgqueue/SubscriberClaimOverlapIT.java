package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.it.Await;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.stream.IntStream;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.jooq.TransactionContext;
import org.jooq.TransactionListener;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

// Kept in dev.msgqueue: reads Subscriber's package-private counters and wake().
/**
 * Claims that overlap when the {@link Subscriber}'s prefetch leaves room for several (here four batches): quick handlers get a second claim in flight
 * while the first is still in the database, within the room ({@code concurrency + prefetch}); busy handlers get a
 * batch or two ahead of them, not the whole prefetch. A jOOQ listener on the repository's context holds a claim after
 * it ran (its rows taken: a take once its transaction committed; its result not yet returned), so each interleaving is
 * forced, not timed.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class SubscriberClaimOverlapIT {
  /** A bound on liveness, not a speed claim: generous, since other builds share the machine. */
  private static final long AWAIT_SECONDS = 120;
  private static final Duration POLL = Duration.ofMillis(50);
  private static final int BATCH = 10;
  private static final int PREFETCH = 4 * BATCH;
  private static final int OVERLAP_MESSAGES = 200;

  private final HikariDataSource pool;
  private final QueueRows rows;
  private final ClaimWatch claims = new ClaimWatch();
  private final MsgQueueRepository repository;
  private final List<AutoCloseable> toClose = new ArrayList<>();

  SubscriberClaimOverlapIT(TestDatabase db) {
    this.pool = db.pool(12);
    this.rows = new QueueRows(db.dsl());
    this.repository = RepositoryFixture.listenedRepository(pool, claims, claims, MsgQueueConfig.defaults());
  }

  @AfterEach
  void closeAll() throws Exception {
    claims.release();
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    pool.close();
  }

  @Test
  void theDefaultPrefetchIsAWholeNumberOfBatches() {
    assertThat(Subscriber.builder(repository, QueueSpec.durable("defaults"), message -> { }).mode(ConsumeMode.AT_MOST_ONCE).batchSize(BATCH)
        .effectivePrefetch()).isEqualTo(Subscriber.DEFAULT_PREFETCH_BATCHES * BATCH);
    assertThat(Subscriber.builder(repository, QueueSpec.durable("defaults"), message -> { }).mode(ConsumeMode.AT_MOST_ONCE).batchSize(1_000)
        .effectivePrefetch()).isEqualTo(Subscriber.DEFAULT_PREFETCH_BATCHES * 1_000);
    assertThat(Subscriber.builder(repository, QueueSpec.durable("defaults"), message -> { }).mode(ConsumeMode.AT_MOST_ONCE).prefetch(3)
        .effectivePrefetch()).isEqualTo(3);
  }

  @Test
  void quickHandlersGetASecondClaimWhileTheFirstIsInTheDatabaseWithinTheRoom() {
    QueueSpec spec = QueueSpec.durable("overlap");
    List<Long> ids = publish(spec, OVERLAP_MESSAGES);
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    // The second claim (the first after a full one) is held after its statement ran until a third one has run too:
    // with one claim at a time the third is never sent and this waits forever.
    CountDownLatch thirdRan = new CountDownLatch(1);
    claims.onClaim(2, () -> await("a third claim run while the second is held", () -> thirdRan.getCount() == 0));
    claims.onClaim(3, thirdRan::countDown);
    Subscriber subscriber = started(Subscriber.builder(repository, spec, counting(handled)).mode(ConsumeMode.AT_MOST_ONCE)
        .concurrency(1).batchSize(BATCH).prefetch(PREFETCH).pollInterval(POLL));
    int room = 1 + PREFETCH;

    await("every message handled, none left", () -> handled.size() == ids.size() && itemsOf(spec) == 0);
    assertThat(claims.mostInFlight.get()).isBetween(2, PREFETCH / BATCH);
    assertThat(claims.claimedWhenThirdRan).isGreaterThanOrEqualTo(2 * BATCH); // the held claim's and the third's
    assertThat(subscriber.mostHeld()).isBetween(2 * BATCH, room);
    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isOne());
  }

  @Test
  void busyHandlersGetABatchOrTwoAheadNotTheWholePrefetch() throws Exception {
    QueueSpec spec = QueueSpec.durable("busy");
    List<Long> ids = publish(spec, 200);
    Semaphore mayFinish = new Semaphore(0);
    AtomicInteger running = new AtomicInteger();
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    MessageHandler counter = counting(handled);
    Subscriber subscriber = started(Subscriber.builder(repository, spec, message -> {
      running.incrementAndGet();
      mayFinish.acquire();
      counter.handle(message);
      running.decrementAndGet();
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(2).batchSize(BATCH).prefetch(PREFETCH).pollInterval(POLL));

    // Two handlers blocked on the first claim's batch, eight waiting: less than a batch, so a wake-up claims one
    // more; eighteen waiting then, and no wake-up or poll claims past that although the room (42) has space.
    await("the handlers running", () -> running.get() == 2);
    subscriber.wake();
    await("a second batch claimed", () -> claimedOf(spec, ids) == 2 * BATCH);
    // The rows are taken once the claim commits, before the subscriber has read its result and counted the round.
    await("the second claim returned", () -> subscriber.claimRounds() >= 2);
    long claimsWhenAhead = subscriber.claimRounds();
    for (int i = 0; i < 5; i++) {
      subscriber.wake();
    }
    Thread.sleep(POLL.toMillis() * 4); // not a timing assertion: a claim sent meanwhile would only fail it
    assertThat(subscriber.claimRounds()).isEqualTo(claimsWhenAhead);
    assertThat(claimedOf(spec, ids)).isEqualTo(2 * BATCH);

    // Once less than a batch waits (with none on its way) the next claim goes out: by the tenth handler's end at the
    // latest (the ninth may end before the next message is taken off the buffer). Held at most: the running
    // handlers, less than a batch waiting and one on its way.
    mayFinish.release(BATCH);
    await("ten handled", () -> handled.size() == BATCH);
    await("a third batch claimed", () -> subscriber.claimRounds() > claimsWhenAhead);
    assertThat(subscriber.mostHeld()).isLessThanOrEqualTo(2 + 2 * BATCH - 1);
    mayFinish.release(ids.size());
    await("every message handled, none left", () -> handled.size() == ids.size() && itemsOf(spec) == 0);
    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isOne());
  }

  @Test
  void claimsWaitWhileMoreThanABatchOfAcksIsUnwritten() throws Exception {
    QueueSpec spec = QueueSpec.durable("ack-gate");
    List<Long> ids = publish(spec, 200);
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    CountDownLatch ackMayRun = new CountDownLatch(1);
    claims.onFirstAck(() -> {
      try {
        ackMayRun.await(AWAIT_SECONDS, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    // One handler, one ack statement at a time (no more than the handlers): while the first ack is held, the handled
    // messages behind it pile up unwritten, and once more than a batch is unwritten no claim is sent. Lease mode: the
    // default mode's claims take their messages, so it writes no acks.
    Subscriber subscriber = started(Subscriber.builder(repository, spec, counting(handled)).mode(ConsumeMode.AT_MOST_ONCE)
        .concurrency(1).batchSize(BATCH).prefetch(PREFETCH).ackDelay(Duration.ZERO).pollInterval(POLL)
        .mode(ConsumeMode.LEASE).lease(Duration.ofMinutes(10)));
    int room = 1 + PREFETCH;

    await("the first ack held", () -> claims.ackHeld.getCount() == 0);
    // The second claim's batch is handled behind the held ack at the latest: more than a batch unwritten from then.
    await("two batches handled", () -> handled.size() >= 2 * BATCH);
    for (int i = 0; i < 5; i++) {
      subscriber.wake();
    }
    Thread.sleep(POLL.toMillis() * 4); // not a timing assertion: claims sent meanwhile could only fail it
    await("the claims sent before the gate closed returned", () -> claims.inFlight.get() == 0);
    // The held batch, and what claims sent while at most a batch was unwritten could bring (the room); without the
    // gate claims would go on as handlers free room, through all 200.
    assertThat(handled.size()).isLessThanOrEqualTo(BATCH + room);
    assertThat(itemsOf(spec)).isEqualTo(ids.size());

    ackMayRun.countDown();
    await("every message handled, none left", () -> handled.size() == ids.size() && itemsOf(spec) == 0);
    assertThat(subscriber.largestAck()).isLessThanOrEqualTo(BATCH);
    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isOne());
  }

  private Subscriber started(Subscriber.Builder builder) {
    Subscriber subscriber = builder.start();
    toClose.add(subscriber);
    return subscriber;
  }

  private List<Long> publish(QueueSpec spec, int count) {
    repository.bindQueue(spec);
    return repository.publishBatch(spec, IntStream.range(0, count).mapToObj(i -> "{\"n\":" + i + "}").toList());
  }

  private int itemsOf(QueueSpec spec) {
    return rows.itemsOf(spec.name());
  }

  /** Messages of {@code published} claimed so far: taken (default mode) or ASSIGNED (lease mode), not PENDING. */
  private int claimedOf(QueueSpec spec, List<Long> published) {
    return published.size() - rows.pendingOf(spec.name());
  }

  /** A handler that counts each message's deliveries into {@code handled}. */
  private static MessageHandler counting(Map<Long, AtomicInteger> handled) {
    return message -> handled.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet();
  }

  private static void await(String what, BooleanSupplier condition) {
    Await.until(what, Duration.ofSeconds(AWAIT_SECONDS), condition);
  }

  /**
   * Counts the claim statements in flight (sent, result not yet returned) and runs an action in the n-th claim's
   * thread after its statement ran; the third claim also records how many messages were claimed then. Can hold the first
   * ack statement before it runs.
   */
  private final class ClaimWatch implements ExecuteListener, TransactionListener {
    /** A take ran on this thread and waits for its transaction to commit. */
    private final ThreadLocal<Boolean> takeUncommitted = ThreadLocal.withInitial(() -> false);
    private final ThreadLocal<Boolean> inTransaction = ThreadLocal.withInitial(() -> false);
    final AtomicInteger mostInFlight = new AtomicInteger();
    volatile int claimedWhenThirdRan = -1;
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicInteger seen = new AtomicInteger();
    private final Map<Integer, Runnable> actions = new ConcurrentHashMap<>();
    final CountDownLatch ackHeld = new CountDownLatch(1);
    private volatile Runnable firstAck;
    private volatile boolean released;

    void onFirstAck(Runnable action) {
      firstAck = action;
    }

    void onClaim(int nth, Runnable action) {
      actions.put(nth, action);
    }

    void release() {
      released = true;
    }

    private boolean isClaim(ExecuteContext ctx) {
      String sql = ctx.sql() == null ? "" : ctx.sql().toLowerCase(Locale.ROOT);
      // A claim is the one statement that locks with SKIP LOCKED and sets ASSIGNED (lease mode) or deletes what it
      // locked (the default mode's take); docs/statements.sql.
      return sql.contains("skip locked") && (sql.contains("'assigned'") || sql.startsWith("delete"));
    }

    @Override
    public void executeStart(ExecuteContext ctx) {
      if (isClaim(ctx)) {
        mostInFlight.accumulateAndGet(inFlight.incrementAndGet(), Math::max);
      }
      String sql = ctx.sql() == null ? "" : ctx.sql().toLowerCase(Locale.ROOT);
      Runnable action = firstAck;
      if (action != null && sql.startsWith("delete") && sql.contains("unnest") && ackHeld.getCount() > 0
          && !released) {
        ackHeld.countDown();
        action.run();
      }
    }

    @Override
    public void beginEnd(TransactionContext ctx) {
      inTransaction.set(true);
    }

    @Override
    public void commitEnd(TransactionContext ctx) {
      inTransaction.set(false);
      if (takeUncommitted.get()) {
        takeUncommitted.set(false);
        claimRan();
      }
    }

    @Override
    public void rollbackEnd(TransactionContext ctx) {
      commitEnd(ctx);
    }

    @Override
    public void executeEnd(ExecuteContext ctx) {
      if (!isClaim(ctx)) {
        return;
      }
      if (inTransaction.get()) {
        takeUncommitted.set(true); // its rows are taken once its transaction commits
        return;
      }
      claimRan();
    }

    private void claimRan() {
      int nth = seen.incrementAndGet();
      if (nth == 3) {
        claimedWhenThirdRan = OVERLAP_MESSAGES - rows.pendingOf("overlap");
      }
      Runnable action = actions.get(nth);
      if (action != null && !released) {
        action.run();
      }
      inFlight.decrementAndGet();
    }
  }
}
