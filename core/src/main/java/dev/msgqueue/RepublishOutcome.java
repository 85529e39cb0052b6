package dev.msgqueue;

/** What {@link MsgQueueRepository#republishDeadLetter} did with a message id. */
public enum RepublishOutcome {
  /** Moved back to its original queue: PENDING, claimable now, with a fresh set of deliveries and the default TTL. */
  REPUBLISHED,
  /** Nothing done: no message has this id, or it expired (the cleanup deletes it). */
  NOT_FOUND,
  /**
   * Nothing done: the message is live in an ordinary queue, not a dead letter. That includes a dead letter
   * republished already: a republish drops its failure record (so its deliveries count from zero again), after which
   * nothing in the rows tells it from a message that never failed.
   */
  NOT_A_DEAD_LETTER,
  /**
   * Nothing done: a consumer of the dead-letter queue held it when the move was tried (claimed, its lease not run
   * out). Try again once that consumer has released it, or let it consume the message.
   */
  HELD
}
