package dev.msgqueue.publish;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

/**
 * A publish inside a caller's transaction writes nothing to the queue row that the transaction would hold: the heal of
 * a reaped queue and the keep-alive both commit at once on the repository's own connection, so no other publisher,
 * subscriber or keep-alive waits for the caller's commit. Waits are caught by a lock timeout on the other sessions.
 */
class CallerTransactionHoldsNoQueueRowIT extends RepositoryFixture {
  CallerTransactionHoldsNoQueueRowIT(TestDatabase db) {
    super(db);
  }

  private void bindAndReap(QueueSpec spec) {
    repository.bindQueue(spec);
    reap(spec.name());
  }

  @Test
  void anotherReplicaPublishesWithoutWaitingForACallersTransactionThatHealedTheQueue() throws Exception {
    QueueSpec spec = QueueSpec.autoDeleted("healed-in-tx");
    bindAndReap(spec);
    // Another replica, whose sessions fail on any lock wait longer than 500 ms instead of waiting.
    MsgQueueRepository otherReplica = MsgQueueRepository.create(
        db.dataSourceWithOptions("-c lock_timeout=500"), MsgQueueConfig.defaults());

    try (Session caller = Session.open(db)) {
      long inTransaction = repository.inTransaction(caller.dsl()).publish(spec, "{\"in\": \"tx\"}");
      // The caller's transaction stays open across the other replica's publishes.
      long first = otherReplica.publish(spec, "{\"n\": 1}");
      Thread.sleep(1_000);
      long second = otherReplica.publish(spec, "{\"n\": 2}");
      assertThat(rows.item(first).getQueueId()).isEqualTo("healed-in-tx");
      assertThat(rows.item(second).getQueueId()).isEqualTo("healed-in-tx");
      assertThat(rows.item(inTransaction)).as("the caller's message commits with the caller").isNull();
      caller.commit();

      assertThat(rows.item(inTransaction).getQueueId()).isEqualTo("healed-in-tx");
    }
  }

  @Test
  void aRolledBackHealLeavesAnEmptyQueueThatIsReapedLikeAnyIdleOne() {
    QueueSpec spec = QueueSpec.autoDeleted("healed-then-rolled-back");
    bindAndReap(spec);

    try (Session caller = Session.open(db)) {
      long id = repository.inTransaction(caller.dsl()).publish(spec, "{}");
      caller.rollback();
      assertThat(rows.item(id)).isNull();
    }

    assertThat(rows.itemsOf("healed-then-rolled-back")).isZero();
    rows.makeIdle("healed-then-rolled-back", Duration.ofHours(2));
    assertThat(repository.reapIdleQueues()).contains("healed-then-rolled-back");
  }

  @Test
  void theKeepAliveOfAPublishInACallersTransactionIsNotHeldByIt() {
    QueueSpec spec = QueueSpec.autoDeleted("kept-alive-in-tx");
    repository.bindQueue(spec);
    rows.makeIdle("kept-alive-in-tx", Duration.ofMinutes(30));
    // A fresh replica: the keep-alive is due on its first publish.
    MsgQueueRepository replica = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());

    try (Session caller = Session.open(db); Session probe = Session.open(db)) {
      long id = replica.inTransaction(caller.dsl()).publish(spec, "{}");

      // Written and committed already, not by the caller's transaction.
      assertThat(rows.queue("kept-alive-in-tx").getLastActive())
          .isCloseTo(rows.serverUtcNow(), within(5, ChronoUnit.SECONDS));
      // The caller holds only KEY SHARE: a keep-alive's lock is free for the taking, without waiting.
      assertThat(probe.dsl().select(MESSAGE_QUEUE.NAME).from(MESSAGE_QUEUE)
          .where(MESSAGE_QUEUE.NAME.eq("kept-alive-in-tx")).forNoKeyUpdate().noWait().fetch()).hasSize(1);
      probe.commit();
      caller.commit();
      assertThat(rows.item(id).getQueueId()).isEqualTo("kept-alive-in-tx");
    }
  }

  @Test
  void withoutAConnectionOfItsOwnTheRepositoryHealsAndKeepsAliveInsideTheCallersTransaction() {
    QueueSpec spec = QueueSpec.autoDeleted("no-own-connection");
    bindAndReap(spec);

    try (Session caller = Session.open(db)) {
      // As over a data source that hands out the transaction's own connection: no connection outside it.
      MsgQueueRepository onTheCallersConnection = MsgQueueRepository.create(
          DSL.using(caller.dsl().configuration().connectionProvider(), SQLDialect.POSTGRES),
          MsgQueueConfig.defaults());
      long id = onTheCallersConnection.publish(spec, "{}");

      assertThat(rows.exists("no-own-connection")).as("created inside the caller's transaction").isFalse();
      caller.commit();
      assertThat(rows.item(id).getQueueId()).isEqualTo("no-own-connection");
    }
  }
}
