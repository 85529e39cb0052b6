package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.internal.maintenance.ExpiredMessageCleanup;
import dev.msgqueue.internal.sql.MaintenanceStatements;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

// Kept in dev.msgqueue: reads the repository's package-private context.
/** The expired-message cleanup: bounded batches, unexpired messages kept, rows consumers hold skipped unwaited. */
class ExpiredMessageCleanupIT extends RepositoryFixture {
  ExpiredMessageCleanupIT(TestDatabase db) {
    super(db, MsgQueueConfig.builder()
        .cleanupBatchSize(10).lockTimeout(Duration.ofMillis(500)).build());
  }

  @Test
  void deletesInBatchesOfTheConfiguredSizeAndKeepsUnexpiredMessages() {
    QueueSpec spec = QueueSpec.durable("batches");
    repository.bindQueue(spec);
    repository.publishBatch(spec, IntStream.range(0, 25).mapToObj(Integer::toString).toList());
    rows.expireItems("batches");
    List<Long> live = repository.publishBatch(spec, List.of("\"live\""));

    assertThat(MaintenanceStatements.cleanUpExpiredMessages(db.dsl(), 10)).isEqualTo(10);
    assertThat(new ExpiredMessageCleanup(repository.context().statements(), config).deleteExpired()).isEqualTo(15);

    assertThat(rows.itemsOf("batches")).isEqualTo(1);
    assertThat(rows.item(live.get(0))).isNotNull();
  }

  @Test
  void skipsAnExpiredMessageAConsumerHoldsWithoutWaitingAndDeletesItLater() {
    QueueSpec spec = QueueSpec.durable("held");
    repository.bindQueue(spec);
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2"));
    rows.expireItems("held");

    try (Session consumer = Session.open(db)) {
      consumer.dsl().selectFrom(MESSAGE_QUEUE_ITEM).where(MESSAGE_QUEUE_ITEM.ID.eq(ids.get(0))).forUpdate().fetch();
      assertThat(new ExpiredMessageCleanup(repository.context().statements(), config).deleteExpired()).isEqualTo(1);
      assertThat(rows.item(ids.get(0))).isNotNull();
      consumer.rollback();
    }
    assertThat(new ExpiredMessageCleanup(repository.context().statements(), config).deleteExpired()).isEqualTo(1);
    assertThat(rows.itemsOf("held")).isZero();
  }
}
