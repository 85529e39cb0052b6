package dev.msgqueue.internal.consume;

import java.time.Duration;

/**
 * One subscriber's consuming pipeline, as the subscriber drives it: {@link ConsumerPipeline} for the claiming modes
 * (at most once, lease), {@link HeldPipeline} for the held-transaction mode.
 */
public interface Pipeline {
  /** Binds the queue and starts consuming. On failure nothing keeps running and the threads are released. */
  void start();

  /** A wake-up: looks for messages at once, and once more a wake-up window later. */
  void wake();

  boolean isClosing();

  /**
   * Stops consuming, lets the running handlers finish within {@code timeout}, settles what is left, and releases the
   * shared threads.
   *
   * @return whether every running handler finished within the timeout
   */
  boolean close(Duration timeout);

  /** Claim (or lock) statements run so far. */
  long claimRounds();

  /** Ack statements run so far (lease mode). */
  long ackFlushes();

  /** Lease renewal statements run so far (lease mode). */
  long leaseRenewals();

  long wakeups();

  /** Messages settled as handled: acked, taken and handled, or deleted with their transaction. */
  long acked();

  long deadLettered();

  /** Messages handed back to the queue unhandled. */
  long released();

  /** Messages of at-most-once takes whose commit went unanswered and whose outcome the server could not tell. */
  long unresolved();

  /** The name prefix of the shared threads this pipeline runs on. */
  String sharedThreadPrefix();

  /** The most receipts one ack statement carried so far (lease mode). */
  int largestAck();

  /** The most messages held at once: claimed (or locked) and not yet handled. */
  int mostHeld();
}
