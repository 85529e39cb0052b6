package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.FailureOutcome;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.RetryPolicy;
import dev.msgqueue.internal.sql.ClaimStatements;
import dev.msgqueue.internal.sql.PublishStatements;
import dev.msgqueue.internal.sql.QueueStatements;
import dev.msgqueue.internal.sql.Receipt;
import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.internal.sql.SessionSettings;
import dev.msgqueue.internal.support.QueueContext;
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
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.jooq.exception.DataAccessException;

/**
 * Every consuming act on the database, each by one route: the public operations ({@code TransactionalQueue}, and the
 * repository through it) and the subscribers' store ({@link QueueStore}) both call these, on a context's statements.
 * Arguments are validated by the callers; each act reports its events.
 */
public final class Consumption {
  private final QueueContext context;
  private final ClaimedMessages messages;

  public Consumption(QueueContext context, ClaimedMessages messages) {
    this.context = context;
    this.messages = messages;
  }

  /**
   * Claims up to {@code max} messages of {@code queue} ({@link ClaimStatements#claim}): under a lease, or without one
   * ({@code null}) for good.
   *
   * @return the claimed messages, in id order
   */
  public List<ClaimedMessage> claim(String queue, int max, Duration lease) {
    long start = System.nanoTime();
    List<ClaimedMessage> claimed = ClaimStatements.claim(context.statements(), queue, max, lease,
        (receipt, payload) -> messages.of(queue, payload, receipt));
    claimed.sort(Comparator.comparingLong(ClaimedMessage::id));
    int redelivered = 0;
    for (ClaimedMessage message : claimed) {
      if (messages.receiptOf(message).redelivered()) {
        redelivered++;
      }
    }
    if (redelivered > 0) {
      context.report().redelivered(queue, redelivered);
    }
    context.report().claimed(queue, claimed.size(), System.nanoTime() - start);
    return claimed;
  }

  /**
   * Takes (deletes and returns) up to {@code max} PENDING messages of {@code queue}, lowest id first, in a
   * transaction of its own: the at-most-once claim, which needs no ack ({@link ClaimStatements#take}). Reported as a
   * claim.
   *
   * @return the taken messages, in no particular order, each under a receipt whose deadline is its expiry
   * @throws UnansweredCommit if the take's commit went unanswered: whether its messages were taken is not known yet
   */
  public List<ClaimedMessage> take(String queue, int max) {
    long start = System.nanoTime();
    AtomicReference<ClaimStatements.Taken<ClaimedMessage>> returned = new AtomicReference<>();
    try {
      context.statements().transaction(tx -> returned.set(ClaimStatements.take(tx.dsl(), queue, max,
          (receipt, payload) -> messages.of(queue, payload, receipt))));
    } catch (RuntimeException e) {
      ClaimStatements.Taken<ClaimedMessage> taken = returned.get();
      if (taken != null && !taken.messages().isEmpty()) {
        throw new UnansweredCommit(queue, taken.messages(), taken.transactionId(), e);
      }
      throw e;
    }
    List<ClaimedMessage> taken = returned.get().messages();
    context.report().claimed(queue, taken.size(), System.nanoTime() - start);
    return taken;
  }

  /**
   * Whether the transaction {@code transactionId} committed, asked on a connection of the repository's own.
   *
   * @throws IllegalStateException while the server still runs it, or if it is too old for the server to know
   */
  public boolean committed(long transactionId) {
    String status = ClaimStatements.transactionStatus(context.own(), transactionId);
    if ("committed".equals(status)) {
      return true;
    }
    if ("aborted".equals(status)) {
      return false;
    }
    throw new IllegalStateException("transaction " + transactionId + " is "
        + (status == null ? "too old for the server to tell its outcome" : status));
  }

  /**
   * Acks claimed messages: deletes those whose receipt still matches.
   *
   * @return the ids deleted, in order
   */
  public List<Long> ack(Collection<ClaimedMessage> claimed) {
    long start = System.nanoTime();
    List<Long> acked = new ArrayList<>(ClaimStatements.ack(context.statements(), receipts(claimed)));
    Collections.sort(acked);
    AckReport.report(context.report(), claimed, acked, System.nanoTime() - start);
    return acked;
  }

  /**
   * {@link #ack} of messages of {@code queue}, without returning their ids, so nothing is sent back or mapped per
   * message.
   *
   * @return how many were deleted (fewer than given: some claims were no longer held)
   */
  public int ackCount(String queue, List<ClaimedMessage> claimed) {
    if (claimed.isEmpty()) {
      return 0;
    }
    long start = System.nanoTime();
    int deleted = ClaimStatements.ackCount(context.statements(), receipts(claimed));
    context.report().acked(queue, deleted, System.nanoTime() - start);
    return deleted;
  }

  /** Releases a claimed message, claimable again after {@code delay}. @return whether it was still held */
  public boolean release(ClaimedMessage message, Duration delay) {
    boolean released = ClaimStatements.release(context.statements(), messages.receiptOf(message), delay) > 0;
    if (released) {
      context.report().released(message.queueName());
    }
    return released;
  }

  /** Releases claimed, unstarted messages (lease mode), claimable at once. @return the ids released, in order */
  public List<Long> release(List<ClaimedMessage> claimed) {
    if (claimed.isEmpty()) {
      return List.of();
    }
    List<Long> released = new ArrayList<>(ClaimStatements.release(context.statements(), receipts(claimed)));
    Collections.sort(released);
    return released;
  }

  /**
   * Puts taken messages that no handler started back into {@code spec}'s queue under their ids, PENDING and
   * claimable at once, with their expiry ({@link ClaimStatements#releaseTaken}), as an act that may be repeated: an
   * attempt after one whose commit went unanswered first asks whether that one committed, and puts nothing back
   * again if it did (the messages may have been taken by another consumer since). A missing queue is bound again.
   */
  public HandBack putBack(QueueSpec spec, List<ClaimedMessage> taken) {
    return new PutBack(spec, taken);
  }

  /** Extends the lease of a held message. @return the message under its new receipt, or empty if no longer held */
  public Optional<ClaimedMessage> extendLease(ClaimedMessage message, Duration lease) {
    Receipt receipt = messages.receiptOf(message);
    return ClaimStatements.extendLease(context.statements(), receipt, lease)
        .map(deadline -> messages.of(message.queueName(), message.payloadJsonb(), receipt.extendedTo(deadline)));
  }

  /** Extends the leases of held messages. @return those still held, under their new receipts, in id order */
  public List<ClaimedMessage> extendLeases(Collection<ClaimedMessage> held, Duration lease) {
    if (held.isEmpty()) {
      return List.of();
    }
    Map<Long, LocalDateTime> deadlines = new HashMap<>();
    ClaimStatements.extendLeases(context.statements(), receipts(held), lease)
        .forEach(row -> deadlines.put(row.value1(), row.value2()));
    List<ClaimedMessage> extended = new ArrayList<>(deadlines.size());
    for (ClaimedMessage message : held) {
      LocalDateTime deadline = deadlines.remove(message.id());
      if (deadline != null) {
        extended.add(messages.of(message.queueName(), message.payloadJsonb(),
            messages.receiptOf(message).extendedTo(deadline)));
      }
    }
    extended.sort(Comparator.comparingLong(ClaimedMessage::id));
    return extended;
  }

  /** Settles a held message whose handler failed, by {@code policy} ({@link Retries#fail}). */
  public FailureOutcome fail(ClaimedMessage message, Throwable error, RetryPolicy policy) {
    FailureOutcome outcome = Retries.fail(context.statements(), message.queueName(), messages.receiptOf(message),
        error, policy, policy::backoff);
    if (outcome == FailureOutcome.DEAD_LETTERED) {
      context.report().deadLettered(message.queueName(), 1);
    }
    return outcome;
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
  public List<ClaimedMessage> countRedeliveries(String queue, List<ClaimedMessage> claimed, RetryPolicy policy) {
    Set<Long> deadLettered = Retries.countRedeliveries(context.statements(), queue, receipts(claimed), policy);
    if (deadLettered.isEmpty()) {
      return claimed;
    }
    context.report().deadLettered(queue, deadLettered.size());
    List<ClaimedMessage> toHandle = new ArrayList<>(claimed.size() - deadLettered.size());
    for (ClaimedMessage message : claimed) {
      if (!deadLettered.contains(message.id())) {
        toHandle.add(message);
      }
    }
    return toHandle;
  }

  /** Creates the queue or updates its attributes to {@code spec}, and marks it active. */
  public void bind(QueueSpec spec) {
    QueueStatements.bind(context.statements(), spec);
    context.keepAlives().done(spec.name());
  }

  /** Marks the queue active unless its row is busy. @return whether {@code "lastActive"} was written */
  public boolean keepAlive(String queue) {
    boolean written = QueueStatements.keepAlive(context.statements(), queue) > 0;
    if (written) {
      context.keepAlives().done(queue);
    }
    return written;
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

  private List<Receipt> receipts(Collection<ClaimedMessage> claimed) {
    List<Receipt> receipts = new ArrayList<>(claimed.size());
    for (ClaimedMessage message : claimed) {
      receipts.add(messages.receiptOf(message));
    }
    return receipts;
  }

  /** A put-back whose attempts know about each other; see {@link #putBack}. */
  private final class PutBack implements HandBack {
    private final QueueSpec spec;
    private final Long[] ids;
    private final String[] payloads;
    private final Long[] expiries;
    /** The transaction of an earlier attempt that put messages back but whose commit may have gone unanswered. */
    private long unansweredTransaction;

    PutBack(QueueSpec spec, List<ClaimedMessage> taken) {
      this.spec = spec;
      this.ids = new Long[taken.size()];
      this.payloads = new String[taken.size()];
      this.expiries = new Long[taken.size()];
      for (int i = 0; i < ids.length; i++) {
        Receipt receipt = messages.receiptOf(taken.get(i));
        ids[i] = receipt.id();
        payloads[i] = taken.get(i).payload();
        expiries[i] = ServerTime.epochMillis(receipt.deadline()); // a take's receipt deadline is the expiry
      }
    }

    @Override
    public int attempt() {
      if (ids.length == 0) {
        return 0;
      }
      if (unansweredTransaction != 0) {
        if (committed(unansweredTransaction)) {
          unansweredTransaction = 0;
          return ids.length;
        }
        unansweredTransaction = 0;
      }
      try {
        return putBackOnce();
      } catch (DataAccessException e) {
        if (!PublishStatements.isMissingQueue(e)) {
          throw e;
        }
        // The queue row is gone (deleted by hand, or reaped while the subscriber was closing): bind it again, then
        // put the messages back.
        bind(spec);
        return putBackOnce();
      }
    }

    private int putBackOnce() {
      AtomicReference<ClaimStatements.Taken<Long>> returned = new AtomicReference<>();
      try {
        context.statements().transaction(tx -> {
          ClaimStatements.Taken<Long> put = ClaimStatements.releaseTaken(tx.dsl(), spec.name(), ids, payloads,
              expiries);
          returned.set(put);
          unansweredTransaction = put.transactionId();
        });
      } catch (RuntimeException e) {
        if (returned.get() == null) {
          unansweredTransaction = 0; // the insert itself failed: nothing committed
        }
        throw e;
      }
      unansweredTransaction = 0;
      return returned.get().messages().size();
    }
  }
}
