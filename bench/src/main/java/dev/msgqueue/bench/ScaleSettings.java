package dev.msgqueue.bench;

import dev.msgqueue.MsgQueueConfig;
import java.time.Duration;
import java.util.List;
import java.util.Set;

/**
 * The sizes of the scale scenario: {@link #SHORT} by default (a few minutes), {@link #LONG} with {@code --scale long}
 * (adds the 10M-message backlog), {@link #IDLE} with {@code --scale idle} (the idle-subscriber cell of 1,000
 * subscribers with more deliveries, the other cells at the smoke test's sizes), {@link #QUICK} for the smoke test.
 *
 * @param form the name of the form, reported with the results
 * @param backlogs messages in the backlog cells, spread over {@link ScaleScenario#BACKLOG_QUEUES} queues
 * @param hotQueueMessages messages of the one queue a backlog cell claims from and drains (besides the backlog)
 * @param claimSamples how many timed claims of {@link ScaleScenario#CLAIM_BATCH} a backlog cell takes
 * @param queueCounts distinct auto-deleted queues of the publish cells
 * @param publishThreads publisher threads of every publish cell
 * @param publishFor how long each publish cell is measured
 * @param keepAliveInterval the keep-alive interval of the publish cells (short, so a cell spans several)
 * @param idleQueues idle auto-deleted queues of the housekeeping cell
 * @param expiredMessages expired messages of the housekeeping cell, spread over its idle queues
 * @param subscriberCounts subscribers (each on its own queue) of the idle-subscriber cells
 * @param settle how long subscribers run before the idle measurement
 * @param idleFor how long the idle measurement lasts
 * @param deliveries messages published to random queues for the delivery latency of each idle-subscriber cell
 * @param maintenanceDutyCycles the {@code MsgQueueConfig.maintenanceDutyCycle} of each housekeeping cell, one cell
 *     each in this order (1: batches back to back; the library's default beside it)
 * @param cells the curves to run ({@link #CELLS}: all by default, a subset with {@code --scale-cells})
 */
record ScaleSettings(
    String form,
    List<Integer> backlogs,
    int hotQueueMessages,
    int claimSamples,
    List<Integer> queueCounts,
    int publishThreads,
    Duration publishFor,
    Duration keepAliveInterval,
    int idleQueues,
    int expiredMessages,
    List<Integer> subscriberCounts,
    Duration settle,
    Duration idleFor,
    int deliveries,
    List<Double> maintenanceDutyCycles,
    Set<String> cells) {

  /** The scale scenario's curves, as {@code --scale-cells} names them. */
  static final Set<String> CELLS = Set.of("backlog", "queues", "housekeeping", "subscribers");

  /**
   * Idle means after the idle poll has backed off: with a WakeupListener it doubles from the poll interval (1 s) to
   * 30 s, which it reaches 1 + 2 + 4 + 8 + 16 = 31 s after the rechecks that follow the start.
   */
  private static final Duration IDLE_SETTLE = Duration.ofSeconds(65);
  /** One whole backed-off poll interval (30 s), so the window holds one poll per subscriber, whatever its phase. */
  private static final Duration IDLE_WINDOW = Duration.ofSeconds(30);

  /** Maintenance batches back to back, then at the library's default duty cycle. */
  private static final List<Double> BACK_TO_BACK_AND_DEFAULT =
      List.of(1.0, MsgQueueConfig.defaults().maintenanceDutyCycle());

  static final ScaleSettings QUICK = new ScaleSettings("quick", List.of(2_000, 20_000), 1_000, 20, List.of(10, 200),
      4, Duration.ofMillis(600), Duration.ofMillis(200), 500, 5_000, List.of(1, 5), Duration.ofMillis(300),
      Duration.ofMillis(500), 5, BACK_TO_BACK_AND_DEFAULT, CELLS);
  static final ScaleSettings SHORT = new ScaleSettings("short", List.of(10_000, 1_000_000), 20_000, 300,
      List.of(10, 10_000, 100_000), 8, Duration.ofSeconds(6), Duration.ofSeconds(2), 100_000, 1_000_000,
      List.of(1, 100, 1_000), IDLE_SETTLE, IDLE_WINDOW, 50, BACK_TO_BACK_AND_DEFAULT, CELLS);
  static final ScaleSettings LONG = new ScaleSettings("long", List.of(10_000, 1_000_000, 10_000_000), 20_000, 300,
      List.of(10, 10_000, 100_000), 8, Duration.ofSeconds(10), Duration.ofSeconds(2), 100_000, 1_000_000,
      List.of(1, 100, 1_000), IDLE_SETTLE, IDLE_WINDOW, 100, BACK_TO_BACK_AND_DEFAULT, CELLS);

  /**
   * For work on the idle-subscriber cell: only the subscribers' curve, at 1,000 subscribers, with 200 deliveries so that the p99 is not the single slowest of 50.
   */
  static final ScaleSettings IDLE = new ScaleSettings("idle", List.of(), 1_000, 20, List.of(10), 4,
      Duration.ofMillis(600), Duration.ofMillis(200), 500, 5_000, List.of(1_000), IDLE_SETTLE, IDLE_WINDOW, 200,
      List.of(0.5), Set.of("subscribers"));

  static ScaleSettings named(String form) {
    return switch (form) {
      case "short" -> SHORT;
      case "long" -> LONG;
      case "idle" -> IDLE;
      default -> throw new IllegalArgumentException(form);
    };
  }

  /** These sizes, running only {@code only} of the {@link #CELLS}. */
  ScaleSettings withCells(Set<String> only) {
    return new ScaleSettings(form, backlogs, hotQueueMessages, claimSamples, queueCounts, publishThreads, publishFor,
        keepAliveInterval, idleQueues, expiredMessages, subscriberCounts, settle, idleFor, deliveries,
        maintenanceDutyCycles, Set.copyOf(only));
  }

  /** These sizes, with one housekeeping cell per duty cycle of {@code dutyCycles}. */
  ScaleSettings withMaintenanceDutyCycles(List<Double> dutyCycles) {
    return new ScaleSettings(form, backlogs, hotQueueMessages, claimSamples, queueCounts, publishThreads, publishFor,
        keepAliveInterval, idleQueues, expiredMessages, subscriberCounts, settle, idleFor, deliveries,
        List.copyOf(dutyCycles), cells);
  }
}
