package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.FailureOutcome;
import java.util.List;
import java.util.Map;

/**
 * The pipeline's one road to the database: every act of one subscriber on its queue, in the subscriber's mode. Each
 * call is one short statement or transaction on a connection of its own; calls may run concurrently from several
 * threads. Failures are thrown as the repository's runtime exceptions. {@link QueueStore} is the one implementation;
 * the pipeline's tests drive it over one of their own.
 */
public interface ConsumerStore {
  /** The queue consumed. */
  String queueName();

  /** Binds the queue (creating it, or updating its attributes to the subscriber's spec). */
  void bindQueue();

  /**
   * Claims at most {@code max} messages, lowest id first, in the subscriber's mode: in lease mode under a lease; in
   * the at-most-once mode it takes them (deletes them as it returns them, in a transaction), so they need no ack.
   *
   * @throws UnansweredCommit if a take's commit went unanswered; {@link #committed} tells later whether it took them
   */
  List<ClaimedMessage> claim(int max);

  /**
   * Whether a transaction committed ({@link UnansweredCommit#transactionId()}).
   *
   * @throws RuntimeException while that is not known yet (the server still runs it, or cannot be reached)
   */
  boolean committed(long transactionId);

  /** Lease mode with a retry policy: counts redeliveries and dead-letters those past the limit. */
  List<ClaimedMessage> countRedeliveries(List<ClaimedMessage> claimed);

  /** Lease mode: deletes the messages whose receipt still matches; at most {@code batchSize} of them. @return how many */
  int ack(List<ClaimedMessage> handled);

  /**
   * Hands claimed messages back, claimable at once: in lease mode those whose receipt still matches are PENDING again;
   * in the at-most-once mode the taken messages are put back under their ids.
   */
  HandBack handBack(List<ClaimedMessage> claimed);

  /** Lease mode: renews the leases; @return the messages still held, under their new receipts */
  List<ClaimedMessage> extendLeases(List<ClaimedMessage> held);

  /** Lease mode with a retry policy: settles a message whose handler threw. */
  FailureOutcome fail(ClaimedMessage message, Throwable error);

  /**
   * Keeps the queue alive, re-creating it (with bounded lock waits) only if it is missing.
   *
   * @return whether it had to be re-created
   */
  boolean keepAlive();

  /**
   * Held-transaction mode: runs {@code work} in a transaction of its own on a pooled connection, joining none of the
   * caller's: commits if it returns, rolls back if it throws (and rethrows).
   */
  <T> T inHeldTransaction(HeldWork<T> work);

  /**
   * Held-transaction mode: counts a failed delivery for each of {@code ids}, whose last delivery ended without
   * commit, in autocommit on a connection of its own, so the count outlives the transaction that holds them.
   *
   * @return each counted message's failed deliveries now, by id
   */
  Map<Long, Integer> countEndedDeliveries(List<Long> ids);

  /** The most deliveries a message gets before it is dead-lettered (the retry policy's), or 0 without a policy. */
  int maxDeliveries();

  /** Work in a held transaction. */
  @FunctionalInterface
  interface HeldWork<T> {
    T run(HeldTransaction transaction);
  }

  /** Reports a handler's run to the repository's events. */
  void handled(long nanos, boolean failed);

  /** Reports a message its claim took (at-most-once mode) as acked: its handler returned, and no ack statement follows. */
  void settledByItsHandler();

  /** Reports taken messages whose take's outcome could not be learned: perhaps lost (at-most-once mode). */
  void perhapsLost(int messages);
}
