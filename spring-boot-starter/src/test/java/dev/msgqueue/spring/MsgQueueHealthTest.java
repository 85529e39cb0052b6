package dev.msgqueue.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.HousekeepingRun;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.WakeupListener;
import java.io.IOException;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.TestDatabase;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;

/** The health check against a database that goes away and comes back: its answers and its log lines. */
@ExtendWith({MsgQueueDatabaseExtension.class, OutputCaptureExtension.class})
class MsgQueueHealthTest {
  private final TestDatabase db;

  MsgQueueHealthTest(TestDatabase db) {
    this.db = db;
  }

  @Test
  void logsOneLinePerChangeOfStatusNotOnePerFailedCheck(CapturedOutput output) {
    AtomicBoolean outage = new AtomicBoolean();
    WakeupListener.ConnectionFactory database = () -> {
      if (outage.get()) {
        throw new SQLException("Connection to 127.0.0.1:1 refused.\nsecond line of the message", "08001");
      }
      return db.connect();
    };
    MsgQueueHealth health = new MsgQueueHealth(database, null, null);

    assertThat(health.check().up()).isTrue();
    outage.set(true);
    for (int i = 0; i < 5; i++) {
      MsgQueueHealth.Report report = health.check();
      assertThat(report.up()).isFalse();
      assertThat(report.details()).containsEntry("database", "unreachable: Connection to 127.0.0.1:1 refused.");
    }
    outage.set(false);
    assertThat(health.check().up()).isTrue();
    assertThat(health.check().up()).isTrue();

    assertThat(output.getAll().lines().filter(line -> line.contains("msgqueue health is"))).hasSize(2);
    assertThat(output.getAll()).containsOnlyOnce(
        "msgqueue health is DOWN: database unreachable: Connection to 127.0.0.1:1 refused.");
    assertThat(output.getAll()).containsOnlyOnce("msgqueue health is UP again");
  }

  /** A port nothing listens on: the check's own connection fails at once instead of waiting for a pool. */
  @Test
  void aServerThatIsGoneIsDownAtOnce() throws Exception {
    int closedPort = closedPort();
    Properties timeouts = new Properties();
    timeouts.setProperty("connectTimeout", "1");
    MsgQueueHealth health = new MsgQueueHealth(
        () -> DriverManager.getConnection("jdbc:postgresql://127.0.0.1:" + closedPort + "/test", timeouts), null, null);
    MsgQueueHealth.Report report = health.check();
    assertThat(report.up()).isFalse();
    assertThat(report.details()).hasEntrySatisfying("database",
        state -> assertThat(state.toString()).startsWith("unreachable: Connection to 127.0.0.1:" + closedPort));
  }

  /**
   * Housekeeping ticks that failed while the database was away say nothing about the housekeeper: UP once the database
   * answers; failures in a row after that make it DOWN.
   */
  @Test
  void housekeeperFailuresCountOnlyOnceTheDatabaseIsReachable() throws Exception {
    PGSimpleDataSource gone = new PGSimpleDataSource();
    gone.setUrl("jdbc:postgresql://127.0.0.1:" + closedPort() + "/test");
    Housekeeper failing = Housekeeper.builder(
        MsgQueueRepository.create(gone, MsgQueueConfig.defaults())).build();
    for (int i = 0; i < MsgQueueHealth.HOUSEKEEPER_FAILURES_DOWN; i++) {
      assertThat(failing.runOnce().outcome()).isEqualTo(HousekeepingRun.Outcome.FAILED);
    }
    MsgQueueHealth health = new MsgQueueHealth(db::connect, null, failing);

    MsgQueueHealth.Report afterTheOutage = health.check();
    assertThat(afterTheOutage.up()).isTrue();
    assertThat(afterTheOutage.details()).containsEntry("housekeeperConsecutiveFailures", 3);

    for (int i = 0; i < MsgQueueHealth.HOUSEKEEPER_FAILURES_DOWN; i++) {
      failing.runOnce();
    }
    MsgQueueHealth.Report failingWithTheDatabaseUp = health.check();
    assertThat(failingWithTheDatabaseUp.up()).isFalse();
    assertThat(failingWithTheDatabaseUp.details()).containsEntry("database", "reachable")
        .containsEntry("housekeeperConsecutiveFailures", 6);
  }

  private static int closedPort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }
}
