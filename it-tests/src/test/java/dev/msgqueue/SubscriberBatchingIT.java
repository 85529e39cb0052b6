package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.it.Await;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import java.io.PrintWriter;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.logging.Logger;
import java.util.stream.IntStream;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

// Kept in dev.msgqueue: reads Subscriber's package-private ack, claim-round and lease-renewal counters.
/**
 * The {@link Subscriber}'s batched claims and acks, prefetch buffer, lease renewal and keep-alive, against
 * PostgreSQL.
 */
class SubscriberBatchingIT extends RepositoryFixture {
  private static final long AWAIT_SECONDS = 30;
  private static final Duration POLL = Duration.ofMillis(50);

  SubscriberBatchingIT(TestDatabase db) {
    super(db, 8);
  }

  private Subscriber started(Subscriber.Builder builder) {
    return closeLater(builder.start());
  }

  private static void await(String what, BooleanSupplier condition) {
    Await.until(what, Duration.ofSeconds(AWAIT_SECONDS), condition);
  }

  private int itemsOf(QueueSpec spec) {
    return db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name()));
  }

  @Test
  void aBacklogIsClaimedAndAckedInBatchesNotOneStatementPerMessage() throws Exception {
    QueueSpec spec = QueueSpec.durable("batched");
    repository.bindQueue(spec);
    repository.publishBatch(spec, IntStream.range(0, 1_000).mapToObj(Integer::toString).toList());
    AtomicInteger handled = new AtomicInteger();
    Subscriber subscriber = started(Subscriber.builder(repository, spec, message -> handled.incrementAndGet()).mode(ConsumeMode.AT_MOST_ONCE)
        .concurrency(4).batchSize(100));

    await("all handled and acked", () -> subscriber.acked() == 1_000);
    assertThat(handled.get()).isEqualTo(1_000);
    assertThat(itemsOf(spec)).isZero();
    // A claim per free handler slot would take hundreds of claims; batches of at least half of 100 take at most 20.
    assertThat(subscriber.claimRounds()).isLessThanOrEqualTo(30);
    assertThat(subscriber.ackFlushes()).isLessThan(500);
  }

  @Test
  void closeFlushesPendingAcksAndHandsBackWhatNeverStarted() throws Exception {
    QueueSpec spec = QueueSpec.durable("close-flush");
    repository.bindQueue(spec);
    repository.publishBatch(spec, IntStream.range(0, 20).mapToObj(Integer::toString).toList());
    List<Long> handled = new CopyOnWriteArrayList<>();
    AtomicBoolean slow = new AtomicBoolean(false);
    // One handler, 19 waiting in the buffer; acks wait up to the longest delay, so only close() can flush them.
    Subscriber subscriber = started(Subscriber.builder(repository, spec, message -> {
      handled.add(message.id());
      if (slow.get()) {
        Thread.sleep(300);
      }
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(1).batchSize(100).prefetch(50).ackDelay(Subscriber.MAX_ACK_DELAY).pollInterval(POLL));
    slow.set(true);
    await("the first messages handled", () -> handled.size() >= 2);

    assertThat(subscriber.close(Duration.ofSeconds(10))).isTrue();
    int done = handled.size();
    assertThat(subscriber.acked()).as("every handled message acked on close").isEqualTo(done);
    assertThat(subscriber.released()).as("the unstarted ones released").isEqualTo(20 - done);
    assertThat(itemsOf(spec)).isEqualTo(20 - done);
    // Handed back means claimable again at once, by anyone.
    assertThat(repository.claim(spec.name(), 100)).hasSize(20 - done);
  }

  @Test
  void aHandlerRunningThreeTimesItsLeaseIsNotRedeliveredAndIsAckedOnce() throws Exception {
    QueueSpec spec = QueueSpec.durable("long-handler");
    repository.bindQueue(spec);
    long id = repository.publish(spec, "1");
    Map<Long, AtomicInteger> deliveries = new ConcurrentHashMap<>();
    Subscriber subscriber = started(Subscriber.builder(repository, spec, message -> {
      deliveries.computeIfAbsent(message.id(), k -> new AtomicInteger()).incrementAndGet();
      Thread.sleep(6_000);
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(2).mode(ConsumeMode.LEASE).lease(Duration.ofSeconds(2)).pollInterval(POLL));

    await("acked", () -> subscriber.acked() == 1);
    Thread.sleep(2_500); // more than a lease: a redelivery would show now
    assertThat(deliveries.get(id).get()).isOne();
    assertThat(subscriber.leaseRenewals()).isPositive();
    assertThat(itemsOf(spec)).isZero();
  }

  @Test
  void leaseRenewalStopsAtTheMaximumHandlerTimeAndTheMessageIsRedelivered() throws Exception {
    QueueSpec spec = QueueSpec.durable("max-handler-time");
    repository.bindQueue(spec);
    long id = repository.publish(spec, "1");
    AtomicInteger deliveries = new AtomicInteger();
    Subscriber subscriber = started(Subscriber.builder(repository, spec, message -> {
      if (deliveries.incrementAndGet() == 1) {
        Thread.sleep(4_000); // far past maxHandlerTime + lease
      }
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(2).mode(ConsumeMode.LEASE).lease(Duration.ofMillis(600)).maxHandlerTime(Duration.ofMillis(700)).pollInterval(POLL));

    await("redelivered while the first handler still runs", () -> deliveries.get() == 2);
    await("the second delivery acked", () -> subscriber.acked() == 1);
    await("the first handler finished", () -> subscriber.ackFlushes() >= 2);
    assertThat(subscriber.acked()).as("the first handler's late ack deletes nothing").isOne();
    assertThat(itemsOf(spec)).isZero();
    assertThat(deliveries.get()).isEqualTo(2);
    assertThat(id).isPositive();
  }

  @Test
  void inLeaseModeNoBufferedMessageIsDeliveredTwiceBecauseItsLeaseRanOutWhileItWaited() throws Exception {
    QueueSpec spec = QueueSpec.durable("prefetch-lease");
    repository.bindQueue(spec);
    List<Long> ids = repository.publishBatch(spec, IntStream.range(0, 12).mapToObj(Integer::toString).toList());
    Map<Long, AtomicInteger> deliveries = new ConcurrentHashMap<>();
    // One handler at 250 ms a message and 12 claimed at once: the last would start 2.75 s after its claim, far past
    // its 1 s lease.
    Subscriber subscriber = started(Subscriber.builder(repository, spec, message -> {
      deliveries.computeIfAbsent(message.id(), k -> new AtomicInteger()).incrementAndGet();
      Thread.sleep(250);
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(1).batchSize(12).prefetch(11).mode(ConsumeMode.LEASE).lease(Duration.ofSeconds(1)).pollInterval(POLL));

    await("all acked", () -> subscriber.acked() == 12);
    Thread.sleep(1_200);
    assertThat(deliveries.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    deliveries.forEach((id, count) -> assertThat(count.get()).as("deliveries of %d", id).isOne());
    assertThat(subscriber.released()).as("some waited too long and were released unstarted").isPositive();
    assertThat(itemsOf(spec)).isZero();
  }

  @Test
  void aHandlerThatKeepsFailingIsRetriedWithBackoffThenDeadLetteredOnce() throws Exception {
    QueueSpec spec = QueueSpec.durable("failing-handler");
    repository.bindQueue(spec);
    long id = repository.publish(spec, "{\"poison\": true}");
    long fine = repository.publish(spec, "{\"poison\": false}");
    List<Long> deliveryTimes = new CopyOnWriteArrayList<>();
    RetryPolicy policy = RetryPolicy.builder("failing-handler-dead").initialBackoff(Duration.ofMillis(200))
        .multiplier(2).jitter(0).maxDeliveries(3).build();
    Subscriber subscriber = started(Subscriber.builder(repository, spec, message -> {
      if (message.id() == id) {
        deliveryTimes.add(System.nanoTime());
        throw new IllegalStateException("poison");
      }
    }).mode(ConsumeMode.AT_MOST_ONCE).mode(ConsumeMode.LEASE).lease(Duration.ofSeconds(30)).retryPolicy(policy).pollInterval(POLL));

    await("dead-lettered", () -> subscriber.deadLettered() == 1);
    assertThat(subscriber.acked()).isOne();
    assertThat(deliveryTimes).hasSize(3);
    // Backoffs of 200 ms then 400 ms, not the 30 s lease.
    long secondGap = deliveryTimes.get(2) - deliveryTimes.get(1);
    long firstGap = deliveryTimes.get(1) - deliveryTimes.get(0);
    assertThat(firstGap).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(190));
    assertThat(secondGap).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(390));
    assertThat(itemsOf(spec)).isZero();
    assertThat(repository.deadLetters("failing-handler-dead", 10)).hasSize(1);
    assertThat(fine).isPositive();
  }

  @Test
  void aConnectionFailingDuringAnAckFlushIsRetriedInLeaseModeNeverLost() throws Exception {
    QueueSpec spec = QueueSpec.durable("ack-flush-fails");
    repository.bindQueue(spec);
    FailingDataSource failing = new FailingDataSource(pool);
    MsgQueueRepository faulty = MsgQueueRepository.create(failing, MsgQueueConfig.defaults());
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3"));
    Map<Long, AtomicInteger> deliveries = new ConcurrentHashMap<>();
    failing.failDeletes.set(true); // acks are the subscriber's only DELETE; its claims still work
    Subscriber subscriber = started(Subscriber.builder(faulty, spec, message -> {
      deliveries.computeIfAbsent(message.id(), k -> new AtomicInteger()).incrementAndGet();
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(4).mode(ConsumeMode.LEASE).lease(Duration.ofSeconds(1)).ackDelay(Duration.ofMillis(200)).pollInterval(POLL));
    await("handled once", () -> deliveries.size() == 3);
    await("an ack flush failed", () -> failing.failures.get() > 0);
    failing.failDeletes.set(false);

    // The failed ack is retried (SubscriberAckBoundsIT pins the exact sequence); a retry that came after the 1 s
    // lease would find them re-claimed, and they would be delivered again: either way none is lost.
    await("acked", () -> subscriber.acked() == 3);
    assertThat(deliveries.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(itemsOf(spec)).isZero();
  }

  @Test
  void aQueueRowHeldByAnotherTransactionNeverStallsDelivery() throws Exception {
    // A caller's transaction writes the queue row (as a keep-alive inside it would) and holds it for 3.5 s. The
    // subscriber's keep-alive finds the row busy meanwhile; it must neither wait for it nor stop claiming.
    MsgQueueRepository keepingAlive = MsgQueueRepository.create(pool, MsgQueueConfig.builder()
        .keepAliveInterval(Duration.ofMillis(100)).reapIdleThreshold(Duration.ofSeconds(10)).build());
    QueueSpec spec = QueueSpec.autoDeleted("held-queue-row");
    Map<Long, Long> publishedAt = new ConcurrentHashMap<>();
    Map<Long, Long> handledAt = new ConcurrentHashMap<>();
    started(Subscriber.builder(keepingAlive, spec, message -> handledAt.put(message.id(), System.nanoTime())).mode(ConsumeMode.AT_MOST_ONCE)
        .pollInterval(Duration.ofMillis(100)));

    try (Connection holder = db.connect()) {
      holder.setAutoCommit(false);
      try (PreparedStatement update = holder.prepareStatement(
          "UPDATE \"MessageQueue\" SET \"lastActive\" = timezone('UTC', now()) WHERE name = ?")) {
        update.setString(1, spec.name());
        assertThat(update.executeUpdate()).isOne();
      }
      long holdUntil = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(3_500);
      while (System.nanoTime() < holdUntil) {
        long started = System.nanoTime();
        long id = repository.publish(spec, "1");
        publishedAt.put(id, started);
        Thread.sleep(100);
      }
      holder.commit();
    }
    await("all delivered", () -> handledAt.keySet().containsAll(publishedAt.keySet()));
    // Polling every 100 ms delivers within a few hundred ms; a keep-alive waiting on the held row would stall
    // delivery for up to 3.5 s.
    long worstMillis = publishedAt.entrySet().stream()
        .mapToLong(entry -> (handledAt.get(entry.getKey()) - entry.getValue()) / 1_000_000).max().orElseThrow();
    assertThat(worstMillis).isLessThan(1_500);
  }

  /** A data source whose statements fail like a broken connection (SQLSTATE 08006) while asked to: DELETEs only. */
  private static final class FailingDataSource implements DataSource {
    final AtomicBoolean failDeletes = new AtomicBoolean();
    final AtomicInteger failures = new AtomicInteger();
    private final DataSource delegate;

    FailingDataSource(DataSource delegate) {
      this.delegate = delegate;
    }

    @Override
    public Connection getConnection() throws SQLException {
      Connection connection = delegate.getConnection();
      return (Connection) Proxy.newProxyInstance(Connection.class.getClassLoader(), new Class<?>[] {Connection.class},
          (proxy, method, args) -> {
            if (method.getName().equals("prepareStatement") && failDeletes.get()
                && ((String) args[0]).toLowerCase(java.util.Locale.ROOT).startsWith("delete")) {
              failures.incrementAndGet();
              throw new SQLException("connection broken (test)", "08006");
            }
            try {
              return method.invoke(connection, args);
            } catch (java.lang.reflect.InvocationTargetException e) {
              throw e.getCause();
            }
          });
    }

    @Override
    public Connection getConnection(String username, String password) throws SQLException {
      throw new SQLException("not supported");
    }

    @Override
    public PrintWriter getLogWriter() {
      return null;
    }

    @Override
    public void setLogWriter(PrintWriter out) { }

    @Override
    public void setLoginTimeout(int seconds) { }

    @Override
    public int getLoginTimeout() {
      return 0;
    }

    @Override
    public Logger getParentLogger() {
      return Logger.getGlobal();
    }

    @Override
    public <T> T unwrap(Class<T> iface) throws SQLException {
      throw new SQLException("not a wrapper");
    }

    @Override
    public boolean isWrapperFor(Class<?> iface) {
      return false;
    }
  }
}
