package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;

/** A claimed message from its claim until it is acked, fails or is released. */
final class Held {
  /** The current receipt: replaced only by a lease renewal, under the receipts write lock. */
  volatile ClaimedMessage receipt;
  final long claimedNanos;
  volatile long leaseEndsNanos;
  volatile long startedNanos; // 0: not started
  volatile boolean done;
  volatile boolean lost;
  volatile boolean gaveUp;

  Held(ClaimedMessage receipt, long claimedNanos, long leaseEndsNanos) {
    this.receipt = receipt;
    this.claimedNanos = claimedNanos;
    this.leaseEndsNanos = leaseEndsNanos;
  }
}
