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
