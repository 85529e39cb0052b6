package dev.msgqueue.reliability;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueConnectionException;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.MsgQueueTimeoutException;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import java.sql.Connection;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Every statement msgqueue issues is bounded: held locks make it fail fast with a typed exception instead of
 * hanging, and a connection killed under it surfaces as a typed "outcome unknown" exception.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
@Timeout(60)
class TimeoutsAndFaultsIT {
  private final TestDatabase db;
  private final QueueRows rows;

  TimeoutsAndFaultsIT(TestDatabase db) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
  }

  private MsgQueueRepository repository(Duration statementTimeout, Duration lockTimeout) {
    return MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.builder()
        .statementTimeout(statementTimeout).lockTimeout(lockTimeout).build());
  }

  @Test
  void aPublishBlockedByAHeldQueueRowFailsFastWithATypedTimeout() {
    QueueSpec spec = QueueSpec.autoDeleted("held-queue");
    MsgQueueRepository repository = repository(Duration.ofSeconds(1), Duration.ofMillis(500));
    repository.bindQueue(spec);

    try (Session holder = Session.open(db)) {
      // What a reaper that never commits would hold.
      holder.dsl().selectFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq("held-queue")).forUpdate().fetch();

      assertThatThrownBy(() -> repository.publish(spec, "{}"))
          .isInstanceOf(MsgQueueTimeoutException.class)
          .hasMessageContaining("57014");
      holder.rollback();
    }
    assertThat(rows.itemsOf("held-queue")).as("nothing left behind").isZero();
    assertThat(repository.publish(spec, "{}")).isPositive();
  }

  @Test
  void theReaperSkipsAQueueWhoseExpiredMessageAConsumerHoldsAndReapsItOnceReleased() {
    QueueSpec spec = QueueSpec.autoDeleted("reaper-held");
    MsgQueueRepository repository = repository(Duration.ofSeconds(30), Duration.ofMillis(200));
    repository.bindQueue(spec);
    long id = repository.publish(spec, "{}");
    rows.expireItems("reaper-held");
    rows.makeIdle("reaper-held", Duration.ofHours(2));

    try (Session consumer = Session.open(db)) {
      // A consumer in the middle of acknowledging the (expired) message: the reaper must neither wait nor orphan it.
      consumer.dsl().selectFrom(MESSAGE_QUEUE_ITEM).where(MESSAGE_QUEUE_ITEM.ID.eq(id)).forUpdate().fetch();

      assertThat(repository.reapIdleQueues()).doesNotContain("reaper-held");
      assertThat(rows.item(id).getQueueId()).isEqualTo("reaper-held");
      consumer.rollback();
    }
    assertThat(rows.exists("reaper-held")).isTrue();
    assertThat(repository.reapIdleQueues()).contains("reaper-held");
    assertThat(rows.item(id)).as("deleted with its queue").isNull();
  }

  @Test
  void aPublishWhoseConnectionIsKilledRaisesATypedOutcomeUnknownException() throws Exception {
    QueueSpec spec = QueueSpec.autoDeleted("killed");
    MsgQueueRepository repository = repository(Duration.ofSeconds(30), Duration.ofSeconds(5));
    repository.bindQueue(spec);

    try (Session holder = Session.open(db)) {
      holder.dsl().selectFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq("killed")).forUpdate().fetch();
      CompletableFuture<Long> publish = CompletableFuture.supplyAsync(() -> repository.publish(spec, "{}"));
      int publisherPid = awaitBackendWaitingOnLock(holder.pid());

      db.dsl().select(function("pg_terminate_backend", Boolean.class, org.jooq.impl.DSL.val(publisherPid))).fetch();

      assertThatThrownBy(() -> publish.get(30, TimeUnit.SECONDS))
          .isInstanceOf(ExecutionException.class)
          .cause().isInstanceOf(MsgQueueConnectionException.class)
          .hasMessageContaining("outcome is unknown");
      holder.rollback();
    }
    // The pool drops the dead connection; the next publish works.
    assertThat(rows.item(repository.publish(spec, "{}")).getQueueId()).isEqualTo("killed");
  }

  /**
   * A wake-up is only a shortcut, so a connection lost on the NOTIFY after an autocommit insert must not report the
   * committed publish as failed (a caller retrying it would publish it twice). Inside a transaction it still throws:
   * the transaction is lost with its messages.
   */
  @Test
  void aPublishWhoseWakeupDiesAfterTheInsertCommittedReturnsItsId() throws Exception {
    // A pg_notify that kills its own backend, found before pg_catalog's by sessions whose search_path puts pg_catalog
    // last: the connection dies exactly between the committed insert and the wake-up. DDL of a function: plain SQL.
    db.dsl().execute("CREATE FUNCTION public.pg_notify(text, text) RETURNS void LANGUAGE plpgsql AS"
        + " 'BEGIN PERFORM pg_catalog.pg_terminate_backend(pg_catalog.pg_backend_pid()); END'");
    try {
      DataSource notifyDies = db.dataSourceWithOptions("-c search_path=public,pg_catalog");
      MsgQueueRepository repository = MsgQueueRepository.create(notifyDies, MsgQueueConfig.defaults());
      QueueSpec spec = QueueSpec.autoDeleted("wakeup-dies");
      repository.bindQueue(spec);

      long id = repository.publish(spec, "{\"n\": 1}");

      assertThat(rows.item(id).getQueueId()).isEqualTo("wakeup-dies");

      QueueSpec inTransaction = QueueSpec.autoDeleted("wakeup-dies-in-transaction");
      repository.bindQueue(inTransaction);
      try (Connection connection = notifyDies.getConnection()) {
        connection.setAutoCommit(false);
        assertThatThrownBy(() -> repository.inTransaction(DSL.using(connection, SQLDialect.POSTGRES))
            .publish(inTransaction, "{}"))
            .isInstanceOf(MsgQueueConnectionException.class);
      }
      assertThat(rows.itemsOf("wakeup-dies-in-transaction")).as("the caller's transaction was lost").isZero();
    } finally {
      db.dsl().execute("DROP FUNCTION public.pg_notify(text, text)");
    }
  }

  private int awaitBackendWaitingOnLock(int exceptPid) throws InterruptedException {
    Instant deadline = Instant.now().plusSeconds(20);
    while (Instant.now().isBefore(deadline)) {
      Integer pid = db.dsl().select(field(name("pid"), Integer.class))
          .from(table(name("pg_catalog", "pg_stat_activity")))
          .where(field(name("datname")).eq(db.name()))
          .and(field(name("wait_event_type")).eq("Lock"))
          .and(field(name("pid")).ne(exceptPid))
          .limit(1)
          .fetchOne(record -> record.value1());
      if (pid != null) {
        return pid;
      }
      Thread.sleep(10);
    }
    throw new AssertionError("no backend ever waited on the held lock");
  }
}
