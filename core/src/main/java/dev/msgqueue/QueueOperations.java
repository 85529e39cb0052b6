package dev.msgqueue;

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import org.jooq.JSONB;

/**
 * The operations on queues and their messages that a {@link MsgQueueRepository} runs on its own context and a
 * {@link TransactionalQueue} runs in a caller's transaction, with one contract: what each writes commits with the
 * transaction it runs in (its own statement's, in autocommit), and none of them commits, rolls back or aborts a
 * caller's transaction. Every argument is checked before any SQL, throwing {@link IllegalArgumentException}.
 */
public interface QueueOperations {
  /** The most messages {@link #publishBatch} takes in one call. */
  int MAX_BATCH_SIZE = 10_000;
  /** The shortest lease: the timestamps' precision, so that every re-claim stores a strictly later deadline. */
  Duration MIN_LEASE = Duration.ofMillis(1);

  /** Publishes a JSON text payload with default options. @return the message id */
  long publish(QueueSpec spec, String json);

  /** Publishes a JSON text payload. @return the message id */
  long publish(QueueSpec spec, String json, PublishOptions options);

  /** Publishes a {@code jsonb} payload with default options. @return the message id */
  long publish(QueueSpec spec, JSONB payload);

  /** Publishes a {@code jsonb} payload. @return the message id */
  long publish(QueueSpec spec, JSONB payload, PublishOptions options);

  /** Publishes several payloads to one queue at once, with default options. */
  List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads);

  /**
   * Publishes several payloads to one queue at once, with the guarantees of a single publish: all are stored or none
   * is. In autocommit a batch of 100 or more goes by COPY, in a transaction of its own, when the database role has
   * {@code USAGE} on the identity sequence of {@code "MessageQueueItem"."id"} (operations.md); otherwise, and always
   * inside a caller's transaction, it is one insert statement.
   *
   * @return the message ids, in the order of {@code jsonPayloads}
   * @throws IllegalArgumentException for a null list, more than {@value #MAX_BATCH_SIZE} payloads, or any invalid
   *     payload (naming its index), before any SQL
   */
  List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads, PublishOptions options);

  /**
   * Claims up to {@code max} of the queue's messages that are readable now ({@code "readAfter"} reached) and not
   * expired, lowest id first, marking them ASSIGNED, in one statement. Competing consumers never get the same message
   * and never wait for each other (rows another claim holds are skipped). Without a lease, a claimed message is
   * never claimable again, so if the consumer dies before {@link #ack} it stays ASSIGNED until it expires and
   * {@link MsgQueueRepository#cleanUpExpiredMessages()} removes it.
   *
   * @return the claimed messages, in id order; empty if none is claimable
   * @throws IllegalArgumentException for an invalid queue name or {@code max} outside [1, {@value #MAX_BATCH_SIZE}]
   */
  List<ClaimedMessage> claim(String queueName, int max);

  /**
   * Like {@link #claim(String, int)}, in lease mode: a message not acked within {@code lease} becomes claimable again
   * (until it expires), so a consumer that dies loses nothing. The claim also takes messages whose earlier lease ran
   * out. Each claim stores a new, strictly later deadline, so a late {@link #ack} from a consumer whose lease ran out
   * deletes nothing once another consumer has re-claimed the message.
   *
   * @param lease at least 1 ms (the timestamps' precision), at most {@link MsgQueueConfig#MAX_MESSAGE_LIFETIME}
   */
  List<ClaimedMessage> claim(String queueName, int max, Duration lease);

  /**
   * Deletes the claimed messages whose claim is still theirs: still ASSIGNED under the same receipt. A message whose
   * lease ran out and that another consumer re-claimed (or that was released, or expired and was cleaned up) is left
   * alone.
   *
   * @return the ids deleted; fewer than given means some claims were no longer held
   */
  List<Long> ack(Collection<ClaimedMessage> messages);

  /** Acks one claimed message. @return whether it was deleted (see {@link #ack(Collection)}) */
  boolean ack(ClaimedMessage message);

  /**
   * Releases a claimed message, in either mode: it is PENDING again and claimable from now + {@code delay} (until it
   * expires), unless the claim is no longer held.
   *
   * @return whether it was released
   */
  boolean release(ClaimedMessage message, Duration delay);

  /**
   * Extends the lease of a claimed message (lease mode), so a slow but alive handler keeps it: its new deadline is
   * now + {@code lease}, or 1 ms past the current deadline if that is later (a deadline only moves forward). Returns
   * the message under its new receipt, which {@link #ack}, {@link #release}, {@link #fail} and further extensions must
   * use: the old receipt stops matching. In the default mode the deadline is the expiry, so extending also postpones
   * the expiry check of the claim (the item's {@code "expiresAt"} is unchanged).
   *
   * @return the message under its new receipt, or empty if the claim is no longer held (acked, released, failed,
   *     extended already under this receipt, or re-claimed by another consumer after the lease ran out)
   * @throws IllegalArgumentException for a null message or a lease outside [{@link #MIN_LEASE}, a year], before any
   *     SQL
   */
  Optional<ClaimedMessage> extendLease(ClaimedMessage message, Duration lease);

  /**
   * {@link #extendLease} for a batch, in one statement.
   *
   * @return the messages whose claim was still held, under their new receipts, in id order; the others are left alone
   * @throws IllegalArgumentException for a null collection or element, more than {@value #MAX_BATCH_SIZE} messages,
   *     or an invalid lease, before any SQL
   */
  List<ClaimedMessage> extendLeases(Collection<ClaimedMessage> messages, Duration lease);

  /**
   * Settles a claimed message whose handler failed (lease mode), by {@code policy}: if this was one of its first
   * {@code maxDeliveries - 1} deliveries it is released, claimable again after the policy's backoff; if it was the
   * {@code maxDeliveries}-th it moves to the policy's dead-letter queue, in one statement, with the error's class and
   * message. Deliveries whose lease ran out count too, once the redelivering claim has counted them. Only the holder
   * of the current receipt can fail a message, once: a consumer racing it with another fail or an ack under the same
   * receipt finds nothing to do.
   *
   * <p>Costs two statements (read the failure count, then release or move), and writes a row in the side table
   * {@code "MessageQueueItemFailure"}; messages that never fail never touch that table.
   *
   * @return what was done
   * @throws IllegalArgumentException for a null argument, or a message that is in the policy's dead-letter queue
   *     already, before any SQL
   */
  FailureOutcome fail(ClaimedMessage message, Throwable error, RetryPolicy policy);

  /**
   * Moves a dead letter back to the queue it came from, PENDING and claimable now, with a fresh set of deliveries
   * and the configured default TTL; it keeps its id. A dead letter that a consumer of the dead-letter queue holds
   * right now is not moved. One statement when it moves; a second, lock-free read tells why when it does not.
   *
   * @return {@link RepublishOutcome#REPUBLISHED}, or why nothing was done: {@link RepublishOutcome#NOT_FOUND},
   *     {@link RepublishOutcome#NOT_A_DEAD_LETTER} (a live message, one republished already included) or
   *     {@link RepublishOutcome#HELD}
   * @throws QueueNotFoundException if its original queue no longer exists (bind it, then re-publish); the caller's
   *     transaction is not aborted
   */
  RepublishOutcome republishDeadLetter(long messageId);

  /**
   * Creates the queue or updates its attributes to {@code spec}, and marks it active now. Takes an exclusive lock on
   * the queue row until the surrounding transaction ends; publishers are not blocked by it.
   */
  void bindQueue(QueueSpec spec);

  /**
   * Marks the queue active now, as a consumer's keep-alive. Never waits: if another transaction is writing the queue
   * row right now (a keep-alive, or the reaper deleting it), it writes nothing.
   *
   * @return whether {@code "lastActive"} was written; {@code false} if the queue does not exist or its row is busy
   */
  boolean keepAlive(String queueName);
}
