package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.FailureOutcome;
import dev.msgqueue.TestMessages;
import dev.msgqueue.internal.sql.Receipt;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import dev.msgqueue.internal.consume.HeldTransaction.LockedMessage;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;

/**
 * A {@link ConsumerStore} in memory: claims hand out the ids it was given, lowest first, and every act is written to
 * an event log with the manual clock's time, so a test asserts the exact order of what the pipeline asked of the
 * database. Acts fail on cue.
 */
final class FakeStore implements ConsumerStore {
  static final String QUEUE = "q";

  private final ManualThreads threads;
  private final long startNanos;
  private final Deque<Long> queued = new ArrayDeque<>();
  private final List<String> events = Collections.synchronizedList(new ArrayList<>());
  /** Overrides what a claim of {@code max} does, when set. */
  volatile IntFunction<List<ClaimedMessage>> onClaim;
  volatile int failingAcks;
  volatile int failingHandBacks;
  volatile int failingRenewals;
  /** Answers of {@link #committed}, in order: true, false, or null for "not known yet" (it throws). */
  final Deque<Boolean> commitAnswers = new LinkedList<>();
  /** Messages given out by claims and not yet acked, handed back or settled by their handler. */
  int outstanding;
  /** The most messages claimed and unsettled at once, counting what the claim being answered asked for. */
  int mostOutstandingWithAsked;

  FakeStore(ManualThreads threads) {
    this.threads = threads;
    this.startNanos = threads.nanoTime();
  }

  /** Queues messages {@code from} to {@code to} (inclusive) for claims. */
  synchronized FakeStore publish(long from, long to) {
    for (long id = from; id <= to; id++) {
      queued.add(id);
    }
    return this;
  }

  List<String> events() {
    synchronized (events) {
      return List.copyOf(events);
    }
  }

  private void event(String text) {
    events.add("t=" + TimeUnit.NANOSECONDS.toMillis(threads.nanoTime() - startNanos) + " " + text);
  }

  @Override
  public String queueName() {
    return QUEUE;
  }

  @Override
  public void bindQueue() {
    event("bind");
  }

  @Override
  public List<ClaimedMessage> claim(int max) {
    synchronized (this) {
      mostOutstandingWithAsked = Math.max(mostOutstandingWithAsked, outstanding + max);
    }
    IntFunction<List<ClaimedMessage>> custom = onClaim;
    if (custom != null) {
      List<ClaimedMessage> claimed = custom.apply(max);
      synchronized (this) {
        outstanding += claimed.size();
      }
      event("claim(" + max + ")->" + PipelineContext.ids(claimed));
      return claimed;
    }
    List<ClaimedMessage> claimed = new ArrayList<>();
    synchronized (this) {
      while (claimed.size() < max && !queued.isEmpty()) {
        claimed.add(TestMessages.message(QUEUE, queued.poll()));
      }
      outstanding += claimed.size();
    }
    event("claim(" + max + ")->" + PipelineContext.ids(claimed));
    return claimed;
  }

  @Override
  public boolean committed(long transactionId) {
    Boolean answer;
    synchronized (this) {
      answer = commitAnswers.isEmpty() ? null : commitAnswers.poll();
    }
    event("committed(" + transactionId + ")->" + answer);
    if (answer == null) {
      throw new IllegalStateException("the server cannot tell yet");
    }
    return answer;
  }

  @Override
  public List<ClaimedMessage> countRedeliveries(List<ClaimedMessage> claimed) {
    return claimed;
  }

  @Override
  public int ack(List<ClaimedMessage> handled) {
    if (failingAcks > 0) {
      failingAcks--;
      event("ack" + PipelineContext.ids(handled) + " failed");
      throw new IllegalStateException("ack failed (test)");
    }
    synchronized (this) {
      outstanding -= handled.size();
    }
    event("ack" + PipelineContext.ids(handled));
    return handled.size();
  }

  @Override
  public HandBack handBack(List<ClaimedMessage> claimed) {
    return () -> {
      if (failingHandBacks > 0) {
        failingHandBacks--;
        event("handBack" + PipelineContext.ids(claimed) + " failed");
        throw new IllegalStateException("hand-back failed (test)");
      }
      synchronized (this) {
        outstanding -= claimed.size();
        for (int i = claimed.size() - 1; i >= 0; i--) {
          queued.addFirst(claimed.get(i).id());
        }
      }
      event("handBack" + PipelineContext.ids(claimed));
      return claimed.size();
    };
  }

  @Override
  public List<ClaimedMessage> extendLeases(List<ClaimedMessage> held) {
    if (failingRenewals > 0) {
      failingRenewals--;
      event("extend" + PipelineContext.ids(held) + " failed");
      throw new IllegalStateException("renewal failed (test)");
    }
    event("extend" + PipelineContext.ids(held));
    List<ClaimedMessage> renewed = new ArrayList<>();
    for (ClaimedMessage message : held) {
      Receipt receipt = TestMessages.access().receiptOf(message);
      renewed.add(TestMessages.access().of(QUEUE, message.payloadJsonb(),
          receipt.extendedTo(receipt.deadline().plusSeconds(1))));
    }
    return renewed;
  }

  @Override
  public FailureOutcome fail(ClaimedMessage message, Throwable error) {
    event("fail(" + message.id() + ")");
    return FailureOutcome.RETRY_SCHEDULED;
  }

  @Override
  public boolean keepAlive() {
    event("keepAlive");
    return false;
  }

  /** Held-transaction mode: messages whose last transaction rolled back or died, as their row's xmax says. */
  private final java.util.Set<Long> endedWithoutCommit = new java.util.HashSet<>();
  /** Held-transaction mode: quarantined messages (ASSIGNED), in id order. */
  private final java.util.TreeSet<Long> quarantined = new java.util.TreeSet<>();
  /** Held-transaction mode: failed deliveries counted per message. */
  final java.util.Map<Long, Integer> failedDeliveries = new java.util.HashMap<>();
  volatile int maxDeliveries = 5;
  /** Held-transaction mode: a message to lock with its last transaction ended without commit, as if it crashed. */
  synchronized void crashedBefore(long id) {
    endedWithoutCommit.add(id);
  }

  /** Held-transaction mode: a message another consumer quarantined before it died: ASSIGNED, in no batch. */
  synchronized void quarantinedByAnother(long id) {
    quarantined.add(id);
  }

  @Override
  public <T> T inHeldTransaction(HeldWork<T> work) {
    FakeHeld tx = new FakeHeld();
    T result;
    try {
      result = work.run(tx);
    } catch (RuntimeException | Error e) {
      synchronized (this) {
        for (int i = tx.locked.size() - 1; i >= 0; i--) {
          queued.addFirst(tx.locked.get(i));
          endedWithoutCommit.add(tx.locked.get(i));
        }
        for (Long id : tx.lockedQuarantined) {
          quarantined.add(id);
          endedWithoutCommit.add(id);
        }
        outstanding -= tx.locked.size() + tx.lockedQuarantined.size();
      }
      event("rollback");
      throw e;
    }
    synchronized (this) {
      List<Long> back = new ArrayList<>(tx.locked);
      back.removeAll(tx.deleted);
      back.removeAll(tx.settled);
      back.removeAll(tx.quarantining);
      for (int i = back.size() - 1; i >= 0; i--) {
        queued.addFirst(back.get(i));
      }
      quarantined.addAll(tx.quarantining);
      for (Long id : tx.lockedQuarantined) {
        if (!tx.deleted.contains(id) && !tx.settled.contains(id)) {
          quarantined.add(id);
        }
      }
      outstanding -= tx.locked.size() + tx.lockedQuarantined.size();
    }
    event("commit");
    return result;
  }

  @Override
  public synchronized Map<Long, Integer> countEndedDeliveries(List<Long> ids) {
    Map<Long, Integer> counts = new java.util.HashMap<>();
    for (Long id : ids) {
      counts.put(id, failedDeliveries.merge(id, 1, Integer::sum));
    }
    event("countEnded" + ids);
    return counts;
  }

  @Override
  public int maxDeliveries() {
    return maxDeliveries;
  }

  /** A held transaction in memory: what it locked, deleted and settled, applied at commit. */
  private final class FakeHeld implements HeldTransaction {
    final List<Long> locked = new ArrayList<>();
    final List<Long> lockedQuarantined = new ArrayList<>();
    final List<Long> quarantining = new ArrayList<>();
    final List<Long> deleted = new ArrayList<>();
    final List<Long> settled = new ArrayList<>();

    @Override
    public void quarantine(List<Long> ids) {
      quarantining.addAll(ids);
      event("quarantine" + ids);
    }

    @Override
    public LockedMessage lockQuarantined() {
      LockedMessage result = null;
      synchronized (FakeStore.this) {
        Long id = quarantined.pollFirst();
        if (id != null) {
          lockedQuarantined.add(id);
          outstanding++;
          result = new LockedMessage(TestMessages.message(QUEUE, id), endedWithoutCommit.remove(id));
        }
      }
      event("lockQuarantined->" + (result == null ? "none" : result.message().id()
          + (result.endedWithoutCommit() ? " ended" : "")));
      return result;
    }

    @Override
    public LockedMessage lockQuarantined(List<Long> ids) {
      LockedMessage result = null;
      synchronized (FakeStore.this) {
        Long id = quarantined.stream().filter(ids::contains).findFirst().orElse(null);
        if (id != null) {
          quarantined.remove(id);
          lockedQuarantined.add(id);
          outstanding++;
          result = new LockedMessage(TestMessages.message(QUEUE, id), endedWithoutCommit.remove(id));
        }
      }
      event("lockQuarantined" + ids + "->" + (result == null ? "none" : result.message().id()
          + (result.endedWithoutCommit() ? " ended" : "")));
      return result;
    }

    @Override
    public List<LockedMessage> lock(int max) {
      List<LockedMessage> result = new ArrayList<>();
      synchronized (FakeStore.this) {
        mostOutstandingWithAsked = Math.max(mostOutstandingWithAsked, outstanding + max);
        while (result.size() < max && !queued.isEmpty()) {
          long id = queued.poll();
          locked.add(id);
          result.add(new LockedMessage(TestMessages.message(QUEUE, id), endedWithoutCommit.remove(id)));
        }
        outstanding += result.size();
      }
      event("lock(" + max + ")->" + lockedIds(result));
      return result;
    }

    @Override
    public List<LockedMessage> lockAgain(List<Long> ids) {
      List<LockedMessage> result = new ArrayList<>();
      synchronized (FakeStore.this) {
        for (Long id : ids) {
          if (queued.remove(id)) {
            endedWithoutCommit.remove(id); // the lane's own rollback: not counted
            locked.add(id);
            result.add(new LockedMessage(TestMessages.message(QUEUE, id), false));
          }
        }
        outstanding += result.size();
      }
      event("lockAgain" + ids + "->" + lockedIds(result));
      return result;
    }

    private List<Long> lockedIds(List<LockedMessage> messages) {
      List<Long> ids = new ArrayList<>();
      messages.forEach(m -> ids.add(m.message().id()));
      return ids;
    }

    @Override
    public void delete(List<Long> ids) {
      deleted.addAll(ids);
      event("delete" + ids);
    }

    @Override
    public FailureOutcome fail(ClaimedMessage message, Throwable error) {
      settled.add(message.id());
      int failed;
      synchronized (FakeStore.this) {
        failed = failedDeliveries.merge(message.id(), 1, Integer::sum);
      }
      boolean dead = failed >= maxDeliveries;
      event((dead ? "deadLetter(" : "retryLater(") + message.id() + ")");
      return dead ? FailureOutcome.DEAD_LETTERED : FailureOutcome.RETRY_SCHEDULED;
    }

    @Override
    public boolean deadLetterEnded(ClaimedMessage message, int failed) {
      settled.add(message.id());
      event("deadLetterEnded(" + message.id() + ")");
      return true;
    }

    @Override
    public org.jooq.DSLContext dsl() {
      return null;
    }

    @Override
    public boolean ended() {
      return false;
    }

    @Override
    public void inSavepoint(Body body) throws Exception {
      body.run(null);
    }
  }

  @Override
  public void handled(long nanos, boolean failed) {
  }

  @Override
  public synchronized void settledByItsHandler() {
    outstanding--;
  }

  @Override
  public void perhapsLost(int messages) {
    event("perhapsLost(" + messages + ")");
  }
}
