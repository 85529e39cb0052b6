package dev.msgqueue;

import dev.msgqueue.internal.consume.Consumption;
import dev.msgqueue.internal.publish.Payloads;
import dev.msgqueue.internal.publish.PublishCoalescer;
import dev.msgqueue.internal.publish.Publisher;
import dev.msgqueue.internal.sql.RetryStatements;
import dev.msgqueue.internal.support.Arguments;
import dev.msgqueue.internal.support.QueueContext;
import java.sql.Connection;
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
 * wake-up coalescing. The repository runs the same {@link QueueOperations} on its own context.
 */
public final class TransactionalQueue implements QueueOperations {
  private final QueueContext context;
  private final Payloads payloads;
  private final Publisher publisher;
  /** Group commit of the repository's own autocommit publishes; {@code null} when off, and in views. */
  private final PublishCoalescer coalescer;
  private final Consumption consumption;

  TransactionalQueue(QueueContext context, Payloads payloads, Publisher publisher, PublishCoalescer coalescer) {
    this.context = context;
    this.consumption = new Consumption(context, ClaimedMessageAccess.INSTANCE);
    this.payloads = payloads;
    this.publisher = publisher;
    this.coalescer = coalescer;
  }

  @Override
  public long publish(QueueSpec spec, String json) {
    return publish(spec, json, PublishOptions.defaults());
  }

  @Override
  public long publish(QueueSpec spec, String json, PublishOptions options) {
    JSONB payload = payloads.validate(json);
    return publishOne(spec, payload, options);
  }

  @Override
  public long publish(QueueSpec spec, JSONB payload) {
    return publish(spec, payload, PublishOptions.defaults());
  }

  @Override
  public long publish(QueueSpec spec, JSONB payload, PublishOptions options) {
    JSONB validated = payloads.validate(payload);
    return publishOne(spec, validated, options);
  }

  @Override
  public List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads) {
    return publishBatch(spec, jsonPayloads, PublishOptions.defaults());
  }

  @Override
  public List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads, PublishOptions options) {
    List<JSONB> validated = payloads.validateAll(jsonPayloads, MAX_BATCH_SIZE);
    Duration ttl = requireValid(spec, options);
    return validated.isEmpty() ? List.of() : publishValidated(spec, validated, options.delay(), ttl);
  }

  private long publishOne(QueueSpec spec, JSONB payload, PublishOptions options) {
    Duration ttl = requireValid(spec, options);
    // Only in autocommit: a publish on a connection with autocommit off belongs to that connection's transaction.
    if (coalescer != null && context.statements().connectionResult(Connection::getAutoCommit)) {
      long start = System.nanoTime();
      long id = coalescer.publish(spec, payload, options.delay(), ttl);
      context.report().published(spec.name(), 1, System.nanoTime() - start);
      return id;
    }
    return publishValidated(spec, List.of(payload), options.delay(), ttl).get(0);
  }

  private List<Long> publishValidated(QueueSpec spec, List<JSONB> validated, Duration delay, Duration ttl) {
    long start = System.nanoTime();
    List<Long> ids = publisher.publish(context.statements(), spec, validated, delay, ttl);
    context.report().published(spec.name(), ids.size(), System.nanoTime() - start);
    return ids;
  }

  @Override
  public List<ClaimedMessage> claim(String queueName, int max) {
    return claimValidated(queueName, max, null);
  }

  @Override
  public List<ClaimedMessage> claim(String queueName, int max, Duration lease) {
    return claimValidated(queueName, max, requireValidLease(lease));
  }

  /** @throws IllegalArgumentException unless {@code lease} is in [{@link #MIN_LEASE}, a year] */
  static Duration requireValidLease(Duration lease) {
    return Arguments.requireWithin(lease, "lease", MIN_LEASE, MsgQueueConfig.MAX_MESSAGE_LIFETIME);
  }

  private List<ClaimedMessage> claimValidated(String queueName, int max, Duration lease) {
    QueueSpec.requireValidName(queueName);
    Arguments.requireWithin(max, "max", 1, MAX_BATCH_SIZE);
    return consumption.claim(queueName, max, lease);
  }

  @Override
  public List<Long> ack(Collection<ClaimedMessage> messages) {
    Arguments.requireNoNulls(messages, "messages");
    return messages.isEmpty() ? List.of() : consumption.ack(messages);
  }

  @Override
  public boolean ack(ClaimedMessage message) {
    return !ack(List.of(Arguments.requireNonNull(message, "message"))).isEmpty();
  }

  @Override
  public boolean release(ClaimedMessage message, Duration delay) {
    Arguments.requireNonNull(message, "message");
    Arguments.requireWithin(delay, "delay", Duration.ZERO, MsgQueueConfig.MAX_MESSAGE_LIFETIME);
    return consumption.release(message, delay);
  }

  @Override
  public Optional<ClaimedMessage> extendLease(ClaimedMessage message, Duration lease) {
    Arguments.requireNonNull(message, "message");
    requireValidLease(lease);
    return consumption.extendLease(message, lease);
  }

  @Override
  public List<ClaimedMessage> extendLeases(Collection<ClaimedMessage> messages, Duration lease) {
    requireMessages(messages);
    requireValidLease(lease);
    return consumption.extendLeases(messages, lease);
  }

  @Override
  public FailureOutcome fail(ClaimedMessage message, Throwable error, RetryPolicy policy) {
    Arguments.requireNonNull(message, "message");
    Arguments.requireNonNull(error, "error");
    Arguments.requireNonNull(policy, "policy");
    if (message.queueName().equals(policy.deadLetterQueue())) {
      throw new IllegalArgumentException("message " + message.id() + " is in the dead-letter queue \""
          + policy.deadLetterQueue() + "\" already: a dead-letter queue's consumer needs a policy naming another one");
    }
    return consumption.fail(message, error, policy);
  }

  @Override
  public RepublishOutcome republishDeadLetter(long messageId) {
    Duration ttl = context.config().defaultMessageTtl();
    if (RetryStatements.republish(context.statements(), messageId, ttl).isPresent()) {
      return RepublishOutcome.REPUBLISHED;
    }
    return RetryStatements.whyNotRepublished(context.statements(), messageId);
  }

  @Override
  public void bindQueue(QueueSpec spec) {
    consumption.bind(Arguments.requireNonNull(spec, "spec"));
  }

  @Override
  public boolean keepAlive(String queueName) {
    return consumption.keepAlive(QueueSpec.requireValidName(queueName));
  }

  /** Validates a batch of claimed messages before any SQL. */
  private static void requireMessages(Collection<ClaimedMessage> messages) {
    Arguments.requireNoNulls(messages, "messages");
    if (messages.size() > MAX_BATCH_SIZE) {
      throw new IllegalArgumentException(
          "a batch holds at most " + MAX_BATCH_SIZE + " messages, was " + messages.size());
    }
  }

  private Duration requireValid(QueueSpec spec, PublishOptions options) {
    Arguments.requireNonNull(spec, "queue spec");
    Arguments.requireNonNull(options, "publish options");
    return options.effectiveTtl(context.config());
  }
}
