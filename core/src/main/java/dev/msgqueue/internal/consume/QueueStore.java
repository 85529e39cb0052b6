package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.FailureOutcome;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.RetryPolicy;
import dev.msgqueue.internal.support.QueueContext;
import java.time.Duration;
import java.util.List;

/**
 * The {@link ConsumerStore} of a subscriber: its queue and mode over the repository's {@link Consumption}, the route
 * the public operations take too.
 */
public final class QueueStore implements ConsumerStore {
  /** The longest a re-creating bind of a missing queue waits for a lock before trying again next interval. */
  private static final Duration BIND_LOCK_WAIT = Duration.ofSeconds(1);

  private final QueueContext context;
  private final Consumption consumption;
  private final QueueSpec queue;
  private final Duration lease;
  private final RetryPolicy retryPolicy;

  /**
   * @param lease the lease (lease mode), or {@code null} for the at-most-once mode
   * @param retryPolicy lease mode: what a failed handler's message gets; {@code null} for none
   */
  public QueueStore(QueueContext context, ClaimedMessages messages, QueueSpec queue, Duration lease,
      RetryPolicy retryPolicy) {
    this.context = context;
    this.consumption = new Consumption(context, messages);
    this.queue = queue;
    this.lease = lease;
    this.retryPolicy = retryPolicy;
  }

  @Override
  public String queueName() {
    return queue.name();
  }

  @Override
  public void bindQueue() {
    consumption.bind(queue);
  }

  @Override
  public List<ClaimedMessage> claim(int max) {
    return lease != null ? consumption.claim(queue.name(), max, lease) : consumption.take(queue.name(), max);
  }

  @Override
  public boolean committed(long transactionId) {
    return consumption.committed(transactionId);
  }

  @Override
  public List<ClaimedMessage> countRedeliveries(List<ClaimedMessage> claimed) {
    return consumption.countRedeliveries(queue.name(), claimed, retryPolicy);
  }

  @Override
  public int ack(List<ClaimedMessage> handled) {
    return consumption.ackCount(queue.name(), handled);
  }

  @Override
  public HandBack handBack(List<ClaimedMessage> claimed) {
    if (lease != null) {
      return () -> consumption.release(claimed).size(); // receipt-checked: a repeat releases nothing twice
    }
    return consumption.putBack(queue, claimed);
  }

  @Override
  public List<ClaimedMessage> extendLeases(List<ClaimedMessage> held) {
    return consumption.extendLeases(held, lease);
  }

  @Override
  public FailureOutcome fail(ClaimedMessage message, Throwable error) {
    return consumption.fail(message, error, retryPolicy);
  }

  @Override
  public boolean keepAlive() {
    if (consumption.keepAlive(queue.name()) || consumption.queueExists(queue.name())) {
      return false; // written, or its row is busy: another transaction is writing it, so it exists
    }
    Duration lockTimeout = context.config().lockTimeout();
    consumption.bindWithin(queue, BIND_LOCK_WAIT.compareTo(lockTimeout) < 0 ? BIND_LOCK_WAIT : lockTimeout);
    return true;
  }

  @Override
  public void handled(long nanos, boolean failed) {
    context.report().handled(queue.name(), nanos, failed);
  }

  @Override
  public void settledByItsHandler() {
    // No ack statement ran, so there is no ack time to report.
    context.report().acked(queue.name(), 1, 0);
  }

  @Override
  public void perhapsLost(int messages) {
    context.report().takeUnresolved(queue.name(), messages);
  }
}
