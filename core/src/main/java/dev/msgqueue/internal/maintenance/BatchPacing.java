package dev.msgqueue.internal.maintenance;

import dev.msgqueue.MsgQueueConfig;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * Holds a maintenance job to {@link MsgQueueConfig#maintenanceDutyCycle()}: after each batch, a pause in proportion
 * to how long the batch took, holding no transaction. Run back to back over a large backlog, the batches keep a
 * backend busy and a stream of WAL in front of every publisher's commit flush; with the pauses, the publish median
 * during a tick stays at its level without one (docs/scaling.md).
 */
final class BatchPacing {
  /** Pauses the calling thread; throws if it is interrupted. */
  interface Sleeper {
    void sleep(long nanos) throws InterruptedException;
  }

  /** The pause per nanosecond a batch took. */
  private final double pauseRatio;
  private final LongSupplier nanoClock;
  private final Sleeper sleeper;

  BatchPacing(double dutyCycle) {
    this(dutyCycle, System::nanoTime, TimeUnit.NANOSECONDS::sleep);
  }

  BatchPacing(double dutyCycle, LongSupplier nanoClock, Sleeper sleeper) {
    this.pauseRatio = (1 - dutyCycle) / dutyCycle;
    this.nanoClock = nanoClock;
    this.sleeper = sleeper;
  }

  /** The start of a batch, for {@link #pauseAfter}. */
  long batchStarts() {
    return nanoClock.getAsLong();
  }

  /**
   * Pauses after the batch that started at {@code batchStart} (from {@link #batchStarts()}), when another follows.
   *
   * @return false if the thread was interrupted (its flag set again): the job stops and returns what it did so far,
   *     so that a housekeeper being closed is not held up by the rest of a long tick
   */
  boolean pauseAfter(long batchStart) {
    if (Thread.currentThread().isInterrupted()) {
      return false;
    }
    long pause = (long) ((nanoClock.getAsLong() - batchStart) * pauseRatio);
    if (pause <= 0) {
      return true;
    }
    try {
      sleeper.sleep(pause);
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }
}
