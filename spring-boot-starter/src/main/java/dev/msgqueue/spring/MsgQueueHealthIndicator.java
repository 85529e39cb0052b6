package dev.msgqueue.spring;

import dev.msgqueue.WakeupListener;
import org.jooq.DSLContext;
import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

/**
 * UP when the database answers and, if the application holds a {@link WakeupListener}, its LISTEN connection is up.
 * A listener that is down (reconnecting) makes it DOWN: subscribers still find messages by polling, but only at their
 * poll interval.
 */
public class MsgQueueHealthIndicator extends AbstractHealthIndicator {
  private final DSLContext dsl;
  private final WakeupListener wakeups;

  public MsgQueueHealthIndicator(DSLContext dsl, WakeupListener wakeups) {
    super("msgqueue health check failed");
    this.dsl = dsl;
    this.wakeups = wakeups;
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
  }
}
