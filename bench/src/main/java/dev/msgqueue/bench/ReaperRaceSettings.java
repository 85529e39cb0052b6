package dev.msgqueue.bench;

import java.time.Duration;

/**
 * Scenario 3's time compression: production reaps after an hour idle; here the threshold is seconds, and the
 * keep-alive a quarter of it (the shortest {@code MsgQueueConfig} accepts relative to the threshold), so a run of a few
 * thresholds shows what an hour-scale race would do over days.
 *
 * @param runLength how long each strategy publishes while the reaper loops
 * @param reapThreshold idle time after which a queue may be reaped
 * @param keepAlive msgqueue's keep-alive interval
 * @param reaperPause pause between two reaper passes
 * @param publishers concurrent publishers to the one publisher-only queue
 * @param ratePerPublisher messages per second each publisher sends, paced
 */
record ReaperRaceSettings(
    Duration runLength,
    Duration reapThreshold,
    Duration keepAlive,
    Duration reaperPause,
    int publishers,
    int ratePerPublisher) {

  static final ReaperRaceSettings FULL = new ReaperRaceSettings(
      Duration.ofSeconds(12), Duration.ofSeconds(2), Duration.ofMillis(500), Duration.ofMillis(50), 2, 100);
  static final ReaperRaceSettings QUICK = new ReaperRaceSettings(
      Duration.ofMillis(1500), Duration.ofMillis(400), Duration.ofMillis(100), Duration.ofMillis(20), 2, 100);

  ReaperRaceSettings withRunLength(Duration value) {
    return new ReaperRaceSettings(value, reapThreshold, keepAlive, reaperPause, publishers, ratePerPublisher);
  }
}
