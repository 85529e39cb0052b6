package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.FailureOutcome;
import java.util.List;
import org.jooq.DSLContext;

/**
 * What one held transaction offers the lane that runs in it ({@link ConsumerStore#inHeldTransaction}): the messages it
 * locks, their deletion, and the settling of failures, all committed together or not at all.
 */
public interface HeldTransaction {
  /**
   * Locks up to {@code max} claimable messages, lowest id first, and bounds this transaction by the subscriber's
   * transaction timeout.
   *
   * @return the locked messages in id order, each with whether its last delivery ended without commit
   */
  List<LockedMessage> lock(int max);

  /** Locks again those of {@code ids} still claimable, after this lane's batch was rolled back. @return in id order */
  List<LockedMessage> lockAgain(List<Long> ids);

  /**
   * Quarantines messages whose last delivery ended without commit: from this transaction's commit on, only
   * {@link #lockQuarantined} takes them, one per transaction.
   */
  void quarantine(List<Long> ids);

  /**
   * Locks the lowest quarantined message of the queue, if any: a search of the queue, for messages a consumer that
   * died quarantined. @return it, or null
   */
  LockedMessage lockQuarantined();

  /** Locks the lowest message among {@code ids} that is still quarantined, found by key. @return it, or null */
  LockedMessage lockQuarantined(List<Long> ids);

  /** Deletes handled messages: they leave their queue when this transaction commits. */
  void delete(List<Long> ids);

  /** Settles a message whose handler threw (its writes already rolled back): retried after a backoff, or dead-lettered. */
  FailureOutcome fail(ClaimedMessage message, Throwable error);

  /** Dead-letters a message whose deliveries kept ending without commit. @return whether it moved */
  boolean deadLetterEnded(ClaimedMessage message, int failedDeliveries);

  /** This transaction, for the handler. */
  DSLContext dsl();

  /**
   * Whether this transaction is gone: its connection failed or the server ended its session (asked of the
   * connection, a round trip: only after a handler threw).
   */
  boolean ended();

  /**
   * Runs {@code body} in a savepoint of this transaction, handing it the savepoint's context: if it throws, what it
   * wrote is rolled back to the savepoint and the exception is rethrown; the transaction goes on.
   */
  void inSavepoint(Body body) throws Exception;

  /** Work inside a savepoint. */
  @FunctionalInterface
  interface Body {
    void run(DSLContext savepoint) throws Exception;
  }

  /**
   * A message this transaction locked.
   *
   * @param endedWithoutCommit whether the transaction that locked it before ended without commit: its delivery was
   *     cut short (its consumer died, hung past the timeout or lost its connection)
   */
  record LockedMessage(ClaimedMessage message, boolean endedWithoutCommit) { }
}
