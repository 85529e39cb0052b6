package dev.msgqueue.spring;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.HousekeepingRun;
import dev.msgqueue.WakeupListener;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code msgqueue} health, independent of the Spring Boot line that reports it: DOWN while the database does not
 * answer a query on a connection of the check's own (short timeouts, so a check answers within about a second during
 * an outage and is UP at the first check after the database is back), or while the housekeeper has failed
 * {@value #HOUSEKEEPER_FAILURES_DOWN} ticks in a row with the database reachable. The wake-up listener's state is a
 * detail only: while it reconnects, subscribers still find messages by polling. Logs one line per change of status,
 * never one per failed check.
 */
final class MsgQueueHealth {
  /** Failed housekeeping ticks in a row, all with the database reachable, that make the health DOWN. */
  static final int HOUSEKEEPER_FAILURES_DOWN = 3;
  private static final Logger log = LoggerFactory.getLogger(MsgQueueHealth.class);

  /** The status and the details of one check. */
  record Report(boolean up, Map<String, Object> details) { }

  private final WakeupListener.ConnectionFactory database;
  private final WakeupListener wakeups;
  private final Housekeeper housekeeper;
  private Boolean lastUp;
  private boolean lastReachable;
  private Instant reachableSince = Instant.MIN;

  /**
   * @param database opens the check's connection; it should fail within about a second when the server is down
   * @param wakeups the application's wake-up listener, or {@code null} when it polls only
   * @param housekeeper the application's housekeeper, or {@code null} when it runs housekeeping otherwise
   */
  MsgQueueHealth(WakeupListener.ConnectionFactory database, WakeupListener wakeups, Housekeeper housekeeper) {
    this.database = database;
    this.wakeups = wakeups;
    this.housekeeper = housekeeper;
  }

  Report check() {
    Map<String, Object> details = new LinkedHashMap<>();
    String databaseFailure = databaseFailure();
    details.put("database", databaseFailure == null ? "reachable" : "unreachable: " + databaseFailure);
    Instant reachableWithoutBreakSince = recordReachable(databaseFailure == null);
    if (wakeups == null) {
      details.put("listener", "disabled (polling only)");
    } else {
      details.put("listener", wakeups.isListening() ? "listening" : "reconnecting (subscribers poll meanwhile)");
    }
    String housekeeperFailure = null;
    if (housekeeper != null) {
      HousekeepingRun last = housekeeper.lastRun().orElse(null);
      details.put("housekeeperLastRun", last == null ? "not yet" : last.outcome() + " at " + last.startedAt()
          + (last.failure() == null ? "" : ": " + last.failure()));
      int failures = housekeeper.consecutiveFailures();
      if (failures > 0) {
        details.put("housekeeperConsecutiveFailures", failures);
      }
      if (databaseFailure == null && failures >= HOUSEKEEPER_FAILURES_DOWN && last != null
          && last.startedAt().isAfter(reachableWithoutBreakSince)) {
        housekeeperFailure = failures + " housekeeping ticks failed in a row: " + last.failure();
      }
    }
    boolean up = databaseFailure == null && housekeeperFailure == null;
    recordStatus(up, databaseFailure != null ? "database unreachable: " + databaseFailure : housekeeperFailure);
    return new Report(up, details);
  }

  /** Null when the database answered; else what went wrong, in one line. */
  private String databaseFailure() {
    try (Connection connection = database.connect()) {
      DSL.using(connection, SQLDialect.POSTGRES).selectOne().fetch();
      return null;
    } catch (SQLException | RuntimeException e) {
      String message = e.getMessage();
      return message == null ? e.getClass().getSimpleName() : message.lines().findFirst().orElse(message);
    }
  }

  /**
   * Since when the database has been reachable without a break: ticks that failed before it came back say nothing
   * about the housekeeper itself.
   */
  private synchronized Instant recordReachable(boolean reachable) {
    if (reachable && !lastReachable) {
      reachableSince = Instant.now();
    }
    lastReachable = reachable;
    return reachableSince;
  }

  private synchronized void recordStatus(boolean up, String reason) {
    if (lastUp != null && lastUp == up) {
      return;
    }
    if (up) {
      if (lastUp != null) {
        log.info("msgqueue health is UP again");
      }
    } else {
      log.warn("msgqueue health is DOWN: {}", reason);
    }
    lastUp = up;
  }
}
