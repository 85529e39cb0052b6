package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Lock;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;

/**
 * The ack room: acks handled messages in statements of at most {@code batchSize} receipts, up to
 * {@link PipelineContext#MAX_STATEMENTS_IN_FLIGHT} (and no more than the handlers) at once. A full batch is sent at
 * once; a partial one after the ack delay. A failed statement is repeated by {@link Retrying}; after
 * {@value #ACK_ATTEMPTS} attempts its messages are released to the queue instead, in up to {@value #RELEASE_ATTEMPTS}
 * attempts.
 */
final class AckBatcher {
  private static final Logger log = PipelineContext.LOG;
  /** Attempts of one ack statement; then its messages are released to the queue instead. */
  private static final int ACK_ATTEMPTS = 5;
  /** Attempts to release the messages of an ack that kept failing; then they are left to the mode, loudly. */
  private static final int RELEASE_ATTEMPTS = 5;

  private final PipelineContext context;
  /** Whether the housekeeping rounds stopped (close): no ack statement starts from then on. */
  private final BooleanSupplier roundsStopped;
  /** Told after each ack statement's first attempt, so claims held back by unwritten acks can go. */
  private final Runnable ackWritten;
  private final String queue;
  private final int batchSize;
  private final int maxAcksInFlight;
  private final long ackDelayNanos;

  private final ConcurrentLinkedQueue<Held> finished = new ConcurrentLinkedQueue<>();
  private final AtomicInteger finishedCount = new AtomicInteger();
  private final AtomicInteger acksInFlight = new AtomicInteger();
  /** Ack statement tasks running now (not merely submitted: one that starts after close does nothing). */
  private final AtomicInteger acksRunning = new AtomicInteger();
  /** Receipts in the ack statements running now. */
  private final AtomicInteger receiptsInFlight = new AtomicInteger();
  private final AtomicBoolean ackTimerArmed = new AtomicBoolean();

  AckBatcher(PipelineContext context, BooleanSupplier roundsStopped, Runnable ackWritten) {
    this.context = context;
    this.roundsStopped = roundsStopped;
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
    return acksRunning.get() > 0;
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
    acksRunning.incrementAndGet();
    try {
      if (roundsStopped.getAsBoolean()) {
        return; // closing: close() flushes what is pending
      }
      do {
        takeAndAck();
      } while (finishedCount.get() >= batchSize && !roundsStopped.getAsBoolean());
    } finally {
      acksRunning.decrementAndGet();
      acksInFlight.decrementAndGet();
    }
    if (finishedCount.get() > 0) {
      armAckTimer();
    }
  }

  /**
   * Acks the oldest finished handlers' messages, at most {@code batchSize} of them, in one statement; a failed
   * statement is repeated by {@link Retrying}.
   */
  private void takeAndAck() {
    // Held from taking the receipts to the first attempt: a lease renewal must not replace a receipt in between.
    Lock lock = context.readReceipts();
    try {
      List<ClaimedMessage> batch = new ArrayList<>(Math.min(batchSize, Math.max(1, finishedCount.get())));
      Held entry;
      while (batch.size() < batchSize && (entry = finished.poll()) != null) {
        context.held.remove(entry.receipt.id());
        batch.add(entry.receipt);
      }
      if (batch.isEmpty()) {
        return;
      }
      receiptsInFlight.addAndGet(batch.size());
      finishedCount.addAndGet(-batch.size());
      try {
        context.retrying.run(new AckAct(batch));
      } finally {
        receiptsInFlight.addAndGet(-batch.size());
      }
    } finally {
      PipelineContext.unlock(lock);
      ackWritten.run();
    }
  }

  /** On close, once nothing else runs: every pending ack, in batches (their retries are drained by close). */
  void flushAllAcks() {
    while (!finished.isEmpty()) {
      takeAndAck();
    }
  }

  /**
   * Handled messages to settle: their ack statement for the first {@value #ACK_ATTEMPTS} attempts, then releasing
   * them to the queue (delivered again rather than left ASSIGNED until their lease runs out).
   */
  private final class AckAct implements Retrying.Act {
    private final List<ClaimedMessage> receipts;

    AckAct(List<ClaimedMessage> receipts) {
      this.receipts = receipts;
    }

    @Override
    public int attempts() {
      return ACK_ATTEMPTS + RELEASE_ATTEMPTS;
    }

    @Override
    public void attempt(int attempt) {
      Lock lock = context.readReceipts();
      try {
        if (attempt <= ACK_ATTEMPTS) {
          ack(attempt);
        } else {
          int released = context.store.handBack(receipts).attempt();
          log.warn("{} handled message(s) of \"{}\" whose ack kept failing were released to the queue and are"
              + " delivered again", released, queue);
        }
      } finally {
        PipelineContext.unlock(lock);
      }
    }

    private void ack(int attempt) {
      context.ackFlushes.incrementAndGet();
      context.largestAck.accumulateAndGet(receipts.size(), Math::max);
      int deleted = context.store.ack(receipts);
      context.acked.addAndGet(deleted);
      if (deleted < receipts.size()) {
        log.warn("{} of {} handled message(s) of \"{}\" were not acked: their lease ran out and another claim took"
            + " them (or they expired{}), so they are delivered again", receipts.size() - deleted, receipts.size(),
            queue, attempt > 1 ? ", or a failed attempt did delete them" : "");
      }
    }

    @Override
    public void gaveUp(RuntimeException last) {
      log.error("could neither ack nor release {} handled message(s) of \"{}\"{}: ids {}", receipts.size(), queue,
          context.unsettledFate(), PipelineContext.ids(receipts), last);
    }

    @Override
    public String describe() {
      return "acking " + receipts.size() + " handled message(s)";
    }
  }
}
