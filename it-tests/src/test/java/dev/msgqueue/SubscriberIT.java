package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.it.Await;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.stream.IntStream;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

// Kept in dev.msgqueue: reads Subscriber's package-private counters and WakeupListener's connection counters.
/** {@link Subscriber} and {@link WakeupListener} against PostgreSQL. */
class SubscriberIT extends RepositoryFixture {
  /** Long enough that a test waiting on it would time out: delivery within a test proves a wake-up caused it. */
  private static final Duration NO_POLLING = Duration.ofHours(1);
  private static final long AWAIT_SECONDS = 30;

  SubscriberIT(TestDatabase db) {
    super(db, 8);
  }

  private WakeupListener listening() throws InterruptedException {
    WakeupListener listener = closeLater(WakeupListener.start(db::connect));
    await("LISTEN connection up", listener::isListening);
    return listener;
  }

  private static void await(String what, BooleanSupplier condition) {
    Await.until(what, Duration.ofSeconds(AWAIT_SECONDS), condition);
  }

  private static long take(BlockingQueue<Long> delivered) throws InterruptedException {
    Long id = delivered.poll(AWAIT_SECONDS, TimeUnit.SECONDS);
    assertThat(id).as("a delivery within %d s", AWAIT_SECONDS).isNotNull();
    return id;
  }

  @Test
  void aWakeUpDeliversAtOnceWithoutWaitingForThePoll() throws Exception {
    WakeupListener listener = listening();
    QueueSpec spec = QueueSpec.durable("woken");
    BlockingQueue<Long> delivered = new LinkedBlockingQueue<>();
    Subscriber subscriber = closeLater(Subscriber.builder(repository, spec, message -> delivered.add(message.id())).mode(ConsumeMode.AT_MOST_ONCE)
        .pollInterval(NO_POLLING).wakeups(listener).start());
    await("the first (empty) claim", () -> subscriber.claimRounds() >= 1);

    List<Long> published = new ArrayList<>();
    List<Long> received = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      published.add(repository.publish(spec, "{\"i\": " + i + "}"));
      received.add(take(delivered));
    }

    assertThat(received).containsExactlyElementsOf(published);
    assertThat(subscriber.wakeups()).isPositive();
    await("all acked", () -> subscriber.acked() == 5);
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name()))).isZero();
  }

  @Test
  void deliveryResumesAfterTheListenConnectionIsKilled() throws Exception {
    WakeupListener listener = listening();
    QueueSpec spec = QueueSpec.durable("reconnect");
    BlockingQueue<Long> delivered = new LinkedBlockingQueue<>();
    closeLater(Subscriber.builder(repository, spec, message -> delivered.add(message.id())).mode(ConsumeMode.AT_MOST_ONCE)
        .pollInterval(NO_POLLING).wakeups(listener).start());
    long before = repository.publish(spec, "1");
    assertThat(take(delivered)).isEqualTo(before);

    int killedPid = listener.backendPid();
    Boolean terminated = db.dsl().select(DSL.function("pg_terminate_backend", Boolean.class, DSL.val(killedPid)))
        .fetchOne(0, Boolean.class);
    assertThat(terminated).isTrue();
    await("the listener reconnected", () -> listener.connects() >= 2 && listener.isListening());
    assertThat(listener.backendPid()).isNotEqualTo(killedPid);

    long after = repository.publish(spec, "2");
    assertThat(take(delivered)).isEqualTo(after);
  }

  @Test
  void gracefulCloseFinishesAndAcksInFlightHandlersAndLosesNothing() throws Exception {
    QueueSpec spec = QueueSpec.durable("graceful");
    repository.bindQueue(spec);
    List<Long> ids = repository.publishBatch(spec, IntStream.range(0, 20).mapToObj(Integer::toString).toList());
    CountDownLatch release = new CountDownLatch(1);
    List<Long> started = new CopyOnWriteArrayList<>();
    List<Long> finished = new CopyOnWriteArrayList<>();
    Subscriber subscriber = Subscriber.builder(repository, spec, message -> {
      started.add(message.id());
      assertThat(release.await(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
      finished.add(message.id());
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(3).batchSize(10).pollInterval(Duration.ofMillis(50)).start();
    await("three handlers running", () -> started.size() == 3);

    CompletableFuture<Boolean> closing = CompletableFuture.supplyAsync(() -> subscriber.close(Duration.ofSeconds(30)));
    await("close() began", subscriber::isClosing);
    release.countDown();
    assertThat(closing.get(AWAIT_SECONDS, TimeUnit.SECONDS)).as("all in-flight handlers finished").isTrue();

    assertThat(started).containsExactlyInAnyOrderElementsOf(ids.subList(0, 3));
    assertThat(finished).containsExactlyInAnyOrderElementsOf(started);
    assertThat(subscriber.acked()).isEqualTo(3);
    // Nothing lost: the handled ones are deleted, the rest are still PENDING and claimable, none is left ASSIGNED.
    Map<MessageQueueItemStatus, Integer> byStatus = db.dsl()
        .select(MESSAGE_QUEUE_ITEM.STATUS, DSL.count()).from(MESSAGE_QUEUE_ITEM)
        .where(MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name())).groupBy(MESSAGE_QUEUE_ITEM.STATUS)
        .fetchMap(MESSAGE_QUEUE_ITEM.STATUS, DSL.count());
    assertThat(byStatus).containsExactly(Map.entry(MessageQueueItemStatus.PENDING, 17));
    assertThat(repository.claim(spec.name(), 100)).extracting(ClaimedMessage::id)
        .containsExactlyElementsOf(ids.subList(3, 20));
  }

  @Test
  void inLeaseModeAFailedMessageIsRedeliveredAfterItsLeaseWithoutHoldingUpOthers() throws Exception {
    QueueSpec spec = QueueSpec.durable("lease-failure");
    repository.bindQueue(spec);
    long poison = repository.publish(spec, "\"poison\"");
    List<Long> good = repository.publishBatch(spec, List.of("1", "2", "3", "4", "5"));
    Map<Long, AtomicInteger> attempts = new ConcurrentHashMap<>();
    List<String> events = new CopyOnWriteArrayList<>();
    Subscriber subscriber = closeLater(Subscriber.builder(repository, spec, message -> {
      int attempt = attempts.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet();
      events.add(message.id() + "#" + attempt);
      if (message.id() == poison && attempt == 1) {
        throw new IllegalStateException("first attempt fails (expected by the test)");
      }
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(2).pollInterval(Duration.ofMillis(50)).mode(ConsumeMode.LEASE).lease(Duration.ofSeconds(2)).start());

    await("all six acked", () -> subscriber.acked() == 6);

    assertThat(attempts.get(poison)).hasValue(2);
    good.forEach(id -> assertThat(attempts.get(id)).hasValue(1));
    int redelivery = events.indexOf(poison + "#2");
    good.forEach(id -> assertThat(events.indexOf(id + "#1")).as("message %d handled before the redelivery", id)
        .isLessThan(redelivery));
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name()))).isZero();
  }

  @Test
  void inDefaultModeAFailedMessageIsNotRedeliveredAndOthersAreDelivered() throws Exception {
    QueueSpec spec = QueueSpec.durable("default-failure");
    repository.bindQueue(spec);
    long poison = repository.publish(spec, "\"poison\"");
    List<Long> good = repository.publishBatch(spec, List.of("1", "2", "3"));
    Map<Long, AtomicInteger> attempts = new ConcurrentHashMap<>();
    Subscriber subscriber = closeLater(Subscriber.builder(repository, spec, message -> {
      attempts.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet();
      if (message.id() == poison) {
        throw new IllegalStateException("always fails (expected by the test)");
      }
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(2).pollInterval(Duration.ofMillis(50)).start());

    await("the good ones handled", () -> subscriber.acked() == 3);
    await("a few more claim rounds", () -> subscriber.claimRounds() >= 10);

    // At most once: the claim took every message, the poison one included, and nothing brings it back.
    assertThat(attempts.get(poison)).hasValue(1);
    good.forEach(id -> assertThat(attempts.get(id)).hasValue(1));
    assertThat(row(poison)).isNull();
    good.forEach(id -> assertThat(row(id)).isNull());
  }

  @Test
  void handlerConcurrencyIsBounded() throws Exception {
    QueueSpec spec = QueueSpec.durable("bounded");
    repository.bindQueue(spec);
    repository.publishBatch(spec, IntStream.range(0, 30).mapToObj(Integer::toString).toList());
    AtomicInteger running = new AtomicInteger();
    AtomicInteger maxRunning = new AtomicInteger();
    Subscriber subscriber = closeLater(Subscriber.builder(repository, spec, message -> {
      maxRunning.accumulateAndGet(running.incrementAndGet(), Math::max);
      Thread.sleep(10);
      running.decrementAndGet();
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(3).batchSize(10).pollInterval(Duration.ofMillis(50)).start());

    await("all acked", () -> subscriber.acked() == 30);
    assertThat(maxRunning.get()).isBetween(1, 3);
  }

  @Test
  void afterMessagesAnEmptyClaimIsRetriedSoonThenLessAndLessOften() throws Exception {
    QueueSpec spec = QueueSpec.durable("recheck");
    repository.bindQueue(spec);
    repository.publish(spec, "1");
    BlockingQueue<Long> delivered = new LinkedBlockingQueue<>();
    Subscriber subscriber = closeLater(Subscriber.builder(repository, spec, message -> delivered.add(message.id())).mode(ConsumeMode.AT_MOST_ONCE)
        .pollInterval(Subscriber.MAX_POLL_INTERVAL).start());
    take(delivered);
    Thread.sleep(50);
    long second = repository.publish(spec, "2");

    // No wake-ups and an hour's poll interval: only the re-checks that follow a claim that found messages find it.
    assertThat(delivered.poll(5, TimeUnit.SECONDS)).isEqualTo(second);
    long rounds = subscriber.claimRounds();
    Thread.sleep(3_000);
    // After 1, 2, 4, ... ms: about log2(3000) = 11 empty claims in 3 s, not one per millisecond nor none.
    assertThat(subscriber.claimRounds() - rounds).isBetween(5L, 14L);
  }

  @Test
  void slowHandlersGetEveryHandlerThreadAndNoMore() throws Exception {
    QueueSpec spec = QueueSpec.durable("every-thread");
    repository.bindQueue(spec);
    repository.publishBatch(spec, IntStream.range(0, 24).mapToObj(Integer::toString).toList());
    int concurrency = 8;
    java.util.concurrent.CountDownLatch allRunning = new java.util.concurrent.CountDownLatch(concurrency);
    AtomicInteger running = new AtomicInteger();
    AtomicInteger maxRunning = new AtomicInteger();
    AtomicInteger gaveUpWaiting = new AtomicInteger();
    // Each of the first handlers holds its thread until `concurrency` run at once: only if every handler thread joins
    // while messages wait do they all get there (a thread that joined late, or never, leaves them waiting 10 s).
    Subscriber subscriber = closeLater(Subscriber.builder(repository, spec, message -> {
      maxRunning.accumulateAndGet(running.incrementAndGet(), Math::max);
      allRunning.countDown();
      if (!allRunning.await(10, java.util.concurrent.TimeUnit.SECONDS)) {
        gaveUpWaiting.incrementAndGet();
      }
      running.decrementAndGet();
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(concurrency).batchSize(24).pollInterval(Duration.ofMillis(50)).start());

    await("all acked", () -> subscriber.acked() == 24);
    assertThat(gaveUpWaiting).hasValue(0);
    assertThat(maxRunning).hasValue(concurrency);
  }

  @Test
  void aLiveSubscriberKeepsAnIdleAutoDeletedQueueAliveUntilItCloses() throws Exception {
    // Touches every 500 ms against a 3 s threshold: 2.5 s of slack for a loaded machine.
    Duration threshold = Duration.ofSeconds(3);
    MsgQueueRepository shortLived = MsgQueueRepository.create(pool, MsgQueueConfig.builder()
        .keepAliveInterval(Duration.ofMillis(500)).reapIdleThreshold(threshold).build());
    QueueSpec spec = QueueSpec.autoDeleted("kept-alive");
    Subscriber subscriber = Subscriber.builder(shortLived, spec, message -> { }).mode(ConsumeMode.AT_MOST_ONCE)
        .pollInterval(Duration.ofMillis(100)).start();
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.eq(spec.name()))).as("bound on start").isOne();

    // No publishes; reap repeatedly until well past the point where the bind alone would have let it be reaped.
    long liveUntil = System.nanoTime() + threshold.plusSeconds(2).toNanos();
    int reaps = 0;
    while (System.nanoTime() < liveUntil) {
      assertThat(shortLived.reapIdleQueues()).doesNotContain(spec.name());
      reaps++;
      Thread.sleep(200);
    }
    assertThat(reaps).isGreaterThan(5);
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.eq(spec.name()))).isOne();

    assertThat(subscriber.close(Duration.ofSeconds(10))).isTrue();
    await("reaped once idle past the threshold", () -> shortLived.reapIdleQueues().contains(spec.name()));
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.eq(spec.name()))).isZero();
  }
}
