package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.FailureOutcome;
import java.util.List;

/**
 * Everything the pipeline asks of the database, for one queue. Each call is one short statement (or transaction) on a
 * connection of its own; calls may run concurrently from several threads. Failures are thrown as the repository's
 * runtime exceptions.
 */
public interface ConsumerStore {
  /** The queue consumed. */
  String queueName();

  /** Binds the queue (creating it, or updating its attributes to the subscriber's spec). */
  void bindQueue();

  /**
   * Claims at most {@code max} messages, lowest id first, in the subscriber's mode: in lease mode under a lease; in the
   * default mode it takes them (deletes them as it returns them), so they need no ack.
   */
  List<ClaimedMessage> claim(int max);

  /** Lease mode with a retry policy: counts redeliveries and dead-letters those past the limit. */
  List<ClaimedMessage> countRedeliveries(List<ClaimedMessage> claimed);

  /** Lease mode: deletes the messages whose receipt still matches; at most {@code batchSize} of them. @return how many */
  int ack(List<ClaimedMessage> receipts);

  /**
   * Hands back claimed messages, claimable at once: in lease mode those whose receipt still matches are PENDING again;
   * in the default mode the taken messages are put back under their ids. @return the ids released
   */
  List<Long> release(List<ClaimedMessage> receipts);

  /** Lease mode: renews the leases; @return the messages still held, under their new receipts */
  List<ClaimedMessage> extendLeases(List<ClaimedMessage> receipts);

  /** Lease mode with a retry policy: settles a message whose handler threw. */
  FailureOutcome fail(ClaimedMessage message, Throwable error);

  /**
   * Keeps the queue alive, re-creating it (with bounded lock waits) only if it is missing.
   *
   * @return whether it had to be re-created
   */
  boolean keepAlive();

  /** Reports a handler's run to the repository's events. */
  void handled(long nanos, boolean failed);

  /** Reports a message its claim took (default mode) as acked: its handler returned, and no ack statement follows. */
  void settledByItsHandler();
}
