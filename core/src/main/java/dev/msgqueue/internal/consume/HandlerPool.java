package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.MessageHandler;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;

/**
 * The handler room: up to {@code concurrency} tasks on the shared handler threads run the handler on the ready
 * messages, started while messages wait. A handled message goes to the {@link AckBatcher} (lease mode; in the
 * at-most-once mode its claim took it, so it is settled as it returns); a failed one to the retry policy (through a
 * housekeeping round), or is left to its mode; one that waited past half its lease, or comes up while closing, is not
 * started and is handed back.
 */
final class HandlerPool {
  private static final Logger log = PipelineContext.LOG;

  private final PipelineContext context;
  private final Claimer claimer;
  private final AckBatcher acks;
  private final SubscriberHousekeeping housekeeping;
  private final MessageHandler handler;
  private final String queue;
  private final int concurrency;
  /** Handler tasks submitted or running: never more than {@code concurrency}. */
  private final AtomicInteger busyHandlerTasks = new AtomicInteger();
  /** The threads running this subscriber's handler tasks right now, to interrupt on a close that times out. */
  private final Set<Thread> handlerThreads = ConcurrentHashMap.newKeySet();
  private final AtomicInteger inFlight = new AtomicInteger();
  private final Object idle = new Object();
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
  }

  /** From now on a message that comes up is not started but handed back. */
  void stopStarting() {
    stopping = true;
  }

  /** Waits until {@code deadline} (of {@link System#nanoTime()}) for the handler tasks to end. @return whether they did */
  boolean awaitHandlers(long deadline) throws InterruptedException {
    synchronized (idle) {
      while (busyHandlerTasks.get() > 0) {
        long remaining = deadline - System.nanoTime();
        if (remaining <= 0) {
          return false;
        }
        TimeUnit.NANOSECONDS.timedWait(idle, remaining);
      }
      return true;
    }
  }

  /** Interrupts the handlers still running. */
  void interruptHandlers() {
    handlerThreads.forEach(Thread::interrupt);
  }

  /**
   * Puts one more handler task to work on the ready messages, unless {@code concurrency} already are. Each handler
   * task that takes a message while more are ready starts the next one, so tasks join only while messages wait for
   * them: a batch of quick handlers costs a hand-off or two, not one per message.
   */
  void startHandlerTask() {
    if (reserveHandlerTask()) {
      try {
        context.threads.executeHandler(this::handleReady);
      } catch (RejectedExecutionException e) {
        // Only after the shared threads were released on close; close() hands the messages back.
        handlerTaskEnded();
      }
    }
  }

  private boolean reserveHandlerTask() {
    while (true) {
      int busy = busyHandlerTasks.get();
      if (busy >= concurrency) {
        return false;
      }
      if (busyHandlerTasks.compareAndSet(busy, busy + 1)) {
        return true;
      }
    }
  }

  private void handlerTaskEnded() {
    if (busyHandlerTasks.decrementAndGet() == 0) {
      synchronized (idle) {
        idle.notifyAll();
      }
    }
  }

  /** Handles ready messages until there are none; the re-check after leaving picks up one made ready meanwhile. */
  private void handleReady() {
    Thread self = Thread.currentThread();
    handlerThreads.add(self);
    try {
      do {
        try {
          Held entry;
          while ((entry = context.ready.poll()) != null) {
            if (!context.ready.isEmpty()) {
              startHandlerTask();
            }
            handle(entry);
          }
        } finally {
          handlerTaskEnded();
        }
      } while (!context.ready.isEmpty() && reserveHandlerTask());
    } finally {
      handlerThreads.remove(self);
      Thread.interrupted(); // an interrupt meant for this subscriber's handler must not reach the next task
    }
  }

  private void handle(Held entry) {
    long leaseNanos = context.leaseNanos;
    boolean started = false;
    try {
      boolean tooLate = context.lease != null && context.now() - entry.claimedNanos > leaseNanos / 2;
      if (stopping || tooLate) {
        // Closing, or it waited so long that its lease could run out while it runs: not started, handed back.
        if (entry.handBack()) {
          context.unstarted.add(entry);
          housekeeping.requestHousekeeping();
        }
        return;
      }
      if (!entry.start(context.now())) {
        return; // close is handing it back
      }
      started = true;
      inFlight.incrementAndGet();
      if (context.lease != null) {
        housekeeping.renewBy(entry.leaseEndsNanos - leaseNanos / 2);
      }
      try {
        handler.handle(entry.receipt);
      } catch (Exception | Error e) {
        context.store.handled(context.now() - entry.startedNanos, true);
        context.failed.incrementAndGet();
        entry.done = true;
        handlerFailed(entry, e);
        if (e instanceof VirtualMachineError fatal) {
          throw fatal;
        }
        return;
      }
      context.store.handled(context.now() - entry.startedNanos, false);
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
      log.error("handler failed on message {} of \"{}\"; it was taken by its claim and is not redelivered"
          + " (at-most-once mode)", message.id(), queue, e);
    }
  }

  /** How many handlers are running right now. */
  int running() {
    return inFlight.get();
  }
}
