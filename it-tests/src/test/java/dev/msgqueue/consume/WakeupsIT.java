package dev.msgqueue.consume;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

/** The publisher side of wake-ups: coalesced, off on request, the payload only the queue name. */
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
