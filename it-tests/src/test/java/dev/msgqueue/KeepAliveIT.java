package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

// Kept in dev.msgqueue: reads the repository's package-private context (its keep-alive tracker).
/**
 * Semantics 2 and 3: publishes keep an auto-deleted queue alive with at most one queue-row write per keep-alive
 * interval, across threads and repository instances; a queue that is only published to is never reaped.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class KeepAliveIT {
  private final TestDatabase db;
  private final DSLContext dsl;
  private final QueueRows rows;

  KeepAliveIT(TestDatabase db) {
    this.db = db;
    this.dsl = db.dsl();
    this.rows = new QueueRows(dsl);
  }

  /**
   * Records every write of a queue row with the "lastActive" it wrote. Test-only DDL; jOOQ has no typed CREATE
   * TRIGGER with a PL/pgSQL body, hence plain SQL.
   */
  @BeforeEach
  void recordQueueRowWrites() {
    dsl.execute("""
        CREATE TABLE IF NOT EXISTS queue_row_writes (name text, last_active timestamp(3));
        CREATE OR REPLACE FUNCTION record_queue_row_write() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN INSERT INTO queue_row_writes VALUES (NEW."name", NEW."lastActive"); RETURN NEW; END $$;
        CREATE OR REPLACE TRIGGER record_queue_row_write AFTER UPDATE ON "MessageQueue"
          FOR EACH ROW EXECUTE FUNCTION record_queue_row_write();
        """);
  }

  private List<LocalDateTime> writesOf(String queue) {
    return dsl.select(field(name("last_active"), LocalDateTime.class))
        .from(table(name("queue_row_writes")))
        .where(field(name("name")).eq(queue))
        .orderBy(field(name("last_active")))
        .fetch(record -> record.value1());
  }

  @Test
  void manyPublishersOnSeveralReplicasWriteTheQueueRowAtMostOncePerInterval() throws Exception {
    QueueSpec spec = QueueSpec.autoDeleted("replicated");
    Duration keepAlive = Duration.ofMillis(400);
    MsgQueueConfig config = MsgQueueConfig.builder()
        .keepAliveInterval(keepAlive).reapIdleThreshold(keepAlive.multipliedBy(4)).build();
    List<MsgQueueRepository> replicas = List.of(
        MsgQueueRepository.create(db.dataSource(), config),
        MsgQueueRepository.create(db.dataSource(), config),
        MsgQueueRepository.create(db.dataSource(), config));
    replicas.get(0).bindQueue(spec);
    Duration runFor = Duration.ofSeconds(3);
    AtomicInteger published = new AtomicInteger();

    ExecutorService publishers = Executors.newFixedThreadPool(12);
    try {
      Instant end = Instant.now().plus(runFor);
      List<Future<?>> running = new ArrayList<>();
      for (int thread = 0; thread < 12; thread++) {
        MsgQueueRepository replica = replicas.get(thread % replicas.size());
        running.add(publishers.submit(() -> {
          while (Instant.now().isBefore(end)) {
            replica.publish(spec, "{}");
            published.incrementAndGet();
          }
          return null;
        }));
      }
      for (Future<?> publisher : running) {
        publisher.get(30, TimeUnit.SECONDS);
      }
    } finally {
      publishers.shutdownNow();
    }

    List<LocalDateTime> writes = writesOf("replicated");
    long maxIntervals = runFor.toMillis() / keepAlive.toMillis() + 1;
    assertThat(published.get()).isGreaterThan(12);
    assertThat(writes).as("queue-row writes over %s publishes", published.get())
        .hasSizeGreaterThanOrEqualTo(2)
        .hasSizeLessThanOrEqualTo((int) maxIntervals);
    for (int i = 1; i < writes.size(); i++) {
      assertThat(Duration.between(writes.get(i - 1), writes.get(i)))
          .as("gap between queue-row writes %d and %d", i - 1, i)
          .isGreaterThanOrEqualTo(keepAlive);
    }
  }

  @Test
  void aQueueThatIsOnlyPublishedToIsNeverReapedAndNoUnexpiredItemIsOrphaned() throws Exception {
    QueueSpec spec = QueueSpec.autoDeleted("publisher-only");
    MsgQueueConfig config = MsgQueueConfig.builder()
        .keepAliveInterval(Duration.ofMillis(250))
        .reapIdleThreshold(Duration.ofSeconds(2))
        .build();
    MsgQueueRepository publisher = MsgQueueRepository.create(db.dataSource(), config);
    MsgQueueRepository reaper = MsgQueueRepository.create(db.dataSource(), config);
    // Created by its first publish (a heal), never bound again: the case an insert-and-heal publisher loses.
    PublishOptions shortLived = PublishOptions.defaults().withTtl(Duration.ofMillis(20));
    long first = publisher.publish(spec, "{}", shortLived);
    assertThat(rows.item(first).getQueueId()).isEqualTo("publisher-only");

    List<String> reapedNames = new ArrayList<>();
    int orphanScans = 0;
    int published = 1;
    Instant end = Instant.now().plusSeconds(5);
    while (Instant.now().isBefore(end)) {
      publisher.publish(spec, "{}", shortLived);
      published++;
      // By the time the reaper looks, the item has expired: only the keep-alive, not unexpired items, holds the queue.
      Thread.sleep(40);
      reapedNames.addAll(reaper.reapIdleQueues());
      reaper.cleanUpExpiredMessages();
      assertThat(rows.unexpiredOrphans()).isZero();
      orphanScans++;
    }

    assertThat(reapedNames).doesNotContain("publisher-only");
    // The loop ran for 2.5 reap thresholds; a few publishes per threshold suffice, even on a loaded machine.
    assertThat(published).as("publishes spread over 2.5 reap thresholds").isGreaterThanOrEqualTo(5);
    assertThat(orphanScans).isEqualTo(published - 1);
    assertThat(writesOf("publisher-only")).as("keep-alive writes over 5 s at 250 ms").hasSizeBetween(5, 21);
  }

  @Test
  void controlAQueueFedByPlainInsertsWithoutKeepAliveIsReaped() throws Exception {
    // An insert-and-heal publish path without keep-alive, under the same reaper: shows the test above can fail.
    MsgQueueConfig config = MsgQueueConfig.builder()
        .keepAliveInterval(Duration.ofMillis(250)).reapIdleThreshold(Duration.ofSeconds(1)).build();
    MsgQueueRepository reaper = MsgQueueRepository.create(db.dataSource(), config);
    reaper.bindQueue(QueueSpec.autoDeleted("insert-only"));

    List<String> reapedNames = new ArrayList<>();
    Instant end = Instant.now().plusSeconds(3);
    while (Instant.now().isBefore(end) && !reapedNames.contains("insert-only")) {
      dsl.insertInto(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM)
          .set(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM.PAYLOAD, org.jooq.JSONB.valueOf("{}"))
          .set(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM.QUEUE_ID, "insert-only")
          .set(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM.EXPIRES_AT, ServerTime.utcNowPlus(Duration.ofMillis(100)))
          .execute();
      Thread.sleep(150);
      reapedNames.addAll(reaper.reapIdleQueues());
    }

    assertThat(reapedNames).contains("insert-only");
  }

  @Test
  void perQueueStateIsBoundedAndForgettingIsHarmless() {
    MsgQueueConfig config = MsgQueueConfig.builder().maxTrackedQueues(16).build();
    MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), config);
    for (int i = 0; i < 100; i++) {
      QueueSpec spec = QueueSpec.autoDeleted("many-" + i);
      repository.publish(spec, "{}");
      assertThat(repository.context().keepAlives().trackedKeys()).isLessThanOrEqualTo(16);
    }
    // A forgotten queue's next publish issues one conditional refresh, which writes nothing while lastActive is fresh.
    String version = rows.rowVersion("many-0");
    repository.publish(QueueSpec.autoDeleted("many-0"), "{}");
    assertThat(rows.rowVersion("many-0")).isEqualTo(version);
    assertThat(dsl.fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.like("many-%"))).isEqualTo(100);
  }
}
