package dev.msgqueue.console;

import java.util.Map;

/**
 * This process's running totals as its metrics count them (in a Spring Boot service: the {@code msgqueue.*} counters
 * of its meter registry), for the throughput and housekeeping views. The console samples them on an interval and
 * shows the differences.
 */
@FunctionalInterface
public interface ProcessCounters {
  /** Published messages ({@code msgqueue.messages.published}). */
  String PUBLISHED = "published";
  /** Claimed messages ({@code msgqueue.messages.claimed}). */
  String CLAIMED = "claimed";
  /** Acked messages ({@code msgqueue.messages.acked}). */
  String ACKED = "acked";
  /** Dead-lettered messages ({@code msgqueue.messages.dead.lettered}). */
  String DEAD_LETTERED = "deadLettered";
  /** Reaped queues ({@code msgqueue.queues.reaped}). */
  String REAPED = "reaped";
  /** Expired messages deleted ({@code msgqueue.messages.expired.deleted}). */
  String EXPIRED_DELETED = "expiredDeleted";

  /**
   * The current totals since the process started, by the names above (a name left out is not shown). Called on the
   * console's sampling thread; must be cheap and must not block.
   */
  Map<String, Double> totals();
}
