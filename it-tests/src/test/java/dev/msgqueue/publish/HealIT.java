package dev.msgqueue.publish;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueNotFoundException;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.tables.records.MessageQueueRecord;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Semantics 4 and 5: a reaped auto-deleted queue heals on publish; any other missing queue is a typed error. */
class HealIT extends RepositoryFixture {
  HealIT(TestDatabase db) {
    super(db);
  }

  private void bindAndReap(QueueSpec spec) {
    repository.bindQueue(spec);
    reap(spec.name());
    assertThat(rows.exists(spec.name())).isFalse();
  }

  @Test
  void aReapedQueueHealsOnPublishWithTheBindAttributesAndAFreshLastActive() {
    QueueSpec spec = QueueSpec.exclusive("reaped-exclusive", UUID.randomUUID());
    bindAndReap(spec);

    long id = repository.publish(spec, "{\"after\": \"reap\"}");

    MessageQueueRecord queue = rows.queue("reaped-exclusive");
    assertThat(queue).isNotNull();
    assertThat(queue.getAutoDeleted()).isTrue();
    assertThat(queue.getExclusive()).isTrue();
    assertThat(queue.getDurable()).isFalse();
    assertThat(queue.getExclusiveConsumerId()).isEqualTo(spec.exclusiveConsumerId());
    assertThat(queue.getLastActive()).isCloseTo(rows.serverUtcNow(), within(5, ChronoUnit.SECONDS));
    assertThat(rows.item(id).getQueueId()).isEqualTo("reaped-exclusive");
  }

  @Test
  void aBatchHealsTooAndKeepsItsOrder() {
    QueueSpec spec = QueueSpec.autoDeleted("reaped-batch");
    bindAndReap(spec);

    List<Long> ids = repository.publishBatch(spec, List.of("\"a\"", "\"b\"", "\"c\""));

    assertThat(ids).hasSize(3).isSorted();
    assertThat(ids).extracting(id -> rows.item(id).getPayload().data()).containsExactly("\"a\"", "\"b\"", "\"c\"");
    assertThat(rows.itemsOf("reaped-batch")).isEqualTo(3);
  }

  @Test
  void manyThreadsHealingTheSameQueueAllSucceed() throws Exception {
    QueueSpec spec = QueueSpec.autoDeleted("reaped-contended");
    bindAndReap(spec);
    int threads = 16;
    CyclicBarrier start = new CyclicBarrier(threads);
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      List<Future<Long>> publishes = new ArrayList<>();
      for (int i = 0; i < threads; i++) {
        // Separate repositories: no in-process state can serialize them; only the database does.
        MsgQueueRepository replica = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
        publishes.add(pool.submit(() -> {
          start.await();
          return replica.publish(spec, "{}");
        }));
      }
      for (Future<Long> publish : publishes) {
        assertThat(rows.item(publish.get(30, TimeUnit.SECONDS)).getQueueId()).isEqualTo("reaped-contended");
      }
    } finally {
      pool.shutdownNow();
    }
    assertThat(rows.itemsOf("reaped-contended")).isEqualTo(threads);
  }

  @Test
  void aMissingQueueThatIsNotAutoDeletedIsATypedErrorAndStoresNothing() {
    QueueSpec spec = QueueSpec.durable("never-bound");

    assertThatThrownBy(() -> repository.publish(spec, "{}"))
        .isInstanceOf(QueueNotFoundException.class)
        .hasMessageContaining("never-bound")
        .hasMessageContaining("23503")
        .satisfies(e -> assertThat(((QueueNotFoundException) e).queueName()).isEqualTo("never-bound"));
    assertThat(rows.exists("never-bound")).isFalse();
    assertThat(rows.itemsOf("never-bound")).isZero();
  }

  @Test
  void aDurableQueueDeletedByHandIsNotHealed() {
    QueueSpec spec = QueueSpec.durable("deleted-by-hand");
    repository.bindQueue(spec);
    repository.publish(spec, "{}");
    db.dsl().deleteFrom(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE)
        .where(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE.NAME.eq("deleted-by-hand")).execute();

    assertThatThrownBy(() -> repository.publish(spec, "{}")).isInstanceOf(QueueNotFoundException.class);
    assertThat(rows.exists("deleted-by-hand")).isFalse();
  }

  @Test
  void bindRefreshesLastActiveAndUpdatesAttributes() {
    repository.bindQueue(QueueSpec.autoDeleted("rebound"));
    rows.makeIdle("rebound", Duration.ofMinutes(30));

    repository.bindQueue(new QueueSpec("rebound", true, false, false, null));

    MessageQueueRecord queue = rows.queue("rebound");
    assertThat(queue.getLastActive()).isCloseTo(rows.serverUtcNow(), within(5, ChronoUnit.SECONDS));
    assertThat(queue.getDurable()).isTrue();
    assertThat(queue.getAutoDeleted()).isFalse();
  }

  @Test
  void touchRefreshesAnExistingQueueAndReportsAMissingOne() {
    repository.bindQueue(QueueSpec.autoDeleted("touched"));
    rows.makeIdle("touched", Duration.ofMinutes(30));

    assertThat(repository.keepAlive("touched")).isTrue();
    assertThat(repository.keepAlive("not-there")).isFalse();
    assertThat(rows.queue("touched").getLastActive()).isCloseTo(rows.serverUtcNow(), within(5, ChronoUnit.SECONDS));
  }
}
