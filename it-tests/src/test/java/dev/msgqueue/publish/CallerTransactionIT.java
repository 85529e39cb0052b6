package dev.msgqueue.publish;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.QueueNotFoundException;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.TransactionalQueue;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * Semantic 6: publishing inside the caller's transaction commits and rolls back with it, and neither the heal path
 * nor a missing queue aborts that transaction (PostgreSQL aborts a transaction on any error, 23503 included).
 */
class CallerTransactionIT extends RepositoryFixture {
  CallerTransactionIT(TestDatabase db) {
    super(db);
  }

  @Test
  void commitsWithTheCallersJooqTransaction() {
    QueueSpec spec = QueueSpec.autoDeleted("tx-commit");
    repository.bindQueue(spec);
    AtomicLong id = new AtomicLong();

    db.dsl().transaction(tx -> id.set(repository.inTransaction(tx.dsl()).publish(spec, "{}")));

    assertThat(rows.item(id.get()).getQueueId()).isEqualTo("tx-commit");
  }

  @Test
  void rollsBackWithTheCallersJooqTransaction() {
    QueueSpec spec = QueueSpec.autoDeleted("tx-rollback");
    repository.bindQueue(spec);
    AtomicLong id = new AtomicLong();

    assertThatThrownBy(() -> db.dsl().transaction(tx -> {
      id.set(repository.inTransaction(tx.dsl()).publish(spec, "{}"));
      throw new IllegalStateException("the caller's own failure");
    })).isInstanceOf(IllegalStateException.class).hasMessage("the caller's own failure");

    assertThat(rows.item(id.get())).isNull();
  }

  @Test
  void aHealInsideTheCallersTransactionCommitsWithIt() {
    QueueSpec spec = QueueSpec.autoDeleted("tx-heal-commit");
    repository.bindQueue(spec);
    reap("tx-heal-commit");

    try (Session caller = Session.open(db)) {
      long before = repository.inTransaction(caller.dsl()).publish(spec, "{\"heal\": true}");
      // The transaction is still healthy after the heal: more work in it succeeds.
      long after = repository.inTransaction(caller.dsl()).publish(spec, "{\"heal\": false}");
      // The queue row is committed already (on the repository's own connection); the messages are not.
      assertThat(rows.exists("tx-heal-commit")).isTrue();
      assertThat(rows.item(before)).as("invisible before commit").isNull();
      caller.commit();

      assertThat(rows.item(before).getQueueId()).isEqualTo("tx-heal-commit");
      assertThat(rows.item(after).getQueueId()).isEqualTo("tx-heal-commit");
    }
  }

  @Test
  void aHealInsideTheCallersTransactionRollsBackWithIt() {
    QueueSpec spec = QueueSpec.autoDeleted("tx-heal-rollback");
    repository.bindQueue(spec);
    reap("tx-heal-rollback");

    try (Session caller = Session.open(db)) {
      long id = repository.inTransaction(caller.dsl()).publish(spec, "{}");
      caller.rollback();

      assertThat(rows.item(id)).isNull();
      assertThat(rows.itemsOf("tx-heal-rollback")).as("the re-created queue stays, empty").isZero();
    }
    // Reaped again: the repository's keep-alive throttle thinks the queue fresh; a later publish must still heal it.
    reap("tx-heal-rollback");
    long id = repository.publish(spec, "{}");
    assertThat(rows.item(id).getQueueId()).isEqualTo("tx-heal-rollback");
  }

  @Test
  void aMissingNonAutoDeletedQueueLeavesTheCallersTransactionUsable() {
    QueueSpec existing = QueueSpec.durable("tx-existing");
    repository.bindQueue(existing);

    try (Session caller = Session.open(db)) {
      TransactionalQueue inTx = repository.inTransaction(caller.dsl());
      long first = inTx.publish(existing, "{\"n\": 1}");
      assertThatThrownBy(() -> inTx.publish(QueueSpec.durable("tx-missing"), "{}"))
          .isInstanceOf(QueueNotFoundException.class);
      long second = inTx.publish(existing, "{\"n\": 2}");
      caller.commit();

      assertThat(rows.item(first)).isNotNull();
      assertThat(rows.item(second)).isNotNull();
    }
  }
  /**
   * Everything the transactional view offers runs inside the caller's transaction and leaves it open: after all of
   * it, the caller's rollback takes back the caller's own uncommitted row and every row the view wrote.
   */
  @Test
  void theCallersUncommittedWorkSurvivesEverythingTheViewOffers() {
    QueueSpec committed = QueueSpec.durable("tx-view-committed");
    repository.bindQueue(committed);
    List<Long> earlier = repository.publishBatch(committed, List.of("{\"n\": -2}", "{\"n\": -1}"));

    try (Session caller = Session.open(db)) {
      new QueueRows(caller.dsl()).insertQueue("tx-view-callers-own-row", true, false);
      TransactionalQueue view = repository.inTransaction(caller.dsl());
      QueueSpec bound = QueueSpec.autoDeleted("tx-view-bound");
      view.bindQueue(bound);
      assertThat(view.keepAlive(bound.name())).isTrue();
      long published = view.publish(bound, "{\"n\": 1}");
      List<Long> batch = view.publishBatch(bound, List.of("{\"n\": 2}", "{\"n\": 3}"));
      List<ClaimedMessage> claimed = view.claim(committed.name(), 10, Duration.ofMinutes(1));
      assertThat(claimed).extracting(ClaimedMessage::id).containsExactlyElementsOf(earlier);
      assertThat(view.release(claimed.get(0), Duration.ZERO)).isTrue();
      assertThat(view.ack(claimed.get(1))).isTrue();

      caller.rollback();

      assertThat(rows.exists("tx-view-callers-own-row")).as("the caller's own row").isFalse();
      assertThat(rows.exists("tx-view-bound")).isFalse();
      assertThat(rows.item(published)).isNull();
      assertThat(batch).allSatisfy(id -> assertThat(rows.item(id)).isNull());
      assertThat(earlier).as("the claim, release and ack rolled back too").allSatisfy(id ->
          assertThat(rows.item(id).getStatus()).isEqualTo(MessageQueueItemStatus.PENDING));
    }
  }

  @Test
  void theTransactionalViewOffersNoMaintenance() {
    Set<String> offered = Arrays.stream(TransactionalQueue.class.getDeclaredMethods())
        .filter(method -> Modifier.isPublic(method.getModifiers()))
        .map(Method::getName)
        .collect(Collectors.toSet());

    assertThat(offered).containsExactlyInAnyOrder(
        "publish", "publishBatch", "claim", "ack", "release", "extendLease", "extendLeases", "fail",
        "republishDeadLetter", "bindQueue", "keepAlive");
  }
}
