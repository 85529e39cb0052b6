package dev.msgqueue.internal.consume;

import dev.msgqueue.TransactionalMessageHandler;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One subscriber's pipeline in the held-transaction mode: the {@link HeldLanes} lock, handle and delete messages in
 * transactions of their own on the shared handler threads, and {@link SubscriberHousekeeping} keeps the queue alive.
 */
public final class HeldPipeline implements Pipeline {
  private final PipelineContext context;
  private final HeldLanes lanes;
  private final SubscriberHousekeeping housekeeping;
  private final HeldConnections connections;
  private final AtomicBoolean closed = new AtomicBoolean();
  private volatile boolean lanesFinished;

  /**
   * A pipeline on {@code threads} and {@code connections}, which it releases on close.
   *
   * @param transactionTimeout the longest a lane's transaction lasts: the server ends it after that
   */
  public HeldPipeline(ConsumerStore store, TransactionalMessageHandler handler, PipelineSettings settings,
      Duration transactionTimeout, PipelineThreads threads, HeldConnections connections) {
    this.context = new PipelineContext(store, settings, threads);
    this.connections = connections;
    this.lanes = new HeldLanes(context, handler, transactionTimeout.toNanos(), connections);
    this.housekeeping = new SubscriberHousekeeping(context, () -> false);
  }

  /** The most pooled connections a subscriber of {@code concurrency} holds at once in this mode. */
  public static int connectionsFor(int concurrency) {
    return HeldLanes.lanesFor(concurrency);
  }

  @Override
  public void start() {
    try {
      context.store.bindQueue();
    } catch (RuntimeException e) {
      closed.set(true);
      context.threads.release();
      connections.release();
      throw e;
    }
    housekeeping.start();
    lanes.startLanes();
  }

  @Override
  public void wake() {
    context.wakeups.incrementAndGet();
    lanes.wake();
  }

  @Override
  public boolean isClosing() {
    return closed.get();
  }

  @Override
  public boolean close(Duration timeout) {
    if (!closed.compareAndSet(false, true)) {
      return lanesFinished;
    }
    long deadline = System.nanoTime() + timeout.toNanos();
    boolean finishedInTime = false;
    try {
      finishedInTime = lanes.stop(deadline);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (!finishedInTime) {
      PipelineContext.LOG.warn("subscriber of \"{}\" closed with {} lane(s) still running after {}; their handlers are"
          + " interrupted, and their transactions give their messages back when they end", context.queue,
          lanes.running(), timeout);
    }
    housekeeping.stop();
    context.retrying.drain();
    context.threads.release();
    connections.release();
    lanesFinished = finishedInTime;
    PipelineContext.LOG.info("subscriber of \"{}\" closed: {} handled, {} failed, {} dead-lettered", context.queue,
        context.acked.get(), context.failed.get(), context.deadLettered.get());
    return finishedInTime;
  }

  @Override
  public long claimRounds() {
    return context.claimRounds.get();
  }

  @Override
  public long ackFlushes() {
    return 0;
  }

  @Override
  public long leaseRenewals() {
    return 0;
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

  @Override
  public long unresolved() {
    return 0;
  }

  @Override
  public String sharedThreadPrefix() {
    return context.threads.namePrefix();
  }

  @Override
  public int largestAck() {
    return 0;
  }

  @Override
  public int mostHeld() {
    return lanes.mostHeld();
  }
}
