package dev.msgqueue.maintenance;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.FailureOutcome;
import dev.msgqueue.Housekeeper;
import dev.msgqueue.ConsumeMode;
import dev.msgqueue.HousekeepingRun;
import dev.msgqueue.MicrometerMetrics;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.QueueStatisticsSnapshot;
import dev.msgqueue.RetryPolicy;
import dev.msgqueue.Subscriber;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.ExecuteListener;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The meters move by exactly what a scripted run did. */
@ExtendWith(MsgQueueDatabaseExtension.class)
class MicrometerMetricsIT {
  private final TestDatabase db;
  private final QueueRows rows;
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();

  MicrometerMetricsIT(TestDatabase db) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
  }

  private double counter(String name, String queue) {
    Counter counter = queue == null ? registry.find(name).counter() : registry.find(name).tag("queue", queue).counter();
    return counter == null ? 0 : counter.count();
  }

  private long timerCount(String name, String queue) {
    Timer timer = registry.find(name).tag("queue", queue).timer();
    return timer == null ? 0 : timer.count();
  }

  private double gauge(String name, String queue, String state) {
    var search = registry.find(name).tag("queue", queue);
    Gauge gauge = state == null ? search.gauge() : search.tag("state", state).gauge();
    assertThat(gauge).as("gauge %s{queue=%s,state=%s}", name, queue, state).isNotNull();
    return gauge.value();
  }

  @Test
  void countersTimersAndGaugesMoveByExactlyWhatTheScriptDid() throws Exception {
    MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
    MicrometerMetrics metrics = MicrometerMetrics.bind(registry, repository, 2);
    QueueSpec a = QueueSpec.durable("m-a");
    QueueSpec b = QueueSpec.durable("m-b");
    QueueSpec c = QueueSpec.durable("m-c");
    List.of(a, b, c).forEach(repository::bindQueue);

    repository.publish(a, "1");
    repository.inTransaction(db.dsl()).publishBatch(a, List.of("2", "3")); // a view reports too
    repository.publish(b, "4");
    repository.publish(c, "5"); // a third queue: past the bound of 2 tags
    List<ClaimedMessage> claimed = repository.claim("m-a", 2, Duration.ofMinutes(1));
    assertThat(repository.ack(claimed.get(0))).isTrue();
    assertThat(repository.release(claimed.get(1), Duration.ZERO)).isTrue();

    assertThat(counter("msgqueue.messages.published", "m-a")).isEqualTo(3);
    assertThat(timerCount("msgqueue.publish", "m-a")).isEqualTo(2);
    assertThat(counter("msgqueue.messages.published", "m-b")).isEqualTo(1);
    assertThat(counter("msgqueue.messages.published", MicrometerMetrics.OTHER_QUEUES)).isEqualTo(1);
    assertThat(registry.find("msgqueue.messages.published").tag("queue", "m-c").counter()).isNull();
    assertThat(counter("msgqueue.messages.claimed", "m-a")).isEqualTo(2);
    assertThat(timerCount("msgqueue.claim", "m-a")).isEqualTo(1);
    assertThat(counter("msgqueue.messages.acked", "m-a")).isEqualTo(1);
    assertThat(timerCount("msgqueue.ack", "m-a")).isEqualTo(1);
    assertThat(counter("msgqueue.messages.released", "m-a")).isEqualTo(1);

    // Housekeeping: one idle auto-deleted queue reaped, m-b's one message expired and deleted.
    QueueSpec healing = QueueSpec.autoDeleted("m-heal");
    repository.bindQueue(healing);
    rows.makeIdle("m-heal", Duration.ofHours(2));
    rows.expireItems("m-b");
    Housekeeper housekeeper = Housekeeper.builder(repository).build();
    assertThat(housekeeper.runOnce().outcome()).isEqualTo(HousekeepingRun.Outcome.COMPLETED);

    assertThat(counter("msgqueue.queues.reaped", null)).isEqualTo(1);
    assertThat(counter("msgqueue.messages.expired.deleted", null)).isEqualTo(1);
    assertThat(gauge("msgqueue.queue.messages", "m-a", "ready")).isEqualTo(2);
    assertThat(gauge("msgqueue.queue.messages", "m-a", "in.flight")).isZero();
    assertThat(gauge("msgqueue.queue.messages", "m-b", "expired")).isZero();
    assertThat(gauge("msgqueue.queue.messages", MicrometerMetrics.OTHER_QUEUES, "ready")).isEqualTo(1);
    assertThat(gauge("msgqueue.queue.oldest.ready.age", "m-a", null)).isGreaterThanOrEqualTo(0);

    repository.publish(healing, "6");
    assertThat(counter("msgqueue.queues.healed", MicrometerMetrics.OTHER_QUEUES)).isEqualTo(1);

    // A subscriber's handler: one success, one failure.
    try (Subscriber subscriber = Subscriber.builder(repository, b, message -> {
      if (message.payload().contains("fail")) {
        throw new IllegalStateException("scripted failure");
      }
    }).mode(ConsumeMode.AT_MOST_ONCE).pollInterval(Duration.ofMillis(100)).start()) {
      repository.publishBatch(b, List.of("\"ok\"", "\"fail\""));
      long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (timerCount("msgqueue.handler", "m-b") < 2) {
        assertThat(System.nanoTime()).as("both messages handled").isLessThan(giveUp);
        Thread.sleep(20);
      }
    }
    assertThat(timerCount("msgqueue.handler", "m-b")).isEqualTo(2);
    assertThat(counter("msgqueue.handler.failures", "m-b")).isEqualTo(1);
    assertThat(counter("msgqueue.messages.claimed", "m-b")).isEqualTo(2);
    // The at-most-once claim took both messages: the handled one counts as acked, though no ack statement ran.
    assertThat(counter("msgqueue.messages.acked", "m-b")).isEqualTo(1);
    assertThat(timerCount("msgqueue.ack", "m-b")).isZero();
    assertThat(counter("msgqueue.messages.published", "m-b")).isEqualTo(3);

    metrics.close();
    repository.publish(a, "7");
    assertThat(counter("msgqueue.messages.published", "m-a")).as("unbound").isEqualTo(3);
  }

  @Test
  void redeliveriesAndDeadLettersAreCountedOnceEach() throws Exception {
    MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
    MicrometerMetrics.bind(registry, repository);
    QueueSpec queue = QueueSpec.durable("m-retry");
    repository.bindQueue(queue);
    repository.publishBatch(queue, List.of("1", "2"));

    List<ClaimedMessage> first = repository.claim(queue.name(), 2, Duration.ofMillis(50));
    assertThat(first).hasSize(2);
    Thread.sleep(150); // both leases run out: the next claim takes them again
    List<ClaimedMessage> again = repository.claim(queue.name(), 2, Duration.ofMinutes(1));
    assertThat(again).hasSize(2);
    assertThat(counter("msgqueue.messages.redelivered", "m-retry")).isEqualTo(2.0);

    RetryPolicy deadLetterAtOnce = RetryPolicy.builder("m-retry-dead").maxDeliveries(1).build();
    assertThat(repository.fail(again.get(0), new IllegalStateException("boom"), deadLetterAtOnce))
        .isEqualTo(FailureOutcome.DEAD_LETTERED);
    assertThat(repository.fail(again.get(0), new IllegalStateException("stale receipt"), deadLetterAtOnce))
        .isEqualTo(FailureOutcome.NOT_HELD);
    assertThat(counter("msgqueue.messages.dead.lettered", "m-retry")).isEqualTo(1.0);
    assertThat(counter("msgqueue.messages.redelivered", "m-retry")).as("unchanged by the fail").isEqualTo(2.0);

    // Leave no ready message behind for the other tests' statistics (one database per class).
    assertThat(repository.ack(again.get(1))).isTrue();
    assertThat(repository.ack(repository.claim("m-retry-dead", 10))).hasSize(1);
  }

  @Test
  void withoutQueueGaugesATickReadsNoStatisticsAndRegistersNoQueueGauge() {
    AtomicInteger statisticsReads = new AtomicInteger();
    // The gauges' read: the table's row estimate, then (on a small table) the exact statistics of every queue.
    ExecuteListener countStatisticsReads = ExecuteListener.onExecuteStart(ctx -> {
      if (ctx.sql() != null && (ctx.sql().contains("reltuples") || ctx.sql().contains("\"oldestReady\""))) {
        statisticsReads.incrementAndGet();
      }
    });
    MsgQueueRepository repository =
        RepositoryFixture.listenedRepository(db.dataSource(), countStatisticsReads, MsgQueueConfig.defaults());
    QueueSpec spec = QueueSpec.durable("m-no-gauges");
    repository.bindQueue(spec);
    repository.publish(spec, "1");
    Housekeeper housekeeper = Housekeeper.builder(repository).build();

    SimpleMeterRegistry withoutGauges = new SimpleMeterRegistry();
    try (MicrometerMetrics metrics = MicrometerMetrics.bind(withoutGauges, repository, 10, false)) {
      assertThat(housekeeper.runOnce().outcome()).isEqualTo(HousekeepingRun.Outcome.COMPLETED);
      repository.publish(spec, "2");
    }
    assertThat(statisticsReads).hasValue(0);
    assertThat(housekeeper.lastStatistics()).as("a tick without queue gauges reads no statistics").isEmpty();
    assertThat(withoutGauges.find("msgqueue.queue.messages").gauges()).isEmpty();
    assertThat(withoutGauges.find("msgqueue.queue.oldest.ready.age").gauges()).isEmpty();
    assertThat(withoutGauges.find("msgqueue.messages.published").tag("queue", "m-no-gauges").counter().count())
        .isEqualTo(1);

    SimpleMeterRegistry withGauges = new SimpleMeterRegistry();
    try (MicrometerMetrics metrics = MicrometerMetrics.bind(withGauges, repository, 10, true)) {
      assertThat(housekeeper.runOnce().outcome()).isEqualTo(HousekeepingRun.Outcome.COMPLETED);
    }
    assertThat(statisticsReads.get()).isPositive();
    QueueStatisticsSnapshot read = housekeeper.lastStatistics().orElseThrow();
    assertThat(read.sampled()).isFalse();
    assertThat(read.queues()).filteredOn(queue -> queue.queue().equals("m-no-gauges"))
        .singleElement().satisfies(queue -> assertThat(queue.ready()).isEqualTo(2));
    assertThat(withGauges.find("msgqueue.queue.messages").tag("queue", "m-no-gauges").tag("state", "ready").gauge()
        .value()).isEqualTo(2);

    // Leave no ready message behind for the other tests' statistics (one database per class).
    assertThat(repository.ack(repository.claim("m-no-gauges", 10))).hasSize(2);
  }

  @Test
  void aPublishInATransactionCountsOnlyOnceItsCommitHookRunsIt() {
    MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
    QueueSpec spec = QueueSpec.durable("m-commit");
    repository.bindQueue(spec);
    // This test plays the transaction manager: it runs the deferred counts after a commit, drops them after a rollback.
    List<Runnable> afterCommit = new ArrayList<>();
    try (MicrometerMetrics metrics = MicrometerMetrics.bind(registry, repository, 10, false, afterCommit::add)) {
      db.dsl().transaction(tx -> repository.inTransaction(tx.dsl()).publish(spec, "1"));

      assertThat(counter("msgqueue.messages.published", "m-commit")).isZero();
      assertThat(timerCount("msgqueue.publish", "m-commit")).as("the call is timed at once").isEqualTo(1);
      afterCommit.forEach(Runnable::run);
      afterCommit.clear();
      assertThat(counter("msgqueue.messages.published", "m-commit")).isEqualTo(1);

      assertThatThrownBy(() -> db.dsl().transaction(tx -> {
        repository.inTransaction(tx.dsl()).publish(spec, "2");
        throw new IllegalStateException("the caller's transaction fails after its publish");
      })).hasMessageContaining("fails after its publish");
      afterCommit.clear();
      assertThat(counter("msgqueue.messages.published", "m-commit")).isEqualTo(1);
      assertThat(timerCount("msgqueue.publish", "m-commit")).isEqualTo(2);
    }

    try (MicrometerMetrics metrics = MicrometerMetrics.bind(registry, repository, 10, false, action -> {
      throw new IllegalStateException("a hook that cannot defer");
    })) {
      repository.publish(spec, "3");
      assertThat(counter("msgqueue.messages.published", "m-commit")).as("counted at once").isEqualTo(2);
    }
    // Leave no ready message behind for the other tests' statistics (one database per class).
    assertThat(repository.ack(repository.claim("m-commit", 10))).hasSize(2);
  }

  @Test
  void aTagBoundOutOfRangeIsRefused() {
    MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
    assertThatThrownBy(() -> MicrometerMetrics.bind(registry, repository, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MicrometerMetrics.bind(registry, repository, MicrometerMetrics.MAX_QUEUE_TAGS + 1))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
