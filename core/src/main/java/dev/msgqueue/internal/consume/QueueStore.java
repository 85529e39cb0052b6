package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.ConsumeMode;
import dev.msgqueue.FailureOutcome;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.RetryPolicy;
import dev.msgqueue.internal.sql.HeldStatements;
import dev.msgqueue.internal.sql.Receipt;
import dev.msgqueue.internal.sql.RetryStatements;
import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.internal.support.QueueContext;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jooq.DSLContext;

/**
 * The {@link ConsumerStore} of a subscriber: its queue and mode over the repository's {@link Consumption}, the route
 * the public operations take too.
 */
public final class QueueStore implements ConsumerStore {
  /** The longest a re-creating bind of a missing queue waits for a lock before trying again next interval. */
  private static final Duration BIND_LOCK_WAIT = Duration.ofSeconds(1);
  /** How long the check of a transaction that may be gone waits for the server's answer. */
  private static final int ENDED_CHECK_SECONDS = 2;

  private final QueueContext context;
  private final Consumption consumption;
  private final ClaimedMessages messages;
  private final QueueSpec queue;
  private final Duration lease;
  private final RetryPolicy retryPolicy;
  private final Duration transactionTimeout;

  /**
   * @param mode the subscriber's mode
   * @param lease the lease (lease mode), else ignored
   * @param retryPolicy what a failed handler's message gets (held-transaction mode: required; lease mode:
   *     {@code null} for none)
   * @param transactionTimeout the longest a held transaction lasts (held-transaction mode), else ignored
   */
  public QueueStore(QueueContext context, ClaimedMessages messages, QueueSpec queue, ConsumeMode mode,
      Duration lease, RetryPolicy retryPolicy, Duration transactionTimeout) {
    this.context = context;
    this.messages = messages;
    this.consumption = new Consumption(context, messages);
    this.queue = queue;
    this.lease = mode == ConsumeMode.LEASE ? lease : null;
    this.retryPolicy = retryPolicy;
    this.transactionTimeout = transactionTimeout;
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
  public <T> T inHeldTransaction(HeldWork<T> work) {
    return context.statements().transactionResult(configuration -> work.run(new Held(configuration.dsl())));
  }

  @Override
  public Map<Long, Integer> countEndedDeliveries(List<Long> ids) {
    Map<Long, Integer> failed = new HashMap<>();
    RetryStatements.countEndedDeliveries(context.own(), ids, "the transaction of a delivery ended without commit"
            + " (its consumer died, hung past the transaction timeout or lost its connection)")
        .forEach(row -> failed.put(row.value1(), row.value2()));
    context.report().redelivered(queue.name(), ids.size());
    return failed;
  }

  @Override
  public int maxDeliveries() {
    return retryPolicy == null ? 0 : retryPolicy.maxDeliveries();
  }

  /** A held transaction of this store's queue. */
  private final class Held implements HeldTransaction {
    private final DSLContext tx;

    Held(DSLContext tx) {
      this.tx = tx;
    }

    @Override
    public List<LockedMessage> lock(int max) {
      long start = System.nanoTime();
      List<LockedMessage> locked = locked(HeldStatements.lock(tx, queue.name(), max, transactionTimeout));
      context.report().claimed(queue.name(), locked.size(), System.nanoTime() - start);
      return locked;
    }

    @Override
    public List<LockedMessage> lockAgain(List<Long> ids) {
      return locked(HeldStatements.lockAgain(tx, queue.name(), ids));
    }

    @Override
    public void quarantine(List<Long> ids) {
      HeldStatements.quarantine(tx, ids);
    }

    @Override
    public LockedMessage lockQuarantined() {
      return HeldStatements.lockQuarantined(tx, queue.name()).map(row -> locked(List.of(row)).get(0)).orElse(null);
    }

    @Override
    public LockedMessage lockQuarantined(List<Long> ids) {
      return HeldStatements.lockQuarantined(tx, queue.name(), ids).map(row -> locked(List.of(row)).get(0))
          .orElse(null);
    }

    private List<LockedMessage> locked(List<HeldStatements.Locked> rows) {
      List<LockedMessage> locked = new ArrayList<>(rows.size());
      for (HeldStatements.Locked row : rows) {
        // The receipt's deadline is the expiry, as a take's: no ack or release applies to a held message.
        Receipt receipt = new Receipt(row.id(), ServerTime.fromEpochMillis(row.expiresAtMillis()),
            row.endedWithoutCommit());
        locked.add(new LockedMessage(messages.of(queue.name(), row.payload(), receipt), row.endedWithoutCommit()));
      }
      return locked;
    }

    @Override
    public void delete(List<Long> ids) {
      if (ids.isEmpty()) {
        return;
      }
      long start = System.nanoTime();
      int deleted = HeldStatements.delete(tx, ids);
      context.report().acked(queue.name(), deleted, System.nanoTime() - start);
    }

    @Override
    public FailureOutcome fail(ClaimedMessage message, Throwable error) {
      FailureOutcome outcome = Retries.failLocked(tx, context.own(), queue.name(), message.id(), error, retryPolicy,
          retryPolicy::backoff);
      if (outcome == FailureOutcome.DEAD_LETTERED) {
        context.report().deadLettered(queue.name(), 1);
      }
      return outcome;
    }

    @Override
    public boolean deadLetterEnded(ClaimedMessage message, int failedDeliveries) {
      boolean moved = Retries.deadLetterEnded(tx, context.own(), queue.name(), message.id(), failedDeliveries,
          retryPolicy);
      if (moved) {
        context.report().deadLettered(queue.name(), 1);
      }
      return moved;
    }

    @Override
    public DSLContext dsl() {
      return tx;
    }

    @Override
    public boolean ended() {
      try {
        return !tx.connectionResult(connection -> connection.isValid(ENDED_CHECK_SECONDS));
      } catch (RuntimeException e) {
        return true;
      }
    }

    @Override
    public void inSavepoint(Body body) throws Exception {
      try {
        tx.transaction(savepoint -> {
          try {
            body.run(savepoint.dsl());
          } catch (Exception e) {
            throw new SavepointFailure(e);
          }
        });
      } catch (SavepointFailure e) {
        throw e.handlerFailure;
      }
    }
  }

  /** Carries a handler's exception out of a savepoint, which rolls back on any exception it sees. */
  private static final class SavepointFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final transient Exception handlerFailure;

    SavepointFailure(Exception handlerFailure) {
      super(handlerFailure.toString(), handlerFailure, false, false);
      this.handlerFailure = handlerFailure;
    }
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
