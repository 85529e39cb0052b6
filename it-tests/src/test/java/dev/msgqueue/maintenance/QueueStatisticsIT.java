package dev.msgqueue.maintenance;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.val;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.PublishOptions;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.QueueStatistics;
import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.List;
import org.jooq.Field;
import org.jooq.JSONB;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Queue statistics count hand-made rows of each state exactly. */
@ExtendWith(MsgQueueDatabaseExtension.class)
class QueueStatisticsIT {
  private final TestDatabase db;
  private final MsgQueueRepository repository;

  QueueStatisticsIT(TestDatabase db) {
    this.db = db;
    this.repository = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
  }

  private void rows(String queue, int count, Field<LocalDateTime> readAfter, Field<LocalDateTime> expiresAt,
      MessageQueueItemStatus status) {
    for (int i = 0; i < count; i++) {
      db.dsl().insertInto(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.PAYLOAD, MESSAGE_QUEUE_ITEM.READ_AFTER,
              MESSAGE_QUEUE_ITEM.EXPIRES_AT, MESSAGE_QUEUE_ITEM.QUEUE_ID, MESSAGE_QUEUE_ITEM.STATUS)
          .values(val(JSONB.valueOf("{}")), readAfter, expiresAt, val(queue),
              val(status))
          .execute();
    }
  }

  private static Field<LocalDateTime> ago(Duration duration) {
    return ServerTime.utcNowMinus(duration);
  }

  private static Field<LocalDateTime> in(Duration duration) {
    return ServerTime.utcNowPlus(duration);
  }

  @Test
  void countsEachKindOfHandMadeRowAndTheOldestReadyAge() {
    repository.bindQueue(QueueSpec.durable("stats"));
    repository.bindQueue(QueueSpec.durable("stats-other"));
    repository.bindQueue(QueueSpec.durable("stats-empty"));
    Duration hour = Duration.ofHours(1);
    rows("stats", 3, ago(Duration.ofSeconds(1)), in(hour), MessageQueueItemStatus.PENDING);
    rows("stats", 1, ago(Duration.ofSeconds(100)), in(hour), MessageQueueItemStatus.PENDING); // the oldest ready
    rows("stats", 2, ago(Duration.ofSeconds(5)), in(hour), MessageQueueItemStatus.ASSIGNED); // lease ran out: ready
    rows("stats", 4, in(Duration.ofMinutes(10)), in(hour), MessageQueueItemStatus.PENDING); // delayed
    rows("stats", 5, in(Duration.ofSeconds(30)), in(hour), MessageQueueItemStatus.ASSIGNED); // leased
    rows("stats", 6, ago(Duration.ofMinutes(2)), ago(Duration.ofSeconds(1)), MessageQueueItemStatus.PENDING);
    rows("stats", 7, in(Duration.ofSeconds(30)), ago(Duration.ofSeconds(1)), MessageQueueItemStatus.ASSIGNED);
    rows("stats-other", 1, ago(Duration.ofSeconds(1)), in(hour), MessageQueueItemStatus.PENDING);
    rows(null, 2, ago(Duration.ofSeconds(1)), in(hour), MessageQueueItemStatus.PENDING); // orphans: no queue

    QueueStatistics stats = repository.queueStatistics("stats").orElseThrow();

    assertThat(stats.queue()).isEqualTo("stats");
    assertThat(stats.ready()).isEqualTo(6);
    assertThat(stats.delayed()).isEqualTo(4);
    assertThat(stats.inFlight()).isEqualTo(5);
    assertThat(stats.expired()).isEqualTo(13);
    assertThat(stats.total()).isEqualTo(28);
    assertThat(stats.oldestReadyAge()).isBetween(Duration.ofSeconds(100), Duration.ofSeconds(130));

    List<QueueStatistics> all = repository.queueStatistics();
    assertThat(all).extracting(QueueStatistics::queue).containsExactly("stats", "stats-empty", "stats-other");
    assertThat(all.get(0)).usingRecursiveComparison().ignoringFields("oldestReadyAge").isEqualTo(stats);
    assertThat(all.get(1)).isEqualTo(new QueueStatistics("stats-empty", 0, 0, 0, 0, Duration.ZERO));
    assertThat(all.get(2).ready()).isEqualTo(1);
    assertThat(all.get(2).total()).isEqualTo(1);
  }

  @Test
  void followsAMessageFromPublishThroughClaimToAck() {
    QueueSpec spec = QueueSpec.durable("stats-flow");
    repository.bindQueue(spec);
    repository.publishBatch(spec, List.of("1", "2", "3"));
    repository.publish(spec, "4", PublishOptions.defaults().withDelay(Duration.ofMinutes(1)));
    assertThat(repository.queueStatistics("stats-flow").orElseThrow())
        .extracting(QueueStatistics::ready, QueueStatistics::delayed, QueueStatistics::inFlight)
        .containsExactly(3L, 1L, 0L);

    List<ClaimedMessage> claimed = repository.claim("stats-flow", 2, Duration.ofMinutes(1));
    assertThat(repository.queueStatistics("stats-flow").orElseThrow())
        .extracting(QueueStatistics::ready, QueueStatistics::delayed, QueueStatistics::inFlight)
        .containsExactly(1L, 1L, 2L);

    repository.ack(claimed);
    assertThat(repository.queueStatistics("stats-flow").orElseThrow().total()).isEqualTo(2);
  }

  @Test
  void anUnknownQueueHasNoStatisticsAndABadNameIsRefusedBeforeAnySql() {
    assertThat(repository.queueStatistics("no-such-queue")).isEmpty();
    assertThatThrownBy(() -> repository.queueStatistics(" padded ")).isInstanceOf(IllegalArgumentException.class);
  }
}
