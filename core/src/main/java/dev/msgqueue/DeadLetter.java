package dev.msgqueue;

import java.time.Instant;

/**
 * A message in a dead-letter queue, as {@link MsgQueueRepository#deadLetters} shows it.
 *
 * @param id the message id, the same it had in its original queue (a dead letter is moved, not copied)
 * @param payload the payload as JSON text
 * @param originalQueue the queue it was dead-lettered from, where {@link MsgQueueRepository#republishDeadLetter}
 *     puts it back
 * @param deadLetterQueue the queue it is in now
 * @param deliveries how many deliveries it had, every one failed (a handler threw, or its lease ran out)
 * @param errorClass the class of the last delivery's error, {@value #LEASE_EXPIRED} if the last delivery's lease
 *     ran out, or {@value #TRANSACTION_ENDED} if its held transaction ended without commit (either way its consumer
 *     died, hung or lost its connection); {@code null} if none was given
 * @param errorMessage the last error's message (at most {@value #MAX_ERROR_MESSAGE_CHARS} characters), or
 *     {@code null}
 * @param deadLetteredAt when it moved to the dead-letter queue
 * @param expiresAt when it expires, after which {@link MsgQueueRepository#cleanUpExpiredMessages()} removes it
 */
public record DeadLetter(
    long id,
    String payload,
    String originalQueue,
    String deadLetterQueue,
    int deliveries,
    String errorClass,
    String errorMessage,
    Instant deadLetteredAt,
    Instant expiresAt) {

  /** The error class recorded for a delivery whose lease ran out without an ack, release or failure. */
  public static final String LEASE_EXPIRED = "msgqueue:lease-expired";
  /**
   * The error class recorded for a delivery whose held transaction ended without commit
   * ({@link ConsumeMode#TRANSACTION}): its consumer died, hung past the transaction timeout, or lost its connection.
   */
  public static final String TRANSACTION_ENDED = "msgqueue:transaction-ended";
  /** The longest error message kept; longer ones are cut. */
  public static final int MAX_ERROR_MESSAGE_CHARS = 4_000;
}
