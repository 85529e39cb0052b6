package dev.msgqueue;

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import org.jooq.JSONB;

/**
 * The operations of a {@link MessageQueueRepository} that belong in a caller's transaction, run on that
 * transaction's context: what they write commits or rolls back with it, and none of them commits, rolls back or
 * aborts it. Maintenance ({@link MessageQueueRepository#reapIdleQueues()},
 * {@link MessageQueueRepository#deleteExpiredMessages()}) runs its own transactions and is not offered here.
 *
 * <p>Obtain one with {@link MessageQueueRepository#inTransaction(org.jooq.DSLContext)}; it is as cheap as the
 * context it wraps, so take one per transaction. It shares the repository's configuration, keep-alive throttle and
 * wake-up coalescing. Each method has the contract of the repository method of the same name.
 */
public final class TransactionalQueue {
  private final MessageQueueRepository bound;

  TransactionalQueue(MessageQueueRepository bound) {
    this.bound = bound;
  }

  /** See {@link MessageQueueRepository#publish(QueueSpec, String)}. */
  public long publish(QueueSpec spec, String json) {
    return bound.publish(spec, json);
  }

  /** See {@link MessageQueueRepository#publish(QueueSpec, String, PublishOptions)}. */
  public long publish(QueueSpec spec, String json, PublishOptions options) {
    return bound.publish(spec, json, options);
  }

  /** See {@link MessageQueueRepository#publish(QueueSpec, JSONB)}. */
  public long publish(QueueSpec spec, JSONB payload) {
    return bound.publish(spec, payload);
  }

  /** See {@link MessageQueueRepository#publish(QueueSpec, JSONB, PublishOptions)}. */
  public long publish(QueueSpec spec, JSONB payload, PublishOptions options) {
    return bound.publish(spec, payload, options);
  }

  /** See {@link MessageQueueRepository#publishBatch(QueueSpec, List)}. */
  public List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads) {
    return bound.publishBatch(spec, jsonPayloads);
  }

  /** See {@link MessageQueueRepository#publishBatch(QueueSpec, List, PublishOptions)}. */
  public List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads, PublishOptions options) {
    return bound.publishBatch(spec, jsonPayloads, options);
  }

  /** See {@link MessageQueueRepository#claim(String, int)}. */
  public List<ClaimedMessage> claim(String queueName, int max) {
    return bound.claim(queueName, max);
  }

  /** See {@link MessageQueueRepository#claim(String, int, Duration)}. */
  public List<ClaimedMessage> claim(String queueName, int max, Duration lease) {
    return bound.claim(queueName, max, lease);
  }

  /** See {@link MessageQueueRepository#ack(Collection)}. */
  public List<Long> ack(Collection<ClaimedMessage> messages) {
    return bound.ack(messages);
  }

  /** See {@link MessageQueueRepository#ack(ClaimedMessage)}. */
  public boolean ack(ClaimedMessage message) {
    return bound.ack(message);
  }

  /** See {@link MessageQueueRepository#nack(ClaimedMessage, Duration)}. */
  public boolean nack(ClaimedMessage message, Duration delay) {
    return bound.nack(message, delay);
  }

  /** See {@link MessageQueueRepository#extendLease(ClaimedMessage, Duration)}. */
  public Optional<ClaimedMessage> extendLease(ClaimedMessage message, Duration lease) {
    return bound.extendLease(message, lease);
  }

  /** See {@link MessageQueueRepository#extendLeases(Collection, Duration)}. */
  public List<ClaimedMessage> extendLeases(Collection<ClaimedMessage> messages, Duration lease) {
    return bound.extendLeases(messages, lease);
  }

  /** See {@link MessageQueueRepository#fail(ClaimedMessage, Throwable, RetryPolicy)}. */
  public FailureOutcome fail(ClaimedMessage message, Throwable error, RetryPolicy policy) {
    return bound.fail(message, error, policy);
  }

  /** See {@link MessageQueueRepository#republishDeadLetter(long)}. */
  public RepublishOutcome republishDeadLetter(long messageId) {
    return bound.republishDeadLetter(messageId);
  }

  /** See {@link MessageQueueRepository#bindQueue(QueueSpec)}. */
  public void bindQueue(QueueSpec spec) {
    bound.bindQueue(spec);
  }

  /** See {@link MessageQueueRepository#touch(String)}. */
  public boolean touch(String queueName) {
    return bound.touch(queueName);
  }
}
