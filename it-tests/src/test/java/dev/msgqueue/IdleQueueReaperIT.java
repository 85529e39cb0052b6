package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.internal.maintenance.IdleQueueReaper;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

// Kept in dev.msgqueue: reads the repository's package-private context.
/**
 * The reaper never waits on the message rows consumers hold, and one queue it cannot reap does not hold back the
 * others. Its lock timeout is 500 ms, so a lock wait fails the test rather than passing slowly.
 */
class IdleQueueReaperIT extends RepositoryFixture {
  private static final Duration IDLE = Duration.ofHours(2);

  IdleQueueReaperIT(TestDatabase db) {
    super(db, MsgQueueConfig.builder()
        .lockTimeout(Duration.ofMillis(500)).reapBatchSize(10).build());
  }

  private IdleQueueReaper reaper() {
    return new IdleQueueReaper(repository.context().statements(), config);
  }

  @Test
  void aConsumerHoldingAnExpiredMessageOfOneQueueHoldsBackOnlyThatQueueAndNothingWaits() throws Exception {
    QueueSpec a = QueueSpec.autoDeleted("held-a");
    QueueSpec b = QueueSpec.autoDeleted("idle-b");
    repository.bindQueue(a);
    repository.bindQueue(b);
    long id = repository.publish(a, "{}", PublishOptions.defaults().withTtl(Duration.ofSeconds(3)));
    rows.makeIdle("held-a", IDLE);
    rows.makeIdle("idle-b", IDLE);

    try (Session consumer = Session.open(db)) {
      // A consumer in the middle of handling A's message, its claim not yet committed.
      List<ClaimedMessage> claimed = repository.inTransaction(consumer.dsl()).claim("held-a", 10, Duration.ofSeconds(30));
      assertThat(claimed).extracting(ClaimedMessage::id).containsExactly(id);
      awaitExpired(id);

      assertThat(reaper().reap()).as("B is reaped, A skipped, without waiting")
          .contains("idle-b").doesNotContain("held-a");
      assertThat(rows.exists("held-a")).isTrue();
      assertThat(rows.item(id).getQueueId()).isEqualTo("held-a");

      // Nothing of A is held by the reaper afterwards: a publish to A goes through at once.
      try (Session publisher = Session.open(db).lockTimeout(Duration.ofMillis(500))) {
        assertThat(repository.inTransaction(publisher.dsl()).publish(a, "{}")).isPositive();
        publisher.rollback();
      }
      assertThat(repository.inTransaction(consumer.dsl()).ack(claimed.get(0))).isTrue();
      consumer.commit();
    }

    assertThat(reaper().reap()).as("once the consumer is done").contains("held-a");
    assertThat(rows.unexpiredOrphans()).isZero();
  }

  @Test
  void expiredMessagesOfAReapedQueueAreDeletedWithItNotOrphaned() {
    QueueSpec spec = QueueSpec.autoDeleted("expired-only");
    repository.bindQueue(spec);
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3"));
    rows.expireItems("expired-only");
    rows.makeIdle("expired-only", IDLE);

    assertThat(reaper().reap()).contains("expired-only");

    assertThat(ids).allSatisfy(id -> assertThat(rows.item(id)).as("message %d", id).isNull());
  }

  @Test
  void aQueueThatFailsToBeReapedDoesNotStopTheOthers() throws SQLException {
    List<String> idle = IntStream.range(0, 5).mapToObj(i -> "healthy-" + i).toList();
    idle.forEach(name -> repository.bindQueue(QueueSpec.autoDeleted(name)));
    repository.bindQueue(QueueSpec.autoDeleted("poisoned"));
    idle.forEach(name -> rows.makeIdle(name, IDLE));
    rows.makeIdle("poisoned", Duration.ofHours(3)); // the oldest: first in its batch
    refuseToDelete("poisoned");
    try {
      List<String> reaped = reaper().reap();

      assertThat(reaped).containsAll(idle).doesNotContain("poisoned");
      assertThat(rows.exists("poisoned")).isTrue();
    } finally {
      allowDeletes();
    }
  }

  @Test
  void aQueueHeldBackInOneBatchDoesNotStopTheNextBatches() throws Exception {
    List<String> idle = IntStream.range(0, 25).mapToObj(i -> "many-" + i).toList();
    idle.forEach(name -> repository.bindQueue(QueueSpec.autoDeleted(name)));
    idle.forEach(name -> rows.makeIdle(name, IDLE));
    QueueSpec held = QueueSpec.autoDeleted("held-first");
    repository.bindQueue(held);
    long id = repository.publish(held, "{}", PublishOptions.defaults().withTtl(Duration.ofSeconds(3)));
    rows.makeIdle("held-first", Duration.ofHours(3));

    try (Session consumer = Session.open(db)) {
      repository.inTransaction(consumer.dsl()).claim("held-first", 1, Duration.ofSeconds(30));
      awaitExpired(id);
      assertThat(reaper().reap()).containsAll(idle).doesNotContain("held-first");
    }
  }

  /** Makes deleting one queue row fail, as any per-queue failure would (until {@link #allowDeletes()}). */
  private void refuseToDelete(String queue) throws SQLException {
    // A trigger: jOOQ's open-source edition renders no CREATE FUNCTION / CREATE TRIGGER, so plain SQL.
    try (Connection connection = db.connect(); Statement statement = connection.createStatement()) {
      statement.execute("CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$"
          + " BEGIN RAISE EXCEPTION 'this queue cannot be deleted: %', OLD.name; END $$");
      statement.execute("CREATE TRIGGER refuse_delete BEFORE DELETE ON \"MessageQueue\" FOR EACH ROW"
          + " WHEN (OLD.name = '" + queue + "') EXECUTE FUNCTION refuse_delete()");
    }
  }

  private void allowDeletes() throws SQLException {
    try (Connection connection = db.connect(); Statement statement = connection.createStatement()) {
      statement.execute("DROP TRIGGER refuse_delete ON \"MessageQueue\"");
      statement.execute("DROP FUNCTION refuse_delete()");
    }
  }

  private void awaitExpired(long id) throws InterruptedException {
    for (int i = 0; i < 500; i++) {
      if (rows.item(id).getExpiresAt().isBefore(rows.serverUtcNow())) {
        return;
      }
      Thread.sleep(20);
    }
    throw new AssertionError("message " + id + " never expired");
  }
}
