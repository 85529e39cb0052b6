package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.count;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.it.Await;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record;
import org.jooq.Table;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The held-transaction mode against PostgreSQL: a handler's writes in the transaction that holds its message commit
 * exactly when the message is removed; a handler that throws fails alone; a connection the server terminates, or a
 * handler that hangs past the transaction timeout, gives its batch back to another consumer, which handles it once;
 * and a delivery cut short that way counts toward the dead letter.
 */
class HeldTransactionIT extends RepositoryFixture {
  private static final Duration AWAIT = Duration.ofSeconds(120);
  private static final Table<Record> LEDGER = table(name("heldLedger"));
  private static final Field<Long> LEDGER_ID = field(name("heldLedger", "id"), Long.class);
  private static final RetryPolicy QUICK_RETRIES = RetryPolicy.builder("held-dead-letters")
      .initialBackoff(Duration.ofMillis(50)).maxBackoff(Duration.ofMillis(200)).maxDeliveries(3).build();

  HeldTransactionIT(TestDatabase db) {
    super(db, 12);
  }

  @BeforeEach
  void ledger() {
    // The test's own table, written by the handlers: DDL, which jOOQ's typed API does not cover for an ad-hoc table.
    db.dsl().execute("CREATE TABLE IF NOT EXISTS \"heldLedger\" (id bigint NOT NULL)");
    db.dsl().truncate(LEDGER).execute();
  }

  private int itemsOf(QueueSpec spec) {
    return db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name()));
  }

  private static void writeLedger(DSLContext transaction, long id) {
    transaction.insertInto(LEDGER, LEDGER_ID).values(id).execute();
  }

  private Map<Long, Integer> ledgerCounts() {
    Map<Long, Integer> counts = new HashMap<>();
    db.dsl().select(LEDGER_ID, count()).from(LEDGER).groupBy(LEDGER_ID).fetch()
        .forEach(row -> counts.put(row.value1(), row.value2()));
    return counts;
  }

  @Test
  void theDefaultModeHoldsATransactionWhoseWritesCommitWithTheMessagesRemoval() {
    QueueSpec spec = bound("held-ledger");
    List<Long> ids = repository.publishBatch(spec, java.util.Collections.nCopies(250, "{}"));
    Subscriber subscriber = closeLater(Subscriber.builder(repository, spec,
            (message, transaction) -> writeLedger(transaction, message.id()))
        .concurrency(4).batchSize(20).pollInterval(Duration.ofMillis(50)).start());
    assertThat(subscriber.mode()).isEqualTo(ConsumeMode.TRANSACTION);

    Await.until("every message handled and removed", AWAIT,
        () -> ledgerCounts().size() == ids.size() && itemsOf(spec) == 0);
    assertThat(ledgerCounts().keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(ledgerCounts().values()).allSatisfy(count -> assertThat(count).isOne());
  }

  @Test
  void aHandlerThatThrowsLosesItsWritesAndIsRetriedWhileItsBatchMatesCommit() {
    QueueSpec spec = bound("held-failing");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3", "4", "5"));
    long poison = ids.get(2);
    Map<Long, AtomicInteger> calls = new ConcurrentHashMap<>();
    closeLater(Subscriber.builder(repository, spec, (message, transaction) -> {
          calls.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet();
          writeLedger(transaction, message.id());
          if (message.id() == poison) {
            throw new IllegalStateException("poison (test)");
          }
        })
        .concurrency(1).batchSize(10).retryPolicy(QUICK_RETRIES).pollInterval(Duration.ofMillis(50)).start());

    Await.until("the poison message dead-lettered", AWAIT,
        () -> repository.deadLetters("held-dead-letters", 10).size() == 1);
    Await.until("the others handled", AWAIT, () -> ledgerCounts().size() == ids.size() - 1);
    assertThat(ledgerCounts()).as("the poison's writes never stay; each other message's once")
        .doesNotContainKey(poison).hasSize(4).allSatisfy((id, count) -> assertThat(count).isOne());
    assertThat(calls.get(poison).get()).as("one run per delivery").isEqualTo(3);
    DeadLetter letter = repository.deadLetters("held-dead-letters", 10).get(0);
    assertThat(letter.id()).isEqualTo(poison);
    assertThat(letter.deliveries()).isEqualTo(3);
    assertThat(letter.errorClass()).isEqualTo(IllegalStateException.class.getName());
  }

  @Test
  void aLaneWhoseConnectionTheServerTerminatesGivesItsBatchBackAndItIsHandledOnce() throws Exception {
    QueueSpec spec = bound("held-terminated");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3", "4", "5", "6"));
    CountDownLatch firstStarted = new CountDownLatch(1);
    CountDownLatch mayGoOn = new CountDownLatch(1);
    AtomicInteger runs = new AtomicInteger();
    closeLater(Subscriber.builder(repository, spec, (message, transaction) -> {
          writeLedger(transaction, message.id());
          if (runs.incrementAndGet() == 1) {
            firstStarted.countDown();
            mayGoOn.await();
          }
        })
        .concurrency(1).batchSize(10).pollInterval(Duration.ofMillis(50)).start());
    assertThat(firstStarted.await(AWAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();

    // The lane's backend, idle in its transaction while the handler waits: the server ends it.
    Integer pid = db.dsl().select(field(name("pid"), Integer.class))
        .from(table(name("pg_catalog", "pg_stat_activity")))
        .where(field(name("datname"), String.class).eq(db.name()))
        .and(field(name("state"), String.class).eq("idle in transaction"))
        .fetchOne(0, Integer.class);
    assertThat(pid).isNotNull();
    assertThat(db.dsl().select(org.jooq.impl.DSL.function("pg_terminate_backend", Boolean.class,
        org.jooq.impl.DSL.val(pid))).fetchOne(0, Boolean.class)).isTrue();
    mayGoOn.countDown();

    Await.until("every message handled", AWAIT, () -> ledgerCounts().size() == ids.size() && itemsOf(spec) == 0);
    assertThat(ledgerCounts().values()).as("the terminated transaction's writes rolled back: once each")
        .allSatisfy(count -> assertThat(count).isOne());
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM_FAILURE, MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID.in(ids)))
        .as("failure rows stay until the cleanup: the batch's deliveries that ended without commit were counted")
        .isEqualTo(ids.size());
  }

  @Test
  void aHungHandlersTransactionIsEndedByTheServerAndAnotherConsumerHandlesItsMessage() throws Exception {
    QueueSpec spec = bound("held-hung");
    long id = repository.publish(spec, "{}");
    CountDownLatch hung = new CountDownLatch(1);
    HikariDataSource otherPool = db.pool(6);
    try {
      MsgQueueRepository hanging = MsgQueueRepository.create(otherPool, MsgQueueConfig.defaults());
      Subscriber first = Subscriber.builder(hanging, spec, (message, transaction) -> {
            writeLedger(transaction, message.id());
            hung.countDown();
            Thread.sleep(Duration.ofMinutes(10).toMillis()); // hangs until close interrupts it
          })
          .concurrency(1).transactionTimeout(Duration.ofSeconds(2)).pollInterval(Duration.ofMillis(50))
          .closeTimeout(Duration.ofSeconds(5)).start();
      try {
        assertThat(hung.await(AWAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
        long hungAt = System.nanoTime();
        Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
        closeLater(Subscriber.builder(repository, spec, (message, transaction) -> {
              writeLedger(transaction, message.id());
              handled.computeIfAbsent(message.id(), key -> new AtomicInteger()).incrementAndGet();
            })
            .pollInterval(Duration.ofMillis(50)).start());

        // The ledger row commits with the message's removal, just after the handler returned.
        Await.until("the other consumer handled the hung message", AWAIT, () -> ledgerCounts().containsKey(id));
        System.out.printf("HeldTransactionIT: the hung transaction's message was handled %d ms after the hang"
            + " (transaction timeout 2 s)%n", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - hungAt));
        assertThat(ledgerCounts()).containsExactly(Map.entry(id, 1));
        assertThat(db.dsl().select(MESSAGE_QUEUE_ITEM_FAILURE.LAST_ERROR_CLASS).from(MESSAGE_QUEUE_ITEM_FAILURE)
            .where(MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID.eq(id)).fetchOne(0, String.class))
            .as("the delivery the server ended counts as failed").isEqualTo(DeadLetter.TRANSACTION_ENDED);
      } finally {
        first.close();
      }
    } finally {
      otherPool.close();
    }
  }

  @Test
  void aPoolTooSmallForTheLanesIsRefusedAtStartNamingTheRule() {
    HikariDataSource small = db.pool(4);
    try {
      MsgQueueRepository onSmall = MsgQueueRepository.create(small, MsgQueueConfig.defaults());
      assertThatThrownBy(() -> Subscriber.builder(onSmall, QueueSpec.durable("held-small"), message -> { })
          .concurrency(8).start())
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("the pool needs at least 10 connections, and its maximum is 4");
      // Three lanes and a spare fit in four.
      Subscriber fits = Subscriber.builder(onSmall, QueueSpec.durable("held-small"), message -> { }).concurrency(2)
          .start();
      fits.close();
    } finally {
      small.close();
    }
  }

  @Test
  void manySubscribersShareThePoolLeavingAConnectionFreeAndAllTheirMessagesAreHandled() {
    List<QueueSpec> queues = new ArrayList<>();
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      QueueSpec spec = bound("held-shared-" + i);
      queues.add(spec);
      ids.addAll(repository.publishBatch(spec, java.util.Collections.nCopies(40, "{}")));
    }
    // Six subscribers of up to four lanes each on a pool of twelve: at most eleven lanes hold a connection at once.
    for (QueueSpec spec : queues) {
      closeLater(Subscriber.builder(repository, spec, (message, transaction) -> {
            writeLedger(transaction, message.id());
            handled.computeIfAbsent(message.id(), key -> new AtomicInteger()).incrementAndGet();
          })
          .concurrency(3).batchSize(5).pollInterval(Duration.ofMillis(50)).start());
    }
    Await.until("every message of every queue handled", AWAIT, () -> handled.keySet().containsAll(ids));
    assertThat(ledgerCounts().values()).allSatisfy(count -> assertThat(count).isOne());
    assertThat(repository.publish(queues.get(0), "{}")).as("the repository still gets a connection").isPositive();
  }
}
