package dev.msgqueue.it;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/**
 * Waits in a test for something a background thread does: a handler, a housekeeping tick, a wake-up.
 * The condition is polled every 10 ms; a condition still false at the limit fails the test with its description.
 */
public final class Await {
  private static final long POLL_MILLIS = 10;

  private Await() {
  }

  /**
   * Returns once {@code condition} holds.
   *
   * @param what what is awaited, for the failure message
   * @param limit how long to wait before failing
   * @param condition polled until true
   * @throws AssertionError when the limit passes first, or the waiting thread is interrupted
   */
  public static void until(String what, Duration limit, BooleanSupplier condition) {
    long giveUp = System.nanoTime() + limit.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - giveUp >= 0) {
        throw new AssertionError("timed out after " + limit.toSeconds() + " s waiting for: " + what);
      }
      try {
        Thread.sleep(POLL_MILLIS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError("interrupted waiting for: " + what, e);
      }
    }
  }
}
