package dev.msgqueue;

import java.time.Duration;

/**
 * How many messages one queue holds, by state, at one instant of the server's clock. Every message is in exactly one
 * state (a message with no {@code "readAfter"}, which msgqueue never writes, is counted in none):
 *
 * @param queue the queue's name
 * @param ready unexpired and readable now ({@code "readAfter"} reached): a claim would take it. A message whose lease
 *     ran out is ready again.
 * @param delayed unexpired, PENDING, and not readable yet (published with a delay, or released with one)
 * @param inFlight unexpired, ASSIGNED to a consumer whose claim still holds (its lease, or for a claim without a
 *     lease until it expires)
 * @param expired past {@code "expiresAt"}, waiting for the cleanup to delete it
 * @param oldestReadyAge how long the longest-waiting ready message has been readable (now - its {@code "readAfter"});
 *     {@link Duration#ZERO} when none is ready
 */
public record QueueStatistics(
    String queue, long ready, long delayed, long inFlight, long expired, Duration oldestReadyAge) {

  /** All messages the queue holds, expired ones included. */
  public long total() {
    return ready + delayed + inFlight + expired;
  }
}
