package dev.msgqueue.internal.consume;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;

/**
 * The pipeline's one way to repeat a database act that failed (an ack, a hand-back, the check of a take whose commit
 * went unanswered): the first attempt runs on the calling thread, each further one on a worker once its backoff has
 * passed (50 ms, doubling, at most 1 s), so no worker sleeps through a backoff. An act decides what each attempt does,
 * how many it gets and what follows the last failure. {@link #drain} makes the remaining attempts of every act at
 * once on the calling thread, for close.
 *
 * <p>An act's attempts never overlap: the timer's attempt and a drain take turns on the act.
 */
final class Retrying {
  static final long FIRST_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
  static final long MAX_BACKOFF_NANOS = TimeUnit.SECONDS.toNanos(1);
  private static final Logger log = PipelineContext.LOG;

  /** A database act that may be repeated: each attempt is safe after any earlier one, whatever its outcome. */
  interface Act {
    /** How many attempts the act gets, at least 1. */
    int attempts();

    /**
     * Attempt {@code attempt} (1, 2, ...): returns once done, throws to be tried again.
     *
     * @throws RuntimeException the failure, after which the next attempt follows, or {@link #gaveUp} after the last
     */
    void attempt(int attempt);

    /** Called once after the last attempt failed with {@code last}: what is left undone, logged by the act. */
    void gaveUp(RuntimeException last);

    /** What the act does, for the log line of a failed attempt. */
    String describe();
  }

  private final PipelineThreads threads;
  private final String queue;
  private final Set<Pending> pending = ConcurrentHashMap.newKeySet();
  private volatile boolean draining;

  Retrying(PipelineThreads threads, String queue) {
    this.threads = threads;
    this.queue = queue;
  }

  /** Makes the act's first attempt on this thread; if it fails, the next one follows on a worker after a backoff. */
  void run(Act act) {
    Pending entry = new Pending(act);
    synchronized (entry) {
      attempt(entry);
    }
  }

  /** Whether an act waits for its next attempt. */
  boolean hasPending() {
    return !pending.isEmpty();
  }

  /**
   * Makes every remaining attempt of every act now, on this thread, each after its backoff, until each act is done or
   * has given up; no attempt is scheduled on a worker from now on. For close, when the caller may wait.
   */
  void drain() {
    draining = true;
    Pending entry;
    while ((entry = pending.stream().findFirst().orElse(null)) != null) {
      synchronized (entry) {
        if (entry.timer != null) {
          entry.timer.cancel();
          entry.timer = null;
        }
        while (!entry.finished) {
          long wait = entry.dueNanos - threads.nanoTime();
          if (wait > 0 && !Thread.currentThread().isInterrupted()) {
            threads.pause(wait); // interrupted: the remaining attempts follow at once, still bounded
          }
          attempt(entry);
        }
      }
      pending.remove(entry);
    }
  }

  /** One attempt; the caller holds the entry's monitor. */
  private void attempt(Pending entry) {
    entry.attempts++;
    try {
      entry.act.attempt(entry.attempts);
      finish(entry);
      return;
    } catch (RuntimeException e) {
      if (entry.attempts >= entry.act.attempts()) {
        finish(entry);
        entry.act.gaveUp(e);
        return;
      }
      long backoff = Math.min(MAX_BACKOFF_NANOS, FIRST_BACKOFF_NANOS << Math.min(20, entry.attempts - 1));
      entry.dueNanos = threads.nanoTime() + backoff;
      pending.add(entry);
      log.warn("{} of \"{}\" failed (attempt {} of {}), trying again in {} ms ({})", entry.act.describe(), queue,
          entry.attempts, entry.act.attempts(), TimeUnit.NANOSECONDS.toMillis(backoff), e.toString());
      log.debug("failed attempt", e);
      if (!draining) {
        schedule(entry, backoff);
      }
    }
  }

  private void schedule(Pending entry, long backoff) {
    try {
      entry.timer = threads.schedule(() -> {
        synchronized (entry) {
          if (entry.timer == null || entry.finished) {
            return; // a drain took it over
          }
          entry.timer = null;
          attempt(entry);
        }
      }, backoff);
    } catch (RejectedExecutionException e) {
      entry.timer = null; // shutting down: close drains it
    }
  }

  private void finish(Pending entry) {
    entry.finished = true;
    pending.remove(entry);
  }

  /** An act and its attempts so far; guarded by its own monitor. */
  private static final class Pending {
    final Act act;
    int attempts;
    long dueNanos;
    boolean finished;
    PipelineThreads.Cancellable timer;

    Pending(Act act) {
      this.act = act;
    }
  }
}
