package dev.msgqueue.spring;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.WakeupListener;
import org.jooq.DSLContext;
import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

/**
 * UP when the database answers and, if the application holds a {@link WakeupListener}, its LISTEN connection is up.
 * A listener that is down (reconnecting) makes it DOWN: subscribers still find messages by polling, but only at their
 * poll interval. The housekeeper's last run is a detail; three failed ticks in a row make it DOWN.
 */
public class MsgQueueHealthIndicator extends AbstractHealthIndicator {
  /** Failed housekeeping ticks in a row that make the health DOWN. */
  static final int HOUSEKEEPER_FAILURES_DOWN = 3;

  private final DSLContext dsl;
  private final WakeupListener wakeups;
  private final Housekeeper housekeeper;

  /**
   * @param wakeups the application's wake-up listener, or {@code null} when it polls only
   * @param housekeeper the application's housekeeper, or {@code null} when it runs housekeeping otherwise
   */
  public MsgQueueHealthIndicator(DSLContext dsl, WakeupListener wakeups, Housekeeper housekeeper) {
    super("msgqueue health check failed");
    this.dsl = dsl;
    this.wakeups = wakeups;
    this.housekeeper = housekeeper;
  }

  @Override
  protected void doHealthCheck(Health.Builder builder) {
    dsl.selectOne().fetch();
    builder.withDetail("database", "reachable");
    if (wakeups == null) {
      builder.up().withDetail("listener", "disabled (polling only)");
    } else if (wakeups.isListening()) {
      builder.up().withDetail("listener", "listening");
    } else {
      builder.down().withDetail("listener", "not connected (reconnecting)");
    }
    if (housekeeper != null) {
      housekeeper.lastRun().ifPresentOrElse(
          run -> builder.withDetail("housekeeperLastRun", run.outcome() + " at " + run.startedAt()
              + (run.failure() == null ? "" : ": " + run.failure())),
          () -> builder.withDetail("housekeeperLastRun", "not yet"));
      if (housekeeper.consecutiveFailures() >= HOUSEKEEPER_FAILURES_DOWN) {
        builder.down().withDetail("housekeeperConsecutiveFailures", housekeeper.consecutiveFailures());
      }
    }
  }
}
