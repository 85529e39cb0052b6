package dev.msgqueue.internal.consume;

import dev.msgqueue.QueueSpec;
import dev.msgqueue.RetryPolicy;
import dev.msgqueue.internal.sql.ClaimStatements;
import dev.msgqueue.internal.sql.QueueStatements;
import dev.msgqueue.internal.sql.Receipt;
import dev.msgqueue.internal.sql.SessionSettings;
import dev.msgqueue.internal.support.QueueContext;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.function.Function;

/**
 * What a subscriber does beyond the public API, on the repository's context: acks that only count, batched releases
 * of messages it never started, the redelivery count after a lease-mode claim, and the re-creation of a missing queue
 * with a bounded lock wait.
 */
public final class Consumption {
  private final QueueContext context;

  public Consumption(QueueContext context) {
    this.context = context;
  }

  /**
   * Acks messages of {@code queue} without returning their ids, so nothing is sent back or mapped per message.
   *
   * @return how many were deleted (fewer than given: some claims were no longer held)
   */
  public int ack(String queue, List<Receipt> receipts) {
    if (receipts.isEmpty()) {
      return 0;
    }
    long start = System.nanoTime();
    int deleted = ClaimStatements.ackCount(context.statements(), receipts);
    context.report().acked(queue, deleted, System.nanoTime() - start);
    return deleted;
  }

  /** Releases claimed, unstarted messages, claimable at once. @return the ids released, in order */
  public List<Long> release(List<Receipt> receipts) {
    if (receipts.isEmpty()) {
      return List.of();
    }
    List<Long> released = new ArrayList<>(ClaimStatements.release(context.statements(), receipts));
    Collections.sort(released);
    return released;
  }

  /**
   * Right after a lease-mode claim of {@code queue}: counts each redelivered message's expired lease (its previous
   * delivery ended without ack, release or fail) as a failed delivery, and moves those that already had
   * {@code maxDeliveries} deliveries to the dead-letter queue instead of delivering them again, so a message that
   * crashes its consumer every time is dead-lettered too. If the process dies between the claim and this call, that
   * one redelivery goes uncounted: the message gets one delivery more than {@code maxDeliveries}, never fewer.
   *
   * @return the messages to handle, in the given order: all but the dead-lettered ones
   */
  public <T> List<T> countRedeliveries(
      String queue, List<T> claimed, Function<? super T, Receipt> receiptOf, RetryPolicy policy) {
    List<Receipt> receipts = new ArrayList<>(claimed.size());
    claimed.forEach(message -> receipts.add(receiptOf.apply(message)));
    Set<Long> deadLettered = Retries.countRedeliveries(context.statements(), queue, receipts, policy);
    if (deadLettered.isEmpty()) {
      return claimed;
    }
    context.report().deadLettered(queue, deadLettered.size());
    List<T> toHandle = new ArrayList<>(claimed.size() - deadLettered.size());
    for (T message : claimed) {
      if (!deadLettered.contains(receiptOf.apply(message).id())) {
        toHandle.add(message);
      }
    }
    return toHandle;
  }

  /** Whether the queue row exists, read without taking or waiting for any lock. */
  public boolean queueExists(String queue) {
    return QueueStatements.queueExists(context.statements(), queue);
  }

  /**
   * Binds the queue in its own transaction whose lock waits are bounded by {@code lockTimeout}: for a consumer
   * re-creating a missing queue, which must not wait for another transaction's uncommitted queue row.
   *
   * @throws dev.msgqueue.MsgQueueTimeoutException if it would have waited longer
   */
  public void bindWithin(QueueSpec spec, Duration lockTimeout) {
    context.statements().transaction(tx -> {
      SessionSettings.limitLockWaits(tx.dsl(), lockTimeout);
      QueueStatements.bind(tx.dsl(), spec);
    });
    context.keepAlives().done(spec.name());
  }
}
