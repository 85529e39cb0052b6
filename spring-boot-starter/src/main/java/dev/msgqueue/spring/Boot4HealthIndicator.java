package dev.msgqueue.spring;

import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/** The {@code msgqueue} health on Spring Boot 4 ({@code spring-boot-health}'s {@code contributor} package). */
final class Boot4HealthIndicator implements HealthIndicator {
  private final MsgQueueHealth health;

  Boot4HealthIndicator(MsgQueueHealth health) {
    this.health = health;
  }

  @Override
  public Health health() {
    MsgQueueHealth.Report report = health.check();
    return (report.up() ? Health.up() : Health.down()).withDetails(report.details()).build();
  }
}
