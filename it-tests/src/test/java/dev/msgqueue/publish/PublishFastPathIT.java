package dev.msgqueue.publish;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.temporal.ChronoUnit;
import java.util.List;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Semantics 1 and 2 of the publish path: the lock it takes, and the parent row it leaves alone. */
@ExtendWith(MsgQueueDatabaseExtension.class)
class PublishFastPathIT {
  private static final String LOCK_NOT_AVAILABLE = "55P03";
  private final TestDatabase db;
  private final QueueRows rows;

  PublishFastPathIT(TestDatabase db) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
  }

  private MsgQueueRepository repository(Duration keepAlive) {
    return MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.builder()
        .keepAliveInterval(keepAlive).reapIdleThreshold(keepAlive.multipliedBy(4)).build());
  }

  @Test
  void aSecondPublisherDoesNotWaitForAnUncommittedPublish() {
    QueueSpec spec = QueueSpec.autoDeleted("hot");
    MsgQueueRepository repository = repository(Duration.ofMinutes(5));
    repository.bindQueue(spec);

    try (Session first = Session.open(db); Session second = Session.open(db).lockTimeout(Duration.ofMillis(200))) {
      long firstId = repository.inTransaction(first.dsl()).publish(spec, "{\"n\": 1}");
      // lock_timeout: had the second publisher waited for any lock the first holds, it would fail with 55P03.
      long secondId = repository.inTransaction(second.dsl()).publish(spec, "{\"n\": 2}");
      second.commit();
      first.commit();

      assertThat(rows.item(firstId).getQueueId()).isEqualTo("hot");
      assertThat(rows.item(secondId).getQueueId()).isEqualTo("hot");
    }
  }

  @Test
  void theOnlyLockAPublishHoldsOnTheQueueRowIsKeyShare() {
    QueueSpec spec = QueueSpec.autoDeleted("locks");
    MsgQueueRepository repository = repository(Duration.ofMinutes(5));
    repository.bindQueue(spec);

    try (Session publisher = Session.open(db); Session probe = Session.open(db)) {
      repository.inTransaction(publisher.dsl()).publish(spec, "{}");

      // FOR NO KEY UPDATE conflicts with every row lock but KEY SHARE: it succeeding means nothing stronger is held.
      assertThat(probe.dsl().selectFrom(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE)
          .where(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE.NAME.eq("locks")).forNoKeyUpdate().noWait().fetch())
          .hasSize(1);
      probe.rollback();
      // FOR UPDATE (what a delete takes) conflicts with KEY SHARE: it failing means KEY SHARE is held.
      assertThatThrownBy(() -> probe.dsl().selectFrom(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE)
          .where(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE.NAME.eq("locks")).forUpdate().noWait().fetch())
          .isInstanceOf(DataAccessException.class)
          .satisfies(e -> assertThat(((DataAccessException) e).sqlState()).isEqualTo(LOCK_NOT_AVAILABLE));
      probe.rollback();
      publisher.commit();
    }
  }

  @Test
  void publishesWithinAKeepAliveIntervalLeaveTheQueueRowUntouched() {
    QueueSpec spec = QueueSpec.autoDeleted("quiet-parent");
    MsgQueueRepository repository = repository(Duration.ofMinutes(1));
    repository.bindQueue(spec);
    String boundVersion = rows.rowVersion("quiet-parent");

    for (int i = 0; i < 50; i++) {
      repository.publish(spec, "{\"i\": " + i + "}");
    }
    repository.publishBatch(spec, List.of("1", "2", "3"));

    assertThat(rows.rowVersion("quiet-parent")).as("50 publishes and a batch within one interval")
        .isEqualTo(boundVersion);
  }

  @Test
  void aPublishOnceTheIntervalHasPassedRefreshesTheRowOnceThenLeavesItAlone() {
    QueueSpec spec = QueueSpec.autoDeleted("stale-parent");
    MsgQueueRepository binder = repository(Duration.ofMinutes(1));
    binder.bindQueue(spec);
    rows.makeIdle("stale-parent", Duration.ofMinutes(3));
    String staleVersion = rows.rowVersion("stale-parent");
    LocalDateTime staleLastActive = rows.queue("stale-parent").getLastActive();
    // A repository that has not refreshed this queue yet is due at once (as after an interval has passed).
    MsgQueueRepository publisher = repository(Duration.ofMinutes(1));

    publisher.publish(spec, "{}");

    String refreshedVersion = rows.rowVersion("stale-parent");
    assertThat(refreshedVersion).isNotEqualTo(staleVersion);
    assertThat(rows.queue("stale-parent").getLastActive())
        .isAfter(staleLastActive.plusMinutes(2))
        .isCloseTo(rows.serverUtcNow(), within(5, ChronoUnit.SECONDS));
    for (int i = 0; i < 50; i++) {
      publisher.publish(spec, "{}");
      binder.publish(spec, "{}");
    }
    assertThat(rows.rowVersion("stale-parent")).isEqualTo(refreshedVersion);
  }

  @Test
  void timestampsAreUtcWhateverTheSessionTimeZone() {
    QueueSpec spec = QueueSpec.durable("zoned");
    MsgQueueRepository repository = repository(Duration.ofMinutes(5));
    repository.bindQueue(spec);

    try (Session tokyo = Session.open(db)) {
      tokyo.dsl().select(org.jooq.impl.DSL.function("set_config", String.class, org.jooq.impl.DSL.inline("TimeZone"),
          org.jooq.impl.DSL.inline("Asia/Tokyo"), org.jooq.impl.DSL.inline(false))).fetch();
      long id = repository.inTransaction(tokyo.dsl()).publish(spec, "{}");
      tokyo.commit();

      assertThat(rows.item(id).getReadAfter()).isCloseTo(rows.serverUtcNow(), within(30, ChronoUnit.SECONDS));
    }
  }
}
