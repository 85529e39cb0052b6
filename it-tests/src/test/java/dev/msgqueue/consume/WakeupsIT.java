package dev.msgqueue.consume;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueNotFoundException;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.internal.sql.NotifyStatements;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.TestDatabase;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.jooq.DSLContext;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.jooq.SQLDialect;
import org.jooq.impl.DefaultConfiguration;
import org.jooq.impl.DefaultExecuteListenerProvider;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

/**
 * The publisher side of wake-ups: coalesced, off on request, the payload only the queue name, sent with the insert in
 * autocommit, and never for messages that were not committed.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class WakeupsIT {
  private final TestDatabase db;
  private final HikariDataSource pool;
  private Connection listening;

  WakeupsIT(TestDatabase db) {
    this.db = db;
    this.pool = db.pool(2);
  }

  @BeforeEach
  void listen() throws Exception {
    listening = db.connect();
    try (Statement statement = listening.createStatement()) {
      statement.execute("LISTEN " + NotifyStatements.CHANNEL); // plain SQL: jOOQ has no LISTEN
    }
  }

  @AfterEach
  void close() throws Exception {
    listening.close();
    pool.close();
  }

  private MsgQueueRepository repository(MsgQueueConfig.Builder config) {
    return MsgQueueRepository.create(pool, config.build());
  }

  private QueueSpec bound(MsgQueueRepository repository, String name) {
    QueueSpec spec = QueueSpec.durable(name);
    repository.bindQueue(spec);
    return spec;
  }

  /** Receives notifications until {@code last} arrives (PostgreSQL delivers them in commit order). */
  private List<String> receiveUntil(String last) throws Exception {
    List<String> received = new ArrayList<>();
    long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!received.contains(last)) {
      assertThat(System.nanoTime() - giveUp).as("timed out waiting for the notification of %s", last).isNegative();
      PGNotification[] notifications = listening.unwrap(PGConnection.class).getNotifications(200);
      if (notifications != null) {
        for (PGNotification notification : notifications) {
          assertThat(notification.getName()).isEqualTo(NotifyStatements.CHANNEL);
          received.add(notification.getParameter());
        }
      }
    }
    return received;
  }

  @Test
  void atMostOneNotificationPerQueuePerWindowCarryingOnlyTheQueueName() throws Exception {
    MsgQueueRepository repository = repository(MsgQueueConfig.builder().wakeupWindow(Duration.ofHours(1)));
    QueueSpec a = bound(repository, "coalesced-a");
    QueueSpec b = bound(repository, "coalesced-b");
    QueueSpec c = bound(repository, "coalesced-c");

    for (int i = 0; i < 30; i++) {
      repository.publish(a, "{\"i\": " + i + "}");
    }
    repository.publishBatch(b, IntStream.range(0, 100).mapToObj(Integer::toString).toList());
    repository.publish(a, "\"again\"");
    repository.publish(c, "\"marker\"");

    assertThat(receiveUntil(c.name())).containsExactly(a.name(), b.name(), c.name());
  }

  @Test
  void aNewWindowNotifiesAgain() throws Exception {
    Duration window = Duration.ofMillis(200);
    MsgQueueRepository repository = repository(MsgQueueConfig.builder().wakeupWindow(window));
    QueueSpec a = bound(repository, "windowed");
    QueueSpec marker = bound(repository, "windowed-marker");

    repository.publish(a, "1");
    Thread.sleep(window.multipliedBy(2).toMillis()); // only lengthens the gap: the assertion cannot pass by speed
    repository.publish(a, "2");
    repository.publish(marker, "\"marker\"");

    assertThat(receiveUntil(marker.name())).containsExactly(a.name(), a.name(), marker.name());
  }

  @Test
  void noNotificationWhenTurnedOff() throws Exception {
    MsgQueueRepository silent = repository(MsgQueueConfig.builder().wakeupNotifications(false));
    MsgQueueRepository notifying = repository(MsgQueueConfig.builder());
    QueueSpec quiet = bound(silent, "quiet");
    QueueSpec marker = bound(notifying, "quiet-marker");

    silent.publish(quiet, "1");
    silent.publishBatch(quiet, List.of("2", "3"));
    notifying.publish(marker, "\"marker\"");

    assertThat(receiveUntil(marker.name())).containsExactly(marker.name());
  }

  @Test
  void anAutocommitPublishSendsItsWakeUpWithItsInsertInOneStatement() throws Exception {
    List<String> statements = new ArrayList<>();
    DSLContext recording = new DefaultConfiguration()
        .set(pool)
        .set(SQLDialect.POSTGRES)
        .set(new DefaultExecuteListenerProvider(new ExecuteListener() {
          @Override
          public void executeStart(ExecuteContext ctx) {
            statements.add(ctx.sql());
          }
        }))
        .dsl();
    MsgQueueRepository repository = MsgQueueRepository.create(recording, MsgQueueConfig.defaults());
    QueueSpec single = bound(repository, "with-insert");
    QueueSpec batch = bound(repository, "with-insert-batch");
    statements.clear();

    repository.publish(single, "1");
    repository.publishBatch(batch, List.of("2", "3", "4"));

    // One statement per publish: one commit before the subscribers can be woken, not one for the insert and one for
    // the notification.
    assertThat(statements).hasSize(2).allSatisfy(sql -> assertThat(sql)
        .containsIgnoringCase("insert into \"MessageQueueItem\"").contains("pg_notify"));
    assertThat(receiveUntil(batch.name())).containsExactly(single.name(), batch.name());
  }

  @Test
  void aPublishToAMissingQueueWakesNobody() throws Exception {
    MsgQueueRepository repository = repository(MsgQueueConfig.builder());
    QueueSpec marker = bound(repository, "missing-marker");

    assertThatThrownBy(() -> repository.publish(QueueSpec.durable("never-bound"), "1"))
        .isInstanceOf(QueueNotFoundException.class);
    repository.publish(marker, "\"marker\"");

    assertThat(receiveUntil(marker.name())).containsExactly(marker.name());
  }

  @Test
  void aHealedQueueIsWokenAfterItsHeal() throws Exception {
    MsgQueueRepository repository = repository(MsgQueueConfig.builder());
    QueueSpec healed = QueueSpec.autoDeleted("healed-on-publish"); // no row: the insert fails, the heal inserts
    QueueSpec marker = bound(repository, "healed-marker");

    repository.publish(healed, "1");
    repository.publish(marker, "\"marker\"");

    assertThat(receiveUntil(marker.name())).containsExactly(healed.name(), marker.name());
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(healed.name()))).isOne();
  }

  @Test
  void aRolledBackPublishSendsNothing() throws Exception {
    MsgQueueRepository repository = repository(MsgQueueConfig.builder());
    QueueSpec rolledBack = bound(repository, "rolled-back");
    QueueSpec marker = bound(repository, "rolled-back-marker");

    try {
      db.dsl().transaction(tx -> {
        repository.inTransaction(tx.dsl()).publish(rolledBack, "1");
        throw new IllegalStateException("roll back (expected by the test)");
      });
    } catch (IllegalStateException expected) {
      // the transaction rolled back
    }
    repository.publish(marker, "\"marker\"");

    assertThat(receiveUntil(marker.name())).containsExactly(marker.name());
  }
}
