package dev.msgqueue.maintenance;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.HousekeepingRun;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.internal.sql.MaintenanceStatements;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The reaper and the expired-message cleanup, through the repository, work in bounded batches. */
class ReaperAndCleanupIT extends RepositoryFixture {
  ReaperAndCleanupIT(TestDatabase db) {
    super(db, MsgQueueConfig.builder().reapBatchSize(10).cleanupBatchSize(10).build());
  }

  @Test
  void reapsIdleEmptyQueuesInBatchesAndKeepsTheOthers() {
    List<String> idle = IntStream.range(0, 25).mapToObj(i -> "batch-idle-" + i).toList();
    idle.forEach(name -> repository.bindQueue(QueueSpec.autoDeleted(name)));
    idle.forEach(name -> rows.makeIdle(name, Duration.ofHours(2)));
    repository.bindQueue(QueueSpec.autoDeleted("batch-fresh"));
    QueueSpec holding = QueueSpec.autoDeleted("batch-holding");
    repository.bindQueue(holding);
    repository.publish(holding, "{}");
    rows.makeIdle("batch-holding", Duration.ofHours(2));

    try (Session tx = Session.open(db)) {
      assertThat(MaintenanceStatements.lockIdleQueues(tx.dsl(), Duration.ofHours(1), 10))
          .as("one batch locks at most reapBatchSize queues").hasSize(10);
    }
    assertThat(repository.reapIdleQueues()).containsExactlyInAnyOrderElementsOf(idle);
    assertThat(rows.exists("batch-fresh")).isTrue();
    assertThat(rows.exists("batch-holding")).as("holds an unexpired item").isTrue();
  }

  /**
   * A durable queue is never reaped, even when its row says auto-deleted too (a row another service wrote; QueueSpec
   * refuses that pair): the housekeeper's tick and the repository's reaper both leave it, idle and empty as it is.
   */
  @Test
  void aDurableQueueIsNeverReapedEvenWhenItsRowSaysAutoDeleted() {
    rows.insertQueue("durable-and-auto-deleted", true, true);
    rows.makeIdle("durable-and-auto-deleted", Duration.ofHours(2));
    repository.bindQueue(QueueSpec.autoDeleted("not-durable"));
    rows.makeIdle("not-durable", Duration.ofHours(2));

    HousekeepingRun run = Housekeeper.builder(repository).build().runOnce();

    assertThat(run.outcome()).isEqualTo(HousekeepingRun.Outcome.COMPLETED);
    assertThat(run.reapedQueues()).as("only the non-durable idle queue").isEqualTo(1);
    assertThat(repository.reapIdleQueues()).isEmpty();
    assertThat(rows.exists("durable-and-auto-deleted")).isTrue();
    assertThat(rows.exists("not-durable")).isFalse();
  }

  @Test
  void aQueueHoldingOnlyExpiredMessagesIsReapedTogetherWithThemLeavingNoOrphan() {
    QueueSpec spec = QueueSpec.autoDeleted("only-expired");
    repository.bindQueue(spec);
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3"));
    rows.expireItems("only-expired");
    rows.makeIdle("only-expired", Duration.ofHours(2));

    assertThat(repository.reapIdleQueues()).contains("only-expired");
    assertThat(ids).allSatisfy(id -> assertThat(rows.item(id)).isNull());
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.isNull())).isZero();
  }

  @Test
  void deletesExpiredMessagesInBatchesIncludingOrphansAndKeepsUnexpiredOnes() {
    QueueSpec spec = QueueSpec.durable("cleanup");
    repository.bindQueue(spec);
    repository.cleanUpExpiredMessages();
    List<String> payloads = new ArrayList<>();
    IntStream.range(0, 35).forEach(i -> payloads.add("{\"i\": " + i + "}"));
    repository.publishBatch(spec, payloads);
    rows.expireItems("cleanup");
    List<Long> live = repository.publishBatch(spec, List.of("\"live-1\"", "\"live-2\""));
    // Orphans of a queue deleted by hand, expired: the cleanup takes them too.
    QueueSpec gone = QueueSpec.durable("cleanup-gone");
    repository.bindQueue(gone);
    repository.publishBatch(gone, List.of("1", "2", "3", "4", "5"));
    rows.expireItems("cleanup-gone");
    db.dsl().deleteFrom(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE)
        .where(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE.NAME.eq("cleanup-gone")).execute();

    assertThat(repository.cleanUpExpiredMessages()).isEqualTo(40);

    assertThat(rows.itemsOf("cleanup")).isEqualTo(2);
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.isNull())).isZero();
    assertThat(live).allSatisfy(id -> assertThat(rows.item(id)).isNotNull());
  }
}
