package dev.msgqueue.internal.consume;

import dev.msgqueue.QueueSpec;
import dev.msgqueue.RetryPolicy;
import dev.msgqueue.internal.sql.ClaimStatements;
import dev.msgqueue.internal.sql.QueueStatements;
import dev.msgqueue.internal.sql.Receipt;
import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.internal.sql.SessionSettings;
import dev.msgqueue.internal.support.QueueContext;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.function.Function;

/**
 * What a subscriber does beyond the public API, on the repository's context: the default mode's take and the release
 * of what it took but never started, acks that only count, batched releases of messages it never started, the
 * redelivery count after a lease-mode claim, and the re-creation of a missing queue with a bounded lock wait.
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

  /**
   * Takes (deletes and returns) up to {@code max} PENDING messages of {@code queue}, lowest id first: the default
   * mode's claim, which needs no ack ({@link ClaimStatements#take}). Reported as a claim.
   *
   * @return the taken messages, in no particular order, each under a receipt whose deadline is its expiry
   */
  public <T> List<T> take(String queue, int max, ClaimStatements.ClaimedRow<T> row) {
    long start = System.nanoTime();
    List<T> taken = ClaimStatements.take(context.statements(), queue, max, row);
    context.report().claimed(queue, taken.size(), System.nanoTime() - start);
    return taken;
  }

  /**
   * Puts taken messages that no handler started back into {@code queue} under their ids, PENDING and claimable at
   * once, with their expiry ({@link ClaimStatements#releaseTaken}).
   *
   * @param receipts the taken messages' receipts (a take's receipt deadline is the message's expiry)
   * @param payloads their payloads' JSON text, in the same order
   * @return the ids put back, in order
   */
  public List<Long> releaseTaken(String queue, List<Receipt> receipts, List<String> payloads) {
    if (receipts.isEmpty()) {
      return List.of();
    }
    Long[] ids = new Long[receipts.size()];
    Long[] expiries = new Long[receipts.size()];
    for (int i = 0; i < ids.length; i++) {
      ids[i] = receipts.get(i).id();
      expiries[i] = ServerTime.epochMillis(receipts.get(i).deadline());
    }
    List<Long> released = new ArrayList<>(
        ClaimStatements.releaseTaken(context.statements(), queue, ids, payloads.toArray(String[]::new), expiries));
    Collections.sort(released);
    return released;
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
