package dev.msgqueue.maintenance;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.generateSeries;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.val;
import static org.jooq.impl.DSL.when;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.QueueStatistics;
import dev.msgqueue.QueueStatisticsSnapshot;
import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.internal.sql.StatisticsStatements;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.jooq.Field;
import org.jooq.JSONB;
import org.jooq.Record1;
import org.jooq.Table;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The statistics a housekeeper tick reads for the gauges: exact on a small table, and from a block sample, scaled, on
 * a large one. The bounds are lowered so that 20,000 messages count as large.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class QueueStatisticsEstimateIT {
  private static final int MESSAGES = 20_000;
  private final TestDatabase db;
  private final MsgQueueRepository repository;

  QueueStatisticsEstimateIT(TestDatabase db) {
    this.db = db;
    this.repository = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
  }

  /**
   * Three in four messages to "big" (ready), one in four to "small" (expired); "empty" holds none. The tests share a
   * database: truncating first also resets the table's row estimate to unknown, as for a table never analyzed.
   */
  private void messages() {
    db.dsl().truncate(MESSAGE_QUEUE_ITEM).execute();
    repository.bindQueue(QueueSpec.durable("big"));
    repository.bindQueue(QueueSpec.durable("small"));
    repository.bindQueue(QueueSpec.durable("empty"));
    Table<Record1<Integer>> series = generateSeries(1, MESSAGES).as("g", "n");
    Field<Integer> n = series.field("n", Integer.class);
    Field<Boolean> toSmall = n.mod(inline(4)).eq(inline(0));
    db.dsl().insertInto(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.PAYLOAD, MESSAGE_QUEUE_ITEM.READ_AFTER,
            MESSAGE_QUEUE_ITEM.EXPIRES_AT, MESSAGE_QUEUE_ITEM.QUEUE_ID)
        .select(select(val(JSONB.valueOf("{}")), ServerTime.utcNowMinus(Duration.ofMinutes(2)),
            when(toSmall, ServerTime.utcNowMinus(Duration.ofMinutes(1)))
                .otherwise(ServerTime.utcNowPlus(Duration.ofHours(1))),
            when(toSmall, inline("small")).otherwise(inline("big")))
            .from(series))
        .execute();
  }

  private void analyze() {
    // jOOQ has no ANALYZE statement; it sets pg_class.reltuples, which picks the exact or the sampled read.
    db.dsl().execute("ANALYZE " + db.dsl().render(MESSAGE_QUEUE_ITEM));
  }

  @Test
  void aTableAtMostTheExactBoundIsCountedExactly() {
    messages();
    analyze();

    List<QueueStatistics> gauges = StatisticsStatements.forGauges(db.dsl(), MESSAGES, 1_000);

    assertThat(gauges).usingRecursiveFieldByFieldElementComparatorIgnoringFields("oldestReadyAge")
        .containsExactlyElementsOf(repository.queueStatistics());
  }

  @Test
  void aTableNeverAnalyzedIsCountedExactly() {
    messages();

    List<QueueStatistics> gauges = StatisticsStatements.forGauges(db.dsl(), 1_000, 1_000);

    assertThat(gauges).usingRecursiveFieldByFieldElementComparatorIgnoringFields("oldestReadyAge")
        .containsExactlyElementsOf(repository.queueStatistics());
  }

  @Test
  void aSampleOfTheWholeTableCountsWhatTheExactReadCounts() {
    messages();
    analyze();

    // More sampled messages than the table holds: a 100% sample, scaled by 1.
    List<QueueStatistics> gauges = StatisticsStatements.forGauges(db.dsl(), 1_000, 10 * MESSAGES);

    assertThat(gauges).usingRecursiveFieldByFieldElementComparatorIgnoringFields("oldestReadyAge")
        .containsExactlyElementsOf(repository.queueStatistics());
    assertThat(gauges).extracting(QueueStatistics::queue).containsExactly("big", "empty", "small");
    assertThat(gauges.get(0).ready()).isEqualTo(MESSAGES * 3 / 4);
    assertThat(gauges.get(2).expired()).isEqualTo(MESSAGES / 4);
  }

  @Test
  void theRepositorysEstimateIsTheExactReadOnATableAtMostFiftyThousandMessages() {
    messages();
    analyze();
    Instant before = Instant.now();

    QueueStatisticsSnapshot snapshot = repository.estimatedQueueStatistics();

    assertThat(snapshot.sampled()).isFalse();
    assertThat(snapshot.readAt()).isBetween(before, Instant.now());
    assertThat(snapshot.queues()).usingRecursiveFieldByFieldElementComparatorIgnoringFields("oldestReadyAge")
        .containsExactlyElementsOf(repository.queueStatistics());
  }

  @Test
  void aSnapshotAboveTheExactBoundSaysItWasSampled() {
    messages();
    analyze();

    QueueStatisticsSnapshot snapshot = StatisticsStatements.snapshot(db.dsl(), 1_000, 10 * MESSAGES);

    assertThat(snapshot.sampled()).isTrue();
    assertThat(snapshot.queues()).extracting(QueueStatistics::queue).containsExactly("big", "empty", "small");
    assertThat(snapshot.queues().get(0).ready()).isEqualTo(MESSAGES * 3 / 4);
  }

  @Test
  void aHalfSampleIsScaledByTwoAndListsEveryQueue() {
    messages();
    analyze();

    List<QueueStatistics> gauges = StatisticsStatements.forGauges(db.dsl(), 1_000, MESSAGES / 2);

    assertThat(gauges).extracting(QueueStatistics::queue).containsExactly("big", "empty", "small");
    QueueStatistics big = gauges.get(0);
    QueueStatistics small = gauges.get(2);
    // Each sampled message stands for two: every estimate is even.
    assertThat(big.ready() % 2).isZero();
    assertThat(small.expired() % 2).isZero();
    // Half of about 170 blocks: the relative standard deviation of an estimate is about 8%; the bounds are six.
    assertThat(big.ready()).isBetween(MESSAGES * 3 / 4 / 2L, MESSAGES * 3 / 4 * 3 / 2L);
    assertThat(small.expired()).isBetween(MESSAGES / 4 / 2L, MESSAGES / 4 * 3 / 2L);
    assertThat(big.expired() + big.delayed() + big.inFlight() + small.ready()).isZero();
    assertThat(gauges.get(1)).isEqualTo(new QueueStatistics("empty", 0, 0, 0, 0, Duration.ZERO));
  }
}
