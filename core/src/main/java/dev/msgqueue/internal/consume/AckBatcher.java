package dev.msgqueue.internal.consume;

import static dev.msgqueue.internal.consume.PipelineContext.NEVER;

import dev.msgqueue.ClaimedMessage;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.LongConsumer;
import org.slf4j.Logger;

/**
 * The ack room: acks handled messages in statements of at most {@code batchSize} receipts, up to
 * {@link PipelineContext#MAX_STATEMENTS_IN_FLIGHT} (and no more than the handlers) at once. A full batch is sent at
 * once; a partial one after the ack delay. A failed statement is tried again after a backoff by a housekeeping round;
 * after {@value #ACK_ATTEMPTS} attempts its messages are released to the queue instead.
 */
final class AckBatcher {
  private static final Logger log = PipelineContext.LOG;
  /** Attempts of one ack statement; then its messages are released to the queue instead. */
  private static final int ACK_ATTEMPTS = 5;
  /** Attempts to release the messages of an ack that kept failing; then they are left to the mode, loudly. */
  private static final int RELEASE_ATTEMPTS = 5;
  /** The wait before the second attempt of a failed ack; it doubles with each attempt, up to the next one. */
  private static final long FIRST_ACK_RETRY_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
  private static final long MAX_ACK_RETRY_NANOS = TimeUnit.SECONDS.toNanos(1);

  private final PipelineContext context;
  /** Whether the housekeeping rounds stopped (close): no ack statement starts from then on. */
  private final BooleanSupplier roundsStopped;
  /** Arms a housekeeping round at the given time, which makes the due attempts of failed acks. */
  private final LongConsumer roundAt;
  /** Told after each ack statement's attempt, so claims held back by unwritten acks can go. */
  private final Runnable ackWritten;
  private final String queue;
  private final int batchSize;
  private final int maxAcksInFlight;
  private final long ackDelayNanos;

  private final ConcurrentLinkedQueue<Held> finished = new ConcurrentLinkedQueue<>();
  private final AtomicInteger finishedCount = new AtomicInteger();
  private final AtomicInteger acksInFlight = new AtomicInteger();
  /** Receipts in the ack statements running now. */
  private final AtomicInteger receiptsInFlight = new AtomicInteger();
  private final AtomicBoolean ackTimerArmed = new AtomicBoolean();
  private final ConcurrentLinkedQueue<PendingAck> failedAcks = new ConcurrentLinkedQueue<>();

  AckBatcher(PipelineContext context, BooleanSupplier roundsStopped, LongConsumer roundAt, Runnable ackWritten) {
    this.context = context;
    this.roundsStopped = roundsStopped;
    this.roundAt = roundAt;
    this.ackWritten = ackWritten;
    this.queue = context.queue;
    this.batchSize = context.batchSize;
    this.maxAcksInFlight =
        Math.max(1, Math.min(PipelineContext.MAX_STATEMENTS_IN_FLIGHT, context.settings.concurrency()));
    this.ackDelayNanos = context.settings.ackDelay().toNanos();
  }

  /** A handler finished {@code entry}: its ack joins the next batch. */
  void handled(Held entry) {
    finished.add(entry);
    int pending = finishedCount.incrementAndGet();
    if (pending >= batchSize) {
      startAckFlush();
    } else if (pending == 1) {
      armAckTimer();
    }
  }

  /**
   * Handled messages whose first ack attempt has not returned yet (waiting for a statement or in one). Their rows are
   * still ASSIGNED at the front of the queue, where every claim reads past them.
   */
  int unwritten() {
    return finishedCount.get() + receiptsInFlight.get();
  }

  /** Whether an ack statement's task is running. */
  boolean flushing() {
    return acksInFlight.get() > 0;
  }

  boolean hasFailedAcks() {
    return !failedAcks.isEmpty();
  }

  private void armAckTimer() {
    if (ackTimerArmed.compareAndSet(false, true)) {
      try {
        context.threads.schedule(() -> {
          ackTimerArmed.set(false);
          startAckFlush();
        }, ackDelayNanos);
      } catch (RejectedExecutionException e) {
        ackTimerArmed.set(false); // closing: close() flushes
      }
    }
  }

  /** Starts one more ack statement's task, unless as many as allowed run (they take the backlog in turn). */
  private void startAckFlush() {
    if (acksInFlight.incrementAndGet() > maxAcksInFlight || roundsStopped.getAsBoolean()
        || !context.submit(this::flushAcks)) {
      acksInFlight.decrementAndGet();
    }
  }

  /** One ack statement's task: flushes full batches while a backlog lasts, leaves a partial one to its delay. */
  private void flushAcks() {
    try {
      do {
        takeAndAck();
      } while (finishedCount.get() >= batchSize && !roundsStopped.getAsBoolean());
    } finally {
      acksInFlight.decrementAndGet();
    }
    if (finishedCount.get() > 0) {
      armAckTimer();
    }
  }

  /**
   * Acks the oldest finished handlers' messages, at most {@code batchSize} of them, in one statement; a failed
   * statement is tried again later by a housekeeping round.
   *
   * @return how many messages it took
   */
  private int takeAndAck() {
    Lock lock = context.readReceipts();
    try {
      List<ClaimedMessage> batch = new ArrayList<>(Math.min(batchSize, Math.max(1, finishedCount.get())));
      Held entry;
      while (batch.size() < batchSize && (entry = finished.poll()) != null) {
        context.held.remove(entry.receipt.id());
        batch.add(entry.receipt);
      }
      if (batch.isEmpty()) {
        return 0;
      }
      receiptsInFlight.addAndGet(batch.size());
      finishedCount.addAndGet(-batch.size());
      try {
        attempt(new PendingAck(batch));
      } finally {
        receiptsInFlight.addAndGet(-batch.size());
      }
      return batch.size();
    } finally {
      PipelineContext.unlock(lock);
      ackWritten.run();
    }
  }

  /** On close, once nothing else runs: every pending ack, in batches, and every failed one to its end. */
  void flushAllAcks() {
    while (!finished.isEmpty()) {
      takeAndAck();
    }
    while (!failedAcks.isEmpty()) {
      long next = retryFailedAcks();
      if (next == NEVER) {
        break;
      }
      long wait = next - System.nanoTime();
      if (wait > 0 && !Thread.currentThread().isInterrupted()) {
        LockSupport.parkNanos(wait); // interrupted: the remaining attempts follow at once, still bounded
      }
    }
  }

  /** A housekeeping round's part: the due attempts of failed acks. @return when the next one is due, or NEVER */
  long retryFailedAcksLocked() {
    Lock lock = context.readReceipts();
    try {
      return retryFailedAcks();
    } finally {
      PipelineContext.unlock(lock);
    }
  }

  /** Makes the attempts of failed acks that are due, each once. @return when the next one is due, or NEVER */
  private long retryFailedAcks() {
    for (int i = failedAcks.size(); i > 0; i--) {
      PendingAck ack = failedAcks.poll();
      if (ack == null) {
        break;
      }
      if (System.nanoTime() - ack.dueNanos >= 0) {
        attempt(ack);
      } else {
        failedAcks.add(ack);
      }
    }
    long next = NEVER;
    for (PendingAck ack : failedAcks) {
      next = Math.min(next, ack.dueNanos);
    }
    return next;
  }

  /**
   * One attempt to settle handled messages: their ack statement for the first {@value #ACK_ATTEMPTS} attempts, then
   * releasing them to the queue. A failed attempt is scheduled again after a backoff until the attempts run out.
   */
  private void attempt(PendingAck ack) {
    ack.attempts++;
    RuntimeException failure;
    if (ack.attempts <= ACK_ATTEMPTS) {
      context.ackFlushes.incrementAndGet();
      context.largestAck.accumulateAndGet(ack.receipts.size(), Math::max);
      try {
        int deleted = context.store.ack(ack.receipts);
        context.acked.addAndGet(deleted);
        if (deleted < ack.receipts.size()) {
          log.warn("{} of {} handled message(s) of \"{}\" were not acked: their lease ran out and another claim took"
              + " them (or they expired{}), so they are delivered again", ack.receipts.size() - deleted,
              ack.receipts.size(), queue, ack.attempts > 1 ? ", or a failed attempt did delete them" : "");
        }
        return;
      } catch (RuntimeException e) {
        failure = e;
      }
      if (ack.attempts < ACK_ATTEMPTS) {
        retryLater(ack, "ack", failure);
        return;
      }
      log.warn("ack of {} handled message(s) of \"{}\" failed {} times; releasing them to the queue",
          ack.receipts.size(), queue, ACK_ATTEMPTS, failure);
    }
    try {
      List<Long> released = context.store.release(ack.receipts);
      log.warn("{} handled message(s) of \"{}\" whose ack kept failing were released to the queue and are"
          + " delivered again", released.size(), queue);
      return;
    } catch (RuntimeException e) {
      failure = e;
    }
    if (ack.attempts < ACK_ATTEMPTS + RELEASE_ATTEMPTS - 1) { // the first release shared the last ack's attempt
      retryLater(ack, "release", failure);
      return;
    }
    log.error("could neither ack nor release {} handled message(s) of \"{}\"{}", ack.receipts.size(), queue,
        context.unsettledFate(), failure);
  }

  private void retryLater(PendingAck ack, String what, RuntimeException failure) {
    long backoff = Math.min(MAX_ACK_RETRY_NANOS, FIRST_ACK_RETRY_NANOS << Math.min(20, ack.attempts - 1));
    ack.dueNanos = System.nanoTime() + backoff;
    failedAcks.add(ack);
    log.warn("{} of {} handled message(s) of \"{}\" failed (attempt {}), trying again in {} ms ({})", what,
        ack.receipts.size(), queue, ack.attempts, TimeUnit.NANOSECONDS.toMillis(backoff), failure.toString());
    log.debug("{} failure", what, failure);
    if (!roundsStopped.getAsBoolean()) {
      roundAt.accept(ack.dueNanos);
    }
  }

  /** Handled messages whose ack is not settled yet, with the attempts made so far. */
  private static final class PendingAck {
    final List<ClaimedMessage> receipts;
    int attempts;
    long dueNanos;

    PendingAck(List<ClaimedMessage> receipts) {
      this.receipts = receipts;
    }
  }
}
