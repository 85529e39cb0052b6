package dev.msgqueue.spring;

import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.HealthIndicator;

/** The {@code msgqueue} health on Spring Boot 3 (Actuator's {@code org.springframework.boot.actuate.health}). */
final class Boot3HealthIndicator implements HealthIndicator {
  private final MsgQueueHealth health;

  Boot3HealthIndicator(MsgQueueHealth health) {
    this.health = health;
  }

  @Override
  public Health health() {
    MsgQueueHealth.Report report = health.check();
    return (report.up() ? Health.up() : Health.down()).withDetails(report.details()).build();
  }
}
