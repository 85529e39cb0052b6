package dev.msgqueue;

import java.time.Duration;
import java.time.Instant;

/**
 * What one {@link Housekeeper} tick did.
 *
 * @param startedAt when the tick started
 * @param duration how long it took
 * @param outcome whether it did the work, left it to another replica, or failed
 * @param reapedQueues how many idle auto-deleted queues it deleted (0 unless {@link Outcome#COMPLETED})
 * @param deletedExpiredMessages how many expired messages it deleted (0 unless {@link Outcome#COMPLETED})
 * @param failure the failure's description if {@link Outcome#FAILED}, else {@code null}
 */
public record HousekeepingRun(
    Instant startedAt,
    Duration duration,
    Outcome outcome,
    int reapedQueues,
    int deletedExpiredMessages,
    String failure) {

  /** How a tick ended. */
  public enum Outcome {
    /** This housekeeper held the lock and ran the reaper and the expired-message cleanup. */
    COMPLETED,
    /** Another housekeeper (another replica) held the lock: this one did nothing, without waiting. */
    SKIPPED,
    /** The tick failed (logged); the next tick runs as usual. */
    FAILED
  }
}
