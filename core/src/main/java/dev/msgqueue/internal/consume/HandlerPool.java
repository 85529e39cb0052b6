package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.MessageHandler;
import dev.msgqueue.internal.support.DaemonThreads;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;

/**
 * The handler room: up to {@code concurrency} threads of this subscriber run the handler on the ready messages,
 * started while messages wait and ended when idle. A handled message goes to the {@link AckBatcher} (lease mode; in
 * the default mode its claim took it, so it is settled as it returns); a failed one to
 * the retry policy (through a housekeeping round), or is left to its mode; one that waited past half its lease, or
 * comes up while closing, is not started and is released.
 */
final class HandlerPool {
  private static final Logger log = PipelineContext.LOG;
  private static final long HANDLER_IDLE_SECONDS = 10;

  private final PipelineContext context;
  private final Claimer claimer;
  private final AckBatcher acks;
  private final SubscriberHousekeeping housekeeping;
  private final MessageHandler handler;
  private final String queue;
  private final int concurrency;
  private final ThreadPoolExecutor handlers;
  private final AtomicInteger busyHandlerThreads = new AtomicInteger();
  private final AtomicInteger inFlight = new AtomicInteger();
  private volatile boolean stopping;

  HandlerPool(PipelineContext context, MessageHandler handler, Claimer claimer, AckBatcher acks,
      SubscriberHousekeeping housekeeping) {
    this.context = context;
    this.claimer = claimer;
    this.acks = acks;
    this.housekeeping = housekeeping;
    this.handler = handler;
    this.queue = context.queue;
    this.concurrency = context.settings.concurrency();
    this.handlers = new ThreadPoolExecutor(concurrency, concurrency, HANDLER_IDLE_SECONDS, TimeUnit.SECONDS,
        new LinkedBlockingQueue<>(), DaemonThreads.numbered("msgqueue-handler-" + queue));
    handlers.allowCoreThreadTimeOut(true);
  }

  /** From now on a message that comes up is not started but released. */
  void stopStarting() {
    stopping = true;
  }

  /** Lets the running handlers finish and waits until {@code deadline}. @return whether they all finished */
  boolean shutDown(long deadline) throws InterruptedException {
    handlers.shutdown();
    return handlers.awaitTermination(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
  }

  /** Interrupts the handlers still running. */
  void shutDownNow() {
    handlers.shutdownNow();
  }

  /**
   * Puts one more handler thread to work on the ready messages, unless {@code concurrency} already are. Each handler
   * thread that takes a message while more are ready starts the next one, so threads join only while messages wait
   * for them: a batch of quick handlers costs a hand-off or two, not one per message.
   */
  void startHandlerThread() {
    if (reserveHandlerThread()) {
      try {
        handlers.execute(this::handleReady);
      } catch (RejectedExecutionException e) {
        // Only after close() stopped the handlers; close() releases the messages.
        busyHandlerThreads.decrementAndGet();
      }
    }
  }

  private boolean reserveHandlerThread() {
    while (true) {
      int busy = busyHandlerThreads.get();
      if (busy >= concurrency) {
        return false;
      }
      if (busyHandlerThreads.compareAndSet(busy, busy + 1)) {
        return true;
      }
    }
  }

  /** Handles ready messages until there are none; the re-check after leaving picks up one made ready meanwhile. */
  private void handleReady() {
    do {
      try {
        Held entry;
        while ((entry = context.ready.poll()) != null) {
          if (!context.ready.isEmpty()) {
            startHandlerThread();
          }
          handle(entry);
        }
      } finally {
        busyHandlerThreads.decrementAndGet();
      }
    } while (!context.ready.isEmpty() && reserveHandlerThread());
  }

  private void handle(Held entry) {
    boolean started = false;
    long leaseNanos = context.leaseNanos;
    try {
      if (stopping || (context.lease != null && System.nanoTime() - entry.claimedNanos > leaseNanos / 2)) {
        // Closing, or it waited so long that its lease could run out while it runs: not started, released.
        context.unstarted.add(entry);
        housekeeping.requestHousekeeping();
        return;
      }
      started = true;
      entry.startedNanos = System.nanoTime();
      inFlight.incrementAndGet();
      if (context.lease != null) {
        housekeeping.renewBy(entry.leaseEndsNanos - leaseNanos / 2);
      }
      try {
        handler.handle(entry.receipt);
      } catch (Exception | Error e) {
        context.store.handled(System.nanoTime() - entry.startedNanos, true);
        context.failed.incrementAndGet();
        entry.done = true;
        handlerFailed(entry, e);
        if (e instanceof VirtualMachineError fatal) {
          throw fatal;
        }
        return;
      }
      context.store.handled(System.nanoTime() - entry.startedNanos, false);
      entry.done = true;
      if (context.lease == null) {
        // Taken by its claim: nothing is left in the database to ack.
        context.held.remove(entry.receipt.id());
        context.acked.incrementAndGet();
        context.store.settledByItsHandler();
      } else {
        acks.handled(entry);
      }
    } finally {
      if (started) {
        inFlight.decrementAndGet();
      }
      claimer.handlerEnded();
    }
  }

  private void handlerFailed(Held entry, Throwable e) {
    ClaimedMessage message = entry.receipt;
    if (context.retries) {
      // Settled by a housekeeping round, under the receipts lock (a lease renewal could be in flight).
      context.failures.add(new PipelineContext.Failure(entry, e));
      housekeeping.requestHousekeeping();
      log.warn("handler failed on message {} of \"{}\"; it is retried after a backoff or dead-lettered", message.id(),
          queue, e);
    } else if (context.lease != null) {
      context.held.remove(message.id());
      log.warn("handler failed on message {} of \"{}\"; it is redelivered after its lease ({})", message.id(), queue,
          context.lease, e);
    } else {
      context.held.remove(message.id());
      log.error("handler failed on message {} of \"{}\"; it was taken by its claim and is not redelivered (default"
          + " mode; lease mode redelivers)", message.id(), queue, e);
    }
  }

  boolean isTerminated() {
    return handlers.isTerminated();
  }

  /** How many handlers are running right now. */
  int running() {
    return inFlight.get();
  }
}
