package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import java.util.concurrent.atomic.AtomicBoolean;

/** A claimed message from its claim until it is acked, fails or is handed back. */
final class Held {
  /** The current receipt: replaced only by a lease renewal, under the receipts write lock. */
  volatile ClaimedMessage receipt;
  final long claimedNanos;
  volatile long leaseEndsNanos;
  volatile long startedNanos; // 0: not started
  volatile boolean done;
  volatile boolean lost;
  volatile boolean gaveUp;
  /**
   * Set once, by whichever comes first: a handler starting the message, or the decision to hand it back unstarted
   * (close, or a lease too short to start). Exactly one of the two ever happens to a message.
   */
  private final AtomicBoolean decided = new AtomicBoolean();

  Held(ClaimedMessage receipt, long claimedNanos, long leaseEndsNanos) {
    this.receipt = receipt;
    this.claimedNanos = claimedNanos;
    this.leaseEndsNanos = leaseEndsNanos;
  }

  /** Claims the message for a handler. @return false if it is being handed back instead */
  boolean start(long nowNanos) {
    if (!decided.compareAndSet(false, true)) {
      return false;
    }
    startedNanos = nowNanos;
    return true;
  }

  /** Claims the message for a hand-back. @return false if a handler started it, or it is handed back already */
  boolean handBack() {
    if (!decided.compareAndSet(false, true)) {
      return false;
    }
    done = true;
    return true;
  }
}
