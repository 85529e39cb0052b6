package dev.msgqueue;

import dev.msgqueue.internal.consume.ConsumerStore;
import dev.msgqueue.internal.consume.Consumption;
import dev.msgqueue.internal.sql.PublishStatements;
import dev.msgqueue.internal.sql.Receipt;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.jooq.exception.DataAccessException;

/**
 * The one place the consuming pipeline reaches the repository: one queue, in one mode, through its statements. In the
 * default mode a claim takes the messages (deletes them as it returns them) and a release puts them back; in lease
 * mode a claim marks them ASSIGNED under a lease, an ack deletes them and a release makes them PENDING again.
 */
final class SubscriberStore implements ConsumerStore {
  /** The longest a re-creating bind of a missing queue waits for a lock before trying again next interval. */
  private static final Duration BIND_LOCK_WAIT = Duration.ofSeconds(1);

  private final MsgQueueRepository repository;
  private final Consumption consumption;
  private final QueueSpec queue;
  private final Duration lease;
  private final RetryPolicy retryPolicy;

  SubscriberStore(MsgQueueRepository repository, QueueSpec queue, Duration lease, RetryPolicy retryPolicy) {
    this.repository = repository;
    this.consumption = new Consumption(repository.context());
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
    repository.bindQueue(queue);
  }

  @Override
  public List<ClaimedMessage> claim(int max) {
    if (lease != null) {
      return repository.claim(queue.name(), max, lease);
    }
    return consumption.take(queue.name(), max,
        (receipt, payload) -> new ClaimedMessage(queue.name(), payload, receipt));
  }

  @Override
  public List<ClaimedMessage> countRedeliveries(List<ClaimedMessage> claimed) {
    return consumption.countRedeliveries(queue.name(), claimed, ClaimedMessage::receipt, retryPolicy);
  }

  @Override
  public int ack(List<ClaimedMessage> receipts) {
    return consumption.ack(queue.name(), ClaimedMessage.receipts(receipts));
  }

  @Override
  public List<Long> release(List<ClaimedMessage> receipts) {
    if (lease != null) {
      return consumption.release(ClaimedMessage.receipts(receipts));
    }
    List<Receipt> taken = ClaimedMessage.receipts(receipts);
    List<String> payloads = new ArrayList<>(receipts.size());
    receipts.forEach(message -> payloads.add(message.payload()));
    try {
      return consumption.releaseTaken(queue.name(), taken, payloads);
    } catch (DataAccessException e) {
      if (!PublishStatements.isMissingQueue(e)) {
        throw e;
      }
      // The queue row is gone (deleted by hand, or reaped while this subscriber was closing): bind it again, then
      // put the messages back.
      repository.bindQueue(queue);
      return consumption.releaseTaken(queue.name(), taken, payloads);
    }
  }

  @Override
  public List<ClaimedMessage> extendLeases(List<ClaimedMessage> receipts) {
    return repository.extendLeases(receipts, lease);
  }

  @Override
  public FailureOutcome fail(ClaimedMessage message, Throwable error) {
    return repository.fail(message, error, retryPolicy);
  }

  @Override
  public boolean keepAlive() {
    if (repository.keepAlive(queue.name()) || consumption.queueExists(queue.name())) {
      return false; // written, or its row is busy: another transaction is writing it, so it exists
    }
    Duration lockTimeout = repository.config().lockTimeout();
    consumption.bindWithin(queue, BIND_LOCK_WAIT.compareTo(lockTimeout) < 0 ? BIND_LOCK_WAIT : lockTimeout);
    return true;
  }

  @Override
  public void handled(long nanos, boolean failed) {
    repository.context().report().handled(queue.name(), nanos, failed);
  }

  @Override
  public void settledByItsHandler() {
    // No ack statement ran, so there is no ack time to report.
    repository.context().report().acked(queue.name(), 1, 0);
  }
}
