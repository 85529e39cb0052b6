package dev.msgqueue.internal.consume;

import static dev.msgqueue.internal.consume.PipelineContext.NEVER;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.FailureOutcome;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;

/**
 * The housekeeping room: one subscriber's rounds, which never overlap. A round hands back messages claimed but not
 * started, settles failed handlers with the retry policy, renews the leases of running handlers (lease mode) and keeps
 * the queue alive once per keep-alive interval. A round runs when asked for and when the next one is due.
 */
final class SubscriberHousekeeping {
  /** How long close() waits for a housekeeping round or ack statement already running. */
  private static final long HOUSEKEEPING_STOP_NANOS = TimeUnit.SECONDS.toNanos(30);
  private static final Logger log = PipelineContext.LOG;

  private final PipelineContext context;
  /** Whether an ack statement's task is running (none in the held-transaction mode). */
  private final BooleanSupplier acksRunning;
  private final long maxHandlerNanos;
  private final long keepAliveNanos;

  private final AtomicBoolean housekeepingQueued = new AtomicBoolean();
  /** Whether a round is running now (not merely queued: a queued round that starts after stop does nothing). */
  private final AtomicBoolean roundRunning = new AtomicBoolean();
  private volatile boolean housekeepingAgain;
  private volatile boolean housekeeperStopped;
  private PipelineThreads.Cancellable nextHousekeeping; // guarded by this
  /** When the armed round is due; NEVER once it fired (written under this, read without it by starting handlers). */
  private volatile long nextHousekeepingAt = NEVER;
  private volatile long nextKeepAlive; // written by start() and then by one housekeeping round at a time

  SubscriberHousekeeping(PipelineContext context, BooleanSupplier acksRunning) {
    this.context = context;
    this.acksRunning = acksRunning;
    this.maxHandlerNanos = context.settings.maxHandlerTime().toNanos();
    this.keepAliveNanos = context.settings.keepAliveInterval().toNanos();
  }

  /** Arms the first round for the first keep-alive. */
  void start() {
    nextKeepAlive = context.now() + keepAliveNanos;
    scheduleHousekeeping(nextKeepAlive);
  }

  /** Whether {@link #stop} was called: no round and no new ack statement starts from then on. */
  boolean stopped() {
    return housekeeperStopped;
  }

  /** Stops the rounds and waits (bounded) for a round or ack statement already running. */
  void stop() {
    housekeeperStopped = true;
    synchronized (this) {
      if (nextHousekeeping != null) {
        nextHousekeeping.cancel();
      }
    }
    long until = System.nanoTime() + HOUSEKEEPING_STOP_NANOS;
    while ((roundRunning.get() || acksRunning.getAsBoolean()) && System.nanoTime() - until < 0) {
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
    }
  }

  /** Runs a housekeeping round soon; rounds of one subscriber never overlap. */
  void requestHousekeeping() {
    housekeepingAgain = true;
    if (housekeepingQueued.compareAndSet(false, true)) {
      if (housekeeperStopped || !context.submit(this::housekeep)) {
        housekeepingQueued.set(false);
      }
    }
  }

  private void housekeep() {
    long due = NEVER;
    roundRunning.set(true);
    try {
      do {
        housekeepingAgain = false;
        if (housekeeperStopped) {
          return;
        }
        due = housekeepingRound();
      } while (housekeepingAgain);
    } catch (RuntimeException | Error e) {
      log.error("subscriber of \"{}\": unexpected failure in a housekeeping round; another follows shortly", context.queue,
          e);
      due = context.now() + TimeUnit.MILLISECONDS.toNanos(100);
      if (e instanceof VirtualMachineError fatal) {
        throw fatal;
      }
    } finally {
      roundRunning.set(false);
      housekeepingQueued.set(false);
      if (!housekeeperStopped) {
        scheduleHousekeeping(due);
      }
    }
    if (housekeepingAgain) {
      requestHousekeeping(); // asked for while this round was ending
    }
  }

  /** @return when the next round is due */
  private long housekeepingRound() {
    if (!context.unstarted.isEmpty()) {
      handBackUnstarted();
    }
    if (!context.failures.isEmpty()) {
      settleFailures();
    }
    long nextRenewal = context.lease == null ? NEVER : renewLeases();
    if (context.now() - nextKeepAlive >= 0) {
      keepAlive();
      nextKeepAlive = context.now() + keepAliveNanos;
    }
    return Math.min(nextKeepAlive, nextRenewal);
  }

  /**
   * A handler started (lease mode): makes sure a round comes by the time its lease needs renewing. Lock-free unless
   * the armed round is later, since every message passes here.
   */
  void renewBy(long atNanos) {
    long armed = nextHousekeepingAt;
    if (armed == NEVER || armed - atNanos > 0) {
      scheduleHousekeeping(atNanos);
    }
  }

  /** Arms the next round at {@code atNanos}, unless one is armed for no later. */
  synchronized void scheduleHousekeeping(long atNanos) {
    if (atNanos == NEVER || housekeeperStopped) {
      return;
    }
    if (nextHousekeeping != null && nextHousekeepingAt != NEVER && nextHousekeepingAt - atNanos <= 0) {
      return;
    }
    if (nextHousekeeping != null) {
      nextHousekeeping.cancel();
    }
    try {
      nextHousekeeping = context.threads.schedule(this::armedRoundDue, atNanos - context.now());
      nextHousekeepingAt = atNanos;
    } catch (RejectedExecutionException e) {
      nextHousekeeping = null; // closing
      nextHousekeepingAt = NEVER;
    }
  }

  private void armedRoundDue() {
    synchronized (this) {
      nextHousekeepingAt = NEVER; // from here a starting handler arms its own round: this one may have looked already
    }
    requestHousekeeping();
  }

  /** Hands each failed message to the retry policy: retried after its backoff, or dead-lettered. */
  void settleFailures() {
    Lock lock = context.readReceipts();
    try {
      PipelineContext.Failure failure;
      while ((failure = context.failures.poll()) != null) {
        context.held.remove(failure.entry().receipt.id());
        try {
          if (context.store.fail(failure.entry().receipt, failure.error()) == FailureOutcome.DEAD_LETTERED) {
            context.deadLettered.incrementAndGet();
          }
        } catch (RuntimeException e) {
          log.warn("could not settle the failure of message {} of \"{}\"; it is redelivered after its lease",
              failure.entry().receipt.id(), context.queue, e);
        }
      }
    } finally {
      PipelineContext.unlock(lock);
    }
  }

  /** Hands back the messages claimed but never started, so any consumer can claim them at once. */
  void handBackUnstarted() {
    List<ClaimedMessage> batch = new ArrayList<>();
    Held entry;
    while ((entry = context.unstarted.poll()) != null) {
      if (context.held.remove(entry.receipt.id(), entry)) {
        batch.add(entry.receipt);
      }
    }
    if (!batch.isEmpty()) {
      context.handBack(batch);
    }
  }

  /**
   * Renews, in statements of at most {@code batchSize}, the lease of every running handler with less than half of it
   * left, unless the handler has run for {@code maxHandlerTime}.
   *
   * @return when to look again
   */
  private long renewLeases() {
    long now = context.now();
    long next = NEVER;
    context.receipts.writeLock().lock();
    try {
      List<Held> due = new ArrayList<>();
      for (Held entry : context.held.values()) {
        if (entry.startedNanos == 0 || entry.done || entry.lost) {
          continue;
        }
        if (now - entry.startedNanos >= maxHandlerNanos) {
          if (!entry.gaveUp) {
            entry.gaveUp = true;
            log.warn("handler of message {} of \"{}\" has run for more than {}; its lease is no longer renewed and"
                + " the message is redelivered when it runs out", entry.receipt.id(), context.queue,
                Duration.ofNanos(maxHandlerNanos));
          }
          continue;
        }
        long renewAt = entry.leaseEndsNanos - context.leaseNanos / 2;
        if (renewAt - now <= 0) {
          due.add(entry);
          next = Math.min(next, now + context.leaseNanos / 2); // renewed now: due again half a lease from now
        } else {
          next = Math.min(next, renewAt);
        }
      }
      for (int from = 0; from < due.size(); from += context.batchSize) {
        if (!renew(due.subList(from, Math.min(due.size(), from + context.batchSize)))) {
          return context.now() + Math.max(TimeUnit.MILLISECONDS.toNanos(1), context.leaseNanos / 20);
        }
      }
      return next;
    } finally {
      context.receipts.writeLock().unlock();
    }
  }

  private boolean renew(List<Held> due) {
    List<ClaimedMessage> current = new ArrayList<>(due.size());
    due.forEach(entry -> current.add(entry.receipt));
    long renewedAt = context.now();
    try {
      Map<Long, ClaimedMessage> renewed = new HashMap<>();
      for (ClaimedMessage message : context.store.extendLeases(current)) {
        renewed.put(message.id(), message);
      }
      context.leaseRenewals.incrementAndGet();
      for (Held entry : due) {
        ClaimedMessage fresh = renewed.get(entry.receipt.id());
        if (fresh != null) {
          entry.receipt = fresh;
          entry.leaseEndsNanos = renewedAt + context.leaseNanos;
        } else {
          entry.lost = true;
          log.warn("message {} of \"{}\" lost its lease while its handler runs; it is delivered again",
              entry.receipt.id(), context.queue);
        }
      }
      return true;
    } catch (RuntimeException e) {
      log.warn("renewing {} lease(s) of \"{}\" failed, retrying shortly", due.size(), context.queue, e);
      return false;
    }
  }

  private void keepAlive() {
    try {
      if (context.store.keepAlive()) {
        log.info("subscriber of \"{}\" re-created its queue (it was missing)", context.queue);
      }
    } catch (RuntimeException e) {
      log.warn("subscriber of \"{}\": keep-alive failed, retrying next interval", context.queue, e);
    }
  }
}
