package dev.msgqueue.internal.consume;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/**
 * A subscriber's settings, checked by its builder before they get here.
 *
 * @param lease null for the default (at-most-once) mode
 * @param retries whether failed handlers are settled by a retry policy (lease mode only)
 * @param maxIdlePollInterval the longest an idle subscriber waits between polls while wake-ups arrive
 * @param wakeupsListening whether a wake-up listener is connected right now; {@code null} without one
 */
public record PipelineSettings(
    int concurrency,
    int batchSize,
    int prefetch,
    Duration pollInterval,
    Duration maxIdlePollInterval,
    Duration lease,
    boolean retries,
    Duration maxHandlerTime,
    Duration ackDelay,
    Duration keepAliveInterval,
    Duration wakeupWindow,
    BooleanSupplier wakeupsListening) {

  int capacity() {
    return concurrency + prefetch;
  }
}
