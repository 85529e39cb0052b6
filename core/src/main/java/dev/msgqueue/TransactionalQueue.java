package dev.msgqueue;

import dev.msgqueue.internal.consume.AckReport;
import dev.msgqueue.internal.consume.Retries;
import dev.msgqueue.internal.publish.Payloads;
import dev.msgqueue.internal.publish.PublishCoalescer;
import dev.msgqueue.internal.publish.Publisher;
import dev.msgqueue.internal.sql.ClaimStatements;
import dev.msgqueue.internal.sql.QueueStatements;
import dev.msgqueue.internal.sql.RetryStatements;
import dev.msgqueue.internal.support.Arguments;
import dev.msgqueue.internal.support.QueueContext;
import java.sql.Connection;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import org.jooq.JSONB;

/**
 * The operations of a {@link MsgQueueRepository} that belong in a caller's transaction, run on that
 * transaction's context: what they write commits or rolls back with it, and none of them commits, rolls back or
 * aborts it. Maintenance ({@link MsgQueueRepository#reapIdleQueues()},
 * {@link MsgQueueRepository#cleanUpExpiredMessages()}) runs its own transactions and is not offered here.
 *
 * <p>Obtain one with {@link MsgQueueRepository#inTransaction(org.jooq.DSLContext)}; it is as cheap as the
 * context it wraps, so take one per transaction. It shares the repository's configuration, keep-alive throttle and
 * wake-up coalescing. Each method has the contract of the repository method of the same name: the repository runs
 * the same operations on a view of its own context.
 */
public final class TransactionalQueue {
  /** See {@link MsgQueueRepository#MIN_LEASE}. */
  static final Duration MIN_LEASE = Duration.ofMillis(1);
  /** See {@link MsgQueueRepository#MAX_BATCH_SIZE}. */
  static final int MAX_BATCH_SIZE = 10_000;

  private final QueueContext context;
  private final Payloads payloads;
  private final Publisher publisher;
  /** Group commit of the repository's own autocommit publishes; {@code null} when off, and in views. */
  private final PublishCoalescer coalescer;

  TransactionalQueue(QueueContext context, Payloads payloads, Publisher publisher, PublishCoalescer coalescer) {
    this.context = context;
    this.payloads = payloads;
    this.publisher = publisher;
    this.coalescer = coalescer;
  }

  /** See {@link MsgQueueRepository#publish(QueueSpec, String)}. */
  public long publish(QueueSpec spec, String json) {
    return publish(spec, json, PublishOptions.defaults());
  }

  /** See {@link MsgQueueRepository#publish(QueueSpec, String, PublishOptions)}. */
  public long publish(QueueSpec spec, String json, PublishOptions options) {
    JSONB payload = payloads.validate(json);
    return publishOne(spec, payload, options);
  }

  /** See {@link MsgQueueRepository#publish(QueueSpec, JSONB)}. */
  public long publish(QueueSpec spec, JSONB payload) {
    return publish(spec, payload, PublishOptions.defaults());
  }

  /** See {@link MsgQueueRepository#publish(QueueSpec, JSONB, PublishOptions)}. */
  public long publish(QueueSpec spec, JSONB payload, PublishOptions options) {
    JSONB validated = payloads.validate(payload);
    return publishOne(spec, validated, options);
  }

  /** See {@link MsgQueueRepository#publishBatch(QueueSpec, List)}. */
  public List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads) {
    return publishBatch(spec, jsonPayloads, PublishOptions.defaults());
  }

  /** See {@link MsgQueueRepository#publishBatch(QueueSpec, List, PublishOptions)}. */
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

  /** See {@link MsgQueueRepository#claim(String, int)}. */
  public List<ClaimedMessage> claim(String queueName, int max) {
    return claimValidated(queueName, max, null);
  }

  /** See {@link MsgQueueRepository#claim(String, int, Duration)}. */
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
    long start = System.nanoTime();
    List<ClaimedMessage> claimed = ClaimStatements.claim(context.statements(), queueName, max, lease,
        (receipt, payload) -> new ClaimedMessage(queueName, payload, receipt));
    claimed.sort(Comparator.comparingLong(ClaimedMessage::id));
    long redelivered = claimed.stream().filter(ClaimedMessage::redelivered).count();
    if (redelivered > 0) {
      context.report().redelivered(queueName, (int) redelivered);
    }
    context.report().claimed(queueName, claimed.size(), System.nanoTime() - start);
    return claimed;
  }

  /** See {@link MsgQueueRepository#ack(Collection)}. */
  public List<Long> ack(Collection<ClaimedMessage> messages) {
    Arguments.requireNoNulls(messages, "messages");
    if (messages.isEmpty()) {
      return List.of();
    }
    long start = System.nanoTime();
    List<Long> acked =
        new ArrayList<>(ClaimStatements.ack(context.statements(), ClaimedMessage.receipts(messages)));
    Collections.sort(acked);
    AckReport.report(context.report(), messages, acked, System.nanoTime() - start);
    return acked;
  }

  /** See {@link MsgQueueRepository#ack(ClaimedMessage)}. */
  public boolean ack(ClaimedMessage message) {
    return !ack(List.of(Arguments.requireNonNull(message, "message"))).isEmpty();
  }

  /** See {@link MsgQueueRepository#release(ClaimedMessage, Duration)}. */
  public boolean release(ClaimedMessage message, Duration delay) {
    Arguments.requireNonNull(message, "message");
    Arguments.requireWithin(delay, "delay", Duration.ZERO, MsgQueueConfig.MAX_MESSAGE_LIFETIME);
    boolean released = ClaimStatements.release(context.statements(), message.receipt(), delay) > 0;
    if (released) {
      context.report().released(message.queueName());
    }
    return released;
  }

  /** See {@link MsgQueueRepository#extendLease(ClaimedMessage, Duration)}. */
  public Optional<ClaimedMessage> extendLease(ClaimedMessage message, Duration lease) {
    Arguments.requireNonNull(message, "message");
    requireValidLease(lease);
    return ClaimStatements.extendLease(context.statements(), message.receipt(), lease)
        .map(deadline -> message.withReceipt(message.receipt().extendedTo(deadline)));
  }

  /** See {@link MsgQueueRepository#extendLeases(Collection, Duration)}. */
  public List<ClaimedMessage> extendLeases(Collection<ClaimedMessage> messages, Duration lease) {
    requireMessages(messages);
    requireValidLease(lease);
    if (messages.isEmpty()) {
      return List.of();
    }
    Map<Long, LocalDateTime> deadlines = new HashMap<>();
    ClaimStatements.extendLeases(context.statements(), ClaimedMessage.receipts(messages), lease)
        .forEach(row -> deadlines.put(row.value1(), row.value2()));
    List<ClaimedMessage> extended = new ArrayList<>(deadlines.size());
    for (ClaimedMessage message : messages) {
      LocalDateTime deadline = deadlines.remove(message.id());
      if (deadline != null) {
        extended.add(message.withReceipt(message.receipt().extendedTo(deadline)));
      }
    }
    extended.sort(Comparator.comparingLong(ClaimedMessage::id));
    return extended;
  }

  /** See {@link MsgQueueRepository#fail(ClaimedMessage, Throwable, RetryPolicy)}. */
  public FailureOutcome fail(ClaimedMessage message, Throwable error, RetryPolicy policy) {
    Arguments.requireNonNull(message, "message");
    Arguments.requireNonNull(error, "error");
    Arguments.requireNonNull(policy, "policy");
    if (message.queueName().equals(policy.deadLetterQueue())) {
      throw new IllegalArgumentException("message " + message.id() + " is in the dead-letter queue \""
          + policy.deadLetterQueue() + "\" already: a dead-letter queue's consumer needs a policy naming another one");
    }
    FailureOutcome outcome = Retries.fail(context.statements(), message.queueName(), message.receipt(), error, policy,
        failed -> policy.backoff(failed, () -> ThreadLocalRandom.current().nextDouble()));
    if (outcome == FailureOutcome.DEAD_LETTERED) {
      context.report().deadLettered(message.queueName(), 1);
    }
    return outcome;
  }

  /** See {@link MsgQueueRepository#republishDeadLetter(long)}. */
  public RepublishOutcome republishDeadLetter(long messageId) {
    Duration ttl = context.config().defaultMessageTtl();
    if (RetryStatements.republish(context.statements(), messageId, ttl).isPresent()) {
      return RepublishOutcome.REPUBLISHED;
    }
    return RetryStatements.whyNotRepublished(context.statements(), messageId);
  }

  /** See {@link MsgQueueRepository#bindQueue(QueueSpec)}. */
  public void bindQueue(QueueSpec spec) {
    Arguments.requireNonNull(spec, "spec");
    QueueStatements.bind(context.statements(), spec);
    context.keepAlives().done(spec.name());
  }

  /** See {@link MsgQueueRepository#keepAlive(String)}. */
  public boolean keepAlive(String queueName) {
    QueueSpec.requireValidName(queueName);
    boolean written = QueueStatements.keepAlive(context.statements(), queueName) > 0;
    if (written) {
      context.keepAlives().done(queueName);
    }
    return written;
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
