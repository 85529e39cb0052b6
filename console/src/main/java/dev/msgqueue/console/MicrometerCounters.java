package dev.msgqueue.console;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * {@link ProcessCounters} read from the {@code msgqueue.*} counters in a Micrometer registry (those
 * {@code dev.msgqueue.MicrometerMetrics} registers), summed over their {@code queue} tags: the throughput view then
 * shows exactly what the service's metrics count. Micrometer is an optional dependency of the console: only this class
 * uses it.
 */
public final class MicrometerCounters implements ProcessCounters {
  private static final Map<String, String> METERS = Map.of(
      PUBLISHED, "msgqueue.messages.published",
      CLAIMED, "msgqueue.messages.claimed",
      ACKED, "msgqueue.messages.acked",
      DEAD_LETTERED, "msgqueue.messages.dead.lettered",
      REAPED, "msgqueue.queues.reaped",
      EXPIRED_DELETED, "msgqueue.messages.expired.deleted");

  private final MeterRegistry registry;

  public MicrometerCounters(MeterRegistry registry) {
    this.registry = Objects.requireNonNull(registry, "registry");
  }

  @Override
  public Map<String, Double> totals() {
    Map<String, Double> totals = new LinkedHashMap<>();
    METERS.forEach((name, meter) -> totals.put(name,
        registry.find(meter).counters().stream().mapToDouble(Counter::count).sum()));
    return totals;
  }
}
