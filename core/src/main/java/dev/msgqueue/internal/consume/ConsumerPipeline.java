package dev.msgqueue.internal.consume;

import dev.msgqueue.MessageHandler;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One subscriber's consuming pipeline, a coordinator of four rooms: the {@link Claimer} claims into a bounded room
 * (free handlers plus the prefetch buffer), the {@link HandlerPool} runs the handler, the {@link AckBatcher} acks
 * what was handled, and {@link SubscriberHousekeeping} runs the rounds (lease renewal, keep-alive, ack retries,
 * releases, failure settlement). Claims, acks and housekeeping rounds are tasks on the {@link ConsumerThreads}
 * shared by the subscribers of one repository; only handlers run on threads of this subscriber, started while
 * messages wait and ended when idle.
 *
 * <p>The messages claimed or being claimed never exceed the free room plus the prefetch. While claims find full
 * batches, up to four run at once; otherwise one; none while more than a batch of acks is unwritten. Up to as many
 * ack statements run at once, each of at most {@code batchSize} receipts.
 */
public final class ConsumerPipeline implements Pipeline {
  private static final Logger log = LoggerFactory.getLogger(ConsumerPipeline.class);

  private final PipelineContext context;
  private final Claimer claimer;
  private final HandlerPool handlers;
  private final AckBatcher acks;
  private final SubscriberHousekeeping housekeeping;
  private final AtomicBoolean closed = new AtomicBoolean();
  private volatile boolean handlersFinished;

  /** A pipeline on {@code threads}, which it {@link PipelineThreads#release releases} on close. */
  public ConsumerPipeline(ConsumerStore store, MessageHandler handler, PipelineSettings settings,
      PipelineThreads threads) {
    this.context = new PipelineContext(store, settings, threads);
    // Each room knows only the rooms it hands work to; the two hand-offs back go through this coordinator.
    this.acks = new AckBatcher(context, this::housekeepingStopped, this::ackWritten);
    this.housekeeping = new SubscriberHousekeeping(context, acks::flushing);
    this.claimer = new Claimer(context, this::messagesReady, acks::unwritten);
    this.handlers = new HandlerPool(context, handler, claimer, acks, housekeeping);
  }

  private boolean housekeepingStopped() {
    return housekeeping.stopped();
  }

  private void ackWritten() {
    claimer.ackWritten();
  }

  private void messagesReady() {
    handlers.startHandlerTask();
  }

  /** Binds the queue and sends the first claim. On failure nothing keeps running and the threads are released. */
  @Override
  public void start() {
    try {
      context.store.bindQueue();
    } catch (RuntimeException e) {
      claimer.stop();
      closed.set(true);
      context.threads.release();
      throw e;
    }
    housekeeping.start();
    claimer.claimNow();
  }

  /** A wake-up: claims at once, and once more a wake-up window later for notifications coalesced away. */
  @Override
  public void wake() {
    context.wakeups.incrementAndGet();
    claimer.wake();
  }

  @Override
  public boolean isClosing() {
    return closed.get();
  }

  @Override
  public long claimRounds() {
    return context.claimRounds.get();
  }

  @Override
  public long ackFlushes() {
    return context.ackFlushes.get();
  }

  @Override
  public long leaseRenewals() {
    return context.leaseRenewals.get();
  }

  @Override
  public long wakeups() {
    return context.wakeups.get();
  }

  @Override
  public long acked() {
    return context.acked.get();
  }

  @Override
  public long deadLettered() {
    return context.deadLettered.get();
  }

  @Override
  public long released() {
    return context.released.get();
  }

  /** The name prefix of the shared threads this pipeline runs on. */
  @Override
  public String sharedThreadPrefix() {
    return context.threads.namePrefix();
  }

  /** The most receipts one ack statement carried so far. */
  @Override
  public int largestAck() {
    return context.largestAck.get();
  }

  /** The most messages claimed or being claimed at once and not yet handled (running, waiting or asked for). */
  @Override
  public int mostHeld() {
    return claimer.mostHeld();
  }

  /** Messages of at-most-once takes whose commit went unanswered and whose outcome the server could not tell. */
  @Override
  public long unresolved() {
    return context.unresolved.get();
  }

  /**
   * Stops claiming, waits for the claims in flight, hands back the buffered (claimed, not started) messages, lets the
   * running handlers finish within {@code timeout}, flushes their acks, makes the remaining attempts of failed acks and
   * hand-backs, and returns; releases the shared threads.
   *
   * @return whether every running handler finished within the timeout
   */
  @Override
  public boolean close(Duration timeout) {
    claimer.stop();
    handlers.stopStarting();
    if (!closed.compareAndSet(false, true)) {
      return handlersFinished;
    }
    long deadline = System.nanoTime() + timeout.toNanos();
    boolean finishedInTime = false;
    try {
      // A claim that returns from now on hands its messages back itself, so handlers and claims are awaited together.
      finishedInTime = handlers.awaitHandlers(deadline);
      claimer.awaitClaims(deadline);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (!finishedInTime) {
      log.warn("subscriber of \"{}\" closed with {} handler(s) still running after {}; they are interrupted and not"
          + " acked ({})", context.queue, handlers.running(), timeout,
          context.lease != null ? "redelivered after their lease" : "they were taken by their claim and are lost");
      handlers.interruptHandlers();
    }
    housekeeping.stop();
    // Nothing else runs for this subscriber now but handlers that overran: this thread owns the receipts.
    acks.flushAllAcks();
    housekeeping.settleFailures();
    for (Held message : context.held.values()) {
      if (message.handBack()) {
        context.unstarted.add(message);
      }
    }
    housekeeping.handBackUnstarted();
    context.retrying.drain();
    context.threads.release();
    handlersFinished = finishedInTime;
    log.info("subscriber of \"{}\" closed: {} acked, {} failed, {} handed back unstarted", context.queue,
        context.acked.get(), context.failed.get(), context.released.get());
    return finishedInTime;
  }
}
