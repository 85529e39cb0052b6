package dev.msgqueue.internal.consume;

import static dev.msgqueue.internal.consume.PipelineContext.NEVER;

import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * When an idle subscriber looks for messages again. After rounds that found messages, the first empty round is
 * followed by others after 1, 2, 4, ... ms up to the poll interval, since publishers commit in groups; then idle polls,
 * the poll interval apart, or while a wake-up listener is connected doubling up to the longest idle poll interval
 * (a publish wakes the subscriber anyway). A failed round waits a poll interval. A wake-up asks for one more round a
 * wake-up window later, for notifications coalesced away. Not thread-safe: its owner calls it under its own lock.
 */
final class PollSchedule {
  /** The first wait after an empty round that followed rounds that found messages; it doubles from there. */
  private static final long FIRST_RECHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

  private final PipelineSettings settings;
  private final long pollNanos;
  private final long maxIdlePollNanos;
  private final long followUpNanos;
  private long recheckNanos = FIRST_RECHECK_NANOS;
  private long idlePollNanos;
  private long followUpAt = NEVER;

  PollSchedule(PipelineSettings settings) {
    this.settings = settings;
    this.pollNanos = settings.pollInterval().toNanos();
    this.idlePollNanos = pollNanos;
    this.maxIdlePollNanos = Math.max(pollNanos, settings.maxIdlePollInterval().toNanos());
    this.followUpNanos = settings.wakeupWindow().toNanos();
  }

  /** A wake-up came at {@code now}: one more round a wake-up window later. */
  void woken(long now) {
    followUpAt = now + followUpNanos;
  }

  /** A round found messages: the next empty one starts the rechecks again. */
  void found() {
    recheckNanos = FIRST_RECHECK_NANOS;
    idlePollNanos = pollNanos;
  }

  /** The wait after an empty round ({@code failed}: one that failed), with no other round running. */
  long nextWait(boolean failed, long now) {
    long wait;
    if (failed) {
      wait = pollNanos;
      recheckNanos = NEVER;
    } else if (recheckNanos != NEVER) {
      wait = recheckNanos;
      recheckNanos = recheckNanos >= pollNanos / 2 ? NEVER : recheckNanos * 2;
    } else {
      wait = nextIdlePoll();
    }
    if (followUpAt != NEVER) {
      if (followUpAt - now > 0) {
        wait = Math.min(wait, followUpAt - now);
      } else {
        followUpAt = NEVER;
      }
    }
    return wait;
  }

  /**
   * The wait before the next idle poll: it doubles (up to {@link PipelineSettings#maxIdlePollInterval}) while a
   * wake-up listener is connected, and is the poll interval otherwise. A backed-off wait is shortened by up to a tenth
   * at random: subscribers started together would otherwise poll in the same instant every interval, a burst of one
   * round per subscriber on the shared workers and the pool.
   */
  private long nextIdlePoll() {
    boolean listening = settings.wakeupsListening() != null && settings.wakeupsListening().getAsBoolean();
    if (!listening) {
      idlePollNanos = pollNanos;
      return pollNanos;
    }
    long wait = idlePollNanos;
    idlePollNanos = Math.min(maxIdlePollNanos, idlePollNanos * 2);
    return wait > pollNanos ? wait - ThreadLocalRandom.current().nextLong(wait / 10 + 1) : wait;
  }
}
