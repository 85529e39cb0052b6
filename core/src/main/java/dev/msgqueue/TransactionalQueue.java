package dev.msgqueue;

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import org.jooq.JSONB;

/**
 * The operations of a {@link MsgQueueRepository} that belong in a caller's transaction, run on that
 * transaction's context: what they write commits or rolls back with it, and none of them commits, rolls back or
 * aborts it. Maintenance ({@link MsgQueueRepository#reapIdleQueues()},
 * {@link MsgQueueRepository#cleanUpExpiredMessages()}) runs its own transactions and is not offered here.
 *
 * <p>Obtain one with {@link MsgQueueRepository#inTransaction(org.jooq.DSLContext)}; it is as cheap as the
 * context it wraps, so take one per transaction. It shares the repository's configuration, keep-alive throttle and
 * wake-up coalescing. Each method has the contract of the repository method of the same name.
 */
public final class TransactionalQueue {
  private final MsgQueueRepository bound;

  TransactionalQueue(MsgQueueRepository bound) {
    this.bound = bound;
  }

  /** See {@link MsgQueueRepository#publish(QueueSpec, String)}. */
  public long publish(QueueSpec spec, String json) {
    return bound.publish(spec, json);
  }

  /** See {@link MsgQueueRepository#publish(QueueSpec, String, PublishOptions)}. */
  public long publish(QueueSpec spec, String json, PublishOptions options) {
    return bound.publish(spec, json, options);
  }

  /** See {@link MsgQueueRepository#publish(QueueSpec, JSONB)}. */
  public long publish(QueueSpec spec, JSONB payload) {
    return bound.publish(spec, payload);
  }

  /** See {@link MsgQueueRepository#publish(QueueSpec, JSONB, PublishOptions)}. */
  public long publish(QueueSpec spec, JSONB payload, PublishOptions options) {
    return bound.publish(spec, payload, options);
  }

  /** See {@link MsgQueueRepository#publishBatch(QueueSpec, List)}. */
  public List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads) {
    return bound.publishBatch(spec, jsonPayloads);
  }

  /** See {@link MsgQueueRepository#publishBatch(QueueSpec, List, PublishOptions)}. */
  public List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads, PublishOptions options) {
    return bound.publishBatch(spec, jsonPayloads, options);
  }

  /** See {@link MsgQueueRepository#claim(String, int)}. */
  public List<ClaimedMessage> claim(String queueName, int max) {
    return bound.claim(queueName, max);
  }

  /** See {@link MsgQueueRepository#claim(String, int, Duration)}. */
  public List<ClaimedMessage> claim(String queueName, int max, Duration lease) {
    return bound.claim(queueName, max, lease);
  }

  /** See {@link MsgQueueRepository#ack(Collection)}. */
  public List<Long> ack(Collection<ClaimedMessage> messages) {
    return bound.ack(messages);
  }

  /** See {@link MsgQueueRepository#ack(ClaimedMessage)}. */
  public boolean ack(ClaimedMessage message) {
    return bound.ack(message);
  }

  /** See {@link MsgQueueRepository#release(ClaimedMessage, Duration)}. */
  public boolean release(ClaimedMessage message, Duration delay) {
    return bound.release(message, delay);
  }

  /** See {@link MsgQueueRepository#extendLease(ClaimedMessage, Duration)}. */
  public Optional<ClaimedMessage> extendLease(ClaimedMessage message, Duration lease) {
    return bound.extendLease(message, lease);
  }

  /** See {@link MsgQueueRepository#extendLeases(Collection, Duration)}. */
  public List<ClaimedMessage> extendLeases(Collection<ClaimedMessage> messages, Duration lease) {
    return bound.extendLeases(messages, lease);
  }

  /** See {@link MsgQueueRepository#fail(ClaimedMessage, Throwable, RetryPolicy)}. */
  public FailureOutcome fail(ClaimedMessage message, Throwable error, RetryPolicy policy) {
    return bound.fail(message, error, policy);
  }

  /** See {@link MsgQueueRepository#republishDeadLetter(long)}. */
  public RepublishOutcome republishDeadLetter(long messageId) {
    return bound.republishDeadLetter(messageId);
  }

  /** See {@link MsgQueueRepository#bindQueue(QueueSpec)}. */
  public void bindQueue(QueueSpec spec) {
    bound.bindQueue(spec);
  }

  /** See {@link MsgQueueRepository#keepAlive(String)}. */
  public boolean keepAlive(String queueName) {
    return bound.keepAlive(queueName);
  }
}
