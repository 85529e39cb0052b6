package dev.msgqueue;

/** What {@link MsgQueueRepository#fail} did with a failed message. */
public enum FailureOutcome {
  /** Released: PENDING again and claimable once its backoff has passed. */
  RETRY_SCHEDULED,
  /** Moved to the policy's dead-letter queue, with the error; no longer in its queue. */
  DEAD_LETTERED,
  /**
   * Nothing done: the receipt no longer matches (the message was acked, failed or extended under this receipt
   * already, or its lease ran out and another consumer claimed it, or it expired).
   */
  NOT_HELD
}
