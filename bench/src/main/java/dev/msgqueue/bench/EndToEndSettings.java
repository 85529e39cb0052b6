package dev.msgqueue.bench;

import java.time.Duration;

/**
 * Scenario 4's load and subscriber settings.
 *
 * @param ratePerSecond messages per second the publisher sends, on a fixed schedule (open loop)
 * @param publishFor how long the measured stream runs ({@code --duration})
 * @param warmup how long an unmeasured stream runs first, at the same rate ({@code --warmup}): JIT, the first claims
 * @param pollInterval the subscriber's poll interval; {@link #LIBRARY_POLL_INTERVAL} unless overridden, so that the
 *     difference wake-ups make is the one a service with default settings sees
 */
record EndToEndSettings(int ratePerSecond, Duration publishFor, Duration warmup, Duration pollInterval) {
  /** {@code Subscriber.Builder}'s default poll interval. */
  static final Duration LIBRARY_POLL_INTERVAL = Duration.ofSeconds(1);
  static final int DEFAULT_RATE = 200;
  static final int QUICK_RATE = 100;
  /**
   * The quick mode's poll interval: the library default would make each run's drain wait up to a second, and the smoke
   * test only checks that the scenario works. Reported with the results.
   */
  static final Duration QUICK_POLL_INTERVAL = Duration.ofMillis(200);

  /**
   * How long the end of a run waits for the last messages to be handled: a few poll intervals (each one is a claim
   * that finds whatever polling alone would find) plus slack for a busy machine. Whatever is unhandled then is counted.
   */
  Duration drainTimeout() {
    return pollInterval.multipliedBy(3).plusSeconds(2);
  }

  boolean libraryPollInterval() {
    return pollInterval.equals(LIBRARY_POLL_INTERVAL);
  }
}
