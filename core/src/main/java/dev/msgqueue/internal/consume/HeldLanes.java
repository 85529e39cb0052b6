package dev.msgqueue.internal.consume;

import dev.msgqueue.TransactionalMessageHandler;
import dev.msgqueue.internal.consume.HeldTransaction.LockedMessage;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;

/**
 * The held-transaction room: handler lanes, each one transaction on a pooled connection. A lane locks up to a batch of
 * messages, waits for its turn to run handlers, runs them one after the other with its transaction, deletes the
 * handled ones and commits; its messages and the handlers' writes commit together. At most {@code concurrency}
 * lanes run handlers at once; one more may have its batch locked, waiting for its turn, so the database work of one
 * lane overlaps the handlers of another. Lanes lock one at a time and take their turns in the order they locked, so
 * with {@code concurrency(1)} handlers run in id order (but for retries).
 *
 * <p>A handler that throws rolls its lane's transaction back; the lane then handles that batch's messages one
 * transaction each (a savepoint around each handler), settling the one that failed with the retry policy without
 * running it again: one failing message fails alone, and no transaction holds more than one savepoint. A lane stops
 * starting handlers once half the transaction timeout has passed since it locked, or the subscriber closes; it then
 * commits what it handled, and the rest of its batch goes back to the queue with that commit.
 *
 * <p>Messages whose last delivery ended without commit (their consumer died, hung past the timeout, lost its
 * connection) are counted as failed deliveries on a connection outside the transaction, so the count survives this
 * lane dying too, and those past the retry policy's deliveries are dead-lettered instead of handled.
 */
final class HeldLanes {
  private static final Logger log = PipelineContext.LOG;

  private final PipelineContext context;
  private final TransactionalMessageHandler handler;
  private final String queue;
  private final int concurrency;
  private final int batchSize;
  private final int maxLanes;
  private final long halfTimeoutNanos;
  private final PollSchedule polls; // guarded by laneLock
  private final Object laneLock = new Object();
  private int lanesRunning; // guarded by laneLock
  private boolean fullBatches; // guarded by laneLock
  private PipelineThreads.Cancellable nextPoll; // guarded by laneLock
  private final AtomicLong wakeCount = new AtomicLong();
  private volatile boolean running = true;
  private final Set<Thread> laneThreads = ConcurrentHashMap.newKeySet();
  /** Lock statements run one at a time, so that turns follow the order of the locked ids. */
  private final ReentrantLock locking = new ReentrantLock();
  private final Turns turns;
  private final HeldConnections connections;
  /** Starts lanes once a connection frees: one object, so that it waits for a connection once. */
  private final Runnable startWhenFree = this::startLanes;
  /** Messages locked by the lanes and not yet handled, released or rolled back; and the most at once. */
  private final AtomicInteger holding = new AtomicInteger();
  private final AtomicInteger mostHolding = new AtomicInteger();

  HeldLanes(PipelineContext context, TransactionalMessageHandler handler, long transactionTimeoutNanos,
      HeldConnections connections) {
    this.context = context;
    this.connections = connections;
    this.handler = handler;
    this.queue = context.queue;
    this.concurrency = context.settings.concurrency();
    this.batchSize = context.batchSize;
    this.maxLanes = lanesFor(concurrency);
    this.halfTimeoutNanos = transactionTimeoutNanos / 2;
    this.polls = new PollSchedule(context.settings);
    this.turns = new Turns(concurrency);
  }

  /** The lanes, hence pooled connections, a subscriber of {@code concurrency} holds at most at once. */
  static int lanesFor(int concurrency) {
    return concurrency + 1;
  }

  /** A wake-up: a lane at once, and one more a wake-up window later for notifications coalesced away. */
  void wake() {
    wakeCount.incrementAndGet();
    synchronized (laneLock) {
      polls.woken(context.now());
      startLanes();
    }
  }

  /** Starts lanes while fewer than allowed run: all of them while batches come back full, else one. */
  void startLanes() {
    synchronized (laneLock) {
      if (!running) {
        return;
      }
      cancelNextPoll();
      int allowed = fullBatches ? maxLanes : 1;
      while (lanesRunning < allowed && connections.tryHold(startWhenFree)) {
        lanesRunning++;
        long wakesBefore = wakeCount.get();
        try {
          context.threads.executeHandler(() -> lane(wakesBefore));
        } catch (RejectedExecutionException e) {
          lanesRunning--;
          connections.giveBack();
          return;
        }
      }
    }
  }

  /** One lane's task: one batch, then it decides what follows. */
  private void lane(long wakesBefore) {
    Thread self = Thread.currentThread();
    laneThreads.add(self);
    int found = -1;
    try {
      found = runBatch();
    } catch (VirtualMachineError fatal) {
      log.error("subscriber of \"{}\": a lane failed fatally", queue, fatal);
      throw fatal;
    } catch (RuntimeException | Error e) {
      log.warn("subscriber of \"{}\": a held transaction failed ({}); its messages are claimable again, and"
          + " locking again after the poll interval", queue, e.toString());
      log.debug("held transaction failure", e);
    } finally {
      laneThreads.remove(self);
      Thread.interrupted(); // an interrupt meant for this lane's handler must not reach the next task
      laneDone(found, wakesBefore);
      connections.giveBack();
    }
  }

  /** Decides what follows a lane: another at once, a recheck, a poll later, or nothing while others run. */
  private void laneDone(int found, long wakesBefore) {
    synchronized (laneLock) {
      lanesRunning--;
      if (!running) {
        laneLock.notifyAll();
        return;
      }
      fullBatches = found == batchSize;
      if (found > 0) {
        polls.found();
        startLanes();
        return;
      }
      if (found == 0 && wakeCount.get() != wakesBefore) {
        startLanes(); // a wake-up came while the lane locked: its message may have committed after the snapshot
        return;
      }
      if (lanesRunning > 0) {
        return; // the last lane to end decides
      }
      schedulePoll(polls.nextWait(found < 0, context.now()));
    }
  }

  /** A lane locked a whole batch: there may be more, so another lane locks the next one while this one handles. */
  private void lockedFullBatch() {
    synchronized (laneLock) {
      fullBatches = true;
      startLanes();
    }
  }

  private void schedulePoll(long waitNanos) {
    cancelNextPoll();
    try {
      nextPoll = context.threads.schedule(this::startLanes, waitNanos);
    } catch (RejectedExecutionException e) {
      log.debug("subscriber of \"{}\": the shared threads are shut down, no more polls", queue);
    }
  }

  private void cancelNextPoll() {
    if (nextPoll != null) {
      nextPoll.cancel();
      nextPoll = null;
    }
  }

  /**
   * Stops the lanes: none starts from now on, a lane waiting for its turn gives its batch back, a running one
   * finishes its current handler and commits. Waits until {@code deadline} (of {@link System#nanoTime()}), then
   * interrupts the handlers still running. @return whether every lane ended in time
   */
  boolean stop(long deadline) throws InterruptedException {
    synchronized (laneLock) {
      running = false;
      cancelNextPoll();
    }
    connections.stopWaiting(startWhenFree);
    turns.stop();
    synchronized (laneLock) {
      while (lanesRunning > 0) {
        long remaining = deadline - System.nanoTime();
        if (remaining <= 0) {
          laneThreads.forEach(Thread::interrupt);
          return false;
        }
        TimeUnit.NANOSECONDS.timedWait(laneLock, remaining);
      }
    }
    return true;
  }

  /** How many lanes are running now. */
  int running() {
    synchronized (laneLock) {
      return lanesRunning;
    }
  }

  /** The most messages the lanes held locked at once, handled or not. */
  int mostHeld() {
    return mostHolding.get();
  }

  /** @return how many messages the lane locked */
  private int runBatch() {
    Batch batch = new Batch();
    try {
      context.store.inHeldTransaction(tx -> {
        handleBatch(tx, batch);
        return null;
      });
    } catch (HandlerFailed failed) {
      if (batch.transactionEnded) {
        // The transaction itself is gone (its connection failed or the server ended it), whatever the handler then
        // threw. Its messages are back, and the next lane that locks them counts this delivery as one that ended
        // without commit.
        log.warn("subscriber of \"{}\": the transaction of a batch of {} ended under its handler ({}); its messages"
            + " are claimable again", queue, batch.locked, batch.failure.toString());
        return batch.locked;
      }
      // The batch rolled back, its handlers' writes with it: each of its messages now gets a transaction of its own.
      handleOneByOne(batch);
      return batch.locked;
    } finally {
      if (batch.ticket >= 0 && !batch.turnTaken) {
        turns.skip(batch.ticket);
      }
      holding.addAndGet(-batch.locked);
    }
    context.acked.addAndGet(batch.handled.size());
    context.released.addAndGet(batch.released);
    return batch.locked;
  }

  private void handleBatch(HeldTransaction tx, Batch batch) {
    List<LockedMessage> locked;
    locking.lock();
    try {
      locked = tx.lock(batchSize);
      context.claimRounds.incrementAndGet();
      if (!locked.isEmpty()) {
        batch.ticket = turns.ticket();
      }
    } finally {
      locking.unlock();
    }
    long lockedAt = context.now();
    batch.locked = locked.size();
    if (locked.size() == batchSize) {
      lockedFullBatch();
    }
    mostHolding.accumulateAndGet(holding.addAndGet(locked.size()), Math::max);
    if (locked.isEmpty()) {
      return;
    }
    List<LockedMessage> toHandle = withoutDeadLetters(tx, locked);
    batch.toHandle = toHandle;
    batch.turnTaken = true;
    if (!turns.await(batch.ticket)) {
      batch.released = toHandle.size(); // closing before any handler ran: the commit gives them back
      return;
    }
    try {
      for (LockedMessage locked1 : toHandle) {
        if (!running || context.now() - lockedAt > halfTimeoutNanos) {
          batch.released = toHandle.size() - batch.handled.size(); // back to the queue with the commit
          break;
        }
        long start = context.now();
        try {
          handler.handle(locked1.message(), tx.dsl());
        } catch (Exception | Error e) {
          context.store.handled(context.now() - start, true);
          context.failed.incrementAndGet();
          batch.failedId = locked1.message().id();
          batch.failure = e;
          batch.transactionEnded = !(e instanceof VirtualMachineError) && tx.ended();
          if (e instanceof VirtualMachineError fatal) {
            throw fatal;
          }
          throw new HandlerFailed();
        }
        context.store.handled(context.now() - start, false);
        batch.handled.add(locked1.message().id());
      }
    } finally {
      turns.done();
    }
    tx.delete(batch.handled);
  }

  /**
   * Counts the deliveries of the locked messages that ended without commit, outside the transaction, and
   * dead-letters those past the retry policy's deliveries. @return the messages to handle
   */
  private List<LockedMessage> withoutDeadLetters(HeldTransaction tx, List<LockedMessage> locked) {
    List<Long> ended = new ArrayList<>();
    for (LockedMessage message : locked) {
      if (message.endedWithoutCommit()) {
        ended.add(message.message().id());
      }
    }
    int maxDeliveries = context.store.maxDeliveries();
    if (ended.isEmpty() || maxDeliveries == 0) {
      return locked;
    }
    Map<Long, Integer> failed = context.store.countEndedDeliveries(ended);
    List<LockedMessage> toHandle = new ArrayList<>(locked.size());
    for (LockedMessage message : locked) {
      Integer deliveries = failed.get(message.message().id());
      if (deliveries != null && deliveries >= maxDeliveries
          && tx.deadLetterEnded(message.message(), deliveries)) {
        context.deadLettered.incrementAndGet();
        continue;
      }
      toHandle.add(message);
    }
    return toHandle;
  }

  /**
   * After a batch rolled back: each of its messages in a transaction of its own, in id order. Each transaction locks
   * the messages still to do (another consumer may have taken some since), handles the first in a savepoint (the one
   * whose handler failed is settled by the retry policy instead of run again) and commits, which gives the others
   * back until the next transaction locks them again.
   */
  private void handleOneByOne(Batch batch) {
    Set<Long> remaining = new LinkedHashSet<>();
    batch.toHandle.forEach(message -> remaining.add(message.message().id()));
    log.warn("handler failed on message {} of \"{}\"; its batch of {} rolled back and each of its messages is"
        + " handled in a transaction of its own", batch.failedId, queue, remaining.size(), batch.failure);
    while (!remaining.isEmpty() && running) {
      boolean more;
      try {
        more = context.store.inHeldTransaction(tx -> handleFirst(tx, remaining, batch));
      } catch (RuntimeException e) {
        log.warn("subscriber of \"{}\": a transaction of one message failed ({}); its messages are claimable again",
            queue, e.toString());
        return;
      }
      if (!more) {
        return;
      }
    }
  }

  /** @return whether any of {@code remaining} was still there to lock */
  private boolean handleFirst(HeldTransaction tx, Set<Long> remaining, Batch batch) {
    List<LockedMessage> again = tx.lockAgain(new ArrayList<>(remaining));
    Set<Long> lockedIds = new HashSet<>();
    again.forEach(message -> lockedIds.add(message.message().id()));
    remaining.retainAll(lockedIds);
    if (again.isEmpty()) {
      return false;
    }
    LockedMessage first = again.get(0);
    long id = first.message().id();
    remaining.remove(id);
    if (id == batch.failedId) {
      settle(tx, first, batch.failure);
      return true;
    }
    long ticket = turns.ticket();
    if (!turns.await(ticket)) {
      return true; // closing: committed unhandled, it goes back to the queue
    }
    long start = context.now();
    try {
      tx.inSavepoint(savepoint -> handler.handle(first.message(), savepoint));
      context.store.handled(context.now() - start, false);
    } catch (Exception e) {
      context.store.handled(context.now() - start, true);
      context.failed.incrementAndGet();
      settle(tx, first, e);
      return true;
    } finally {
      turns.done();
    }
    tx.delete(List.of(id));
    context.acked.incrementAndGet();
    return true;
  }

  private void settle(HeldTransaction tx, LockedMessage message, Throwable error) {
    if (tx.fail(message.message(), error) == dev.msgqueue.FailureOutcome.DEAD_LETTERED) {
      context.deadLettered.incrementAndGet();
    }
  }

  /** One lane's batch: what it locked and handled, and the failure that rolled it back. */
  private static final class Batch {
    long ticket = -1;
    boolean turnTaken;
    int locked;
    List<LockedMessage> toHandle = List.of();
    final List<Long> handled = new ArrayList<>();
    int released;
    long failedId = -1;
    Throwable failure;
    boolean transactionEnded;
  }

  /** A handler threw: its lane's transaction rolls back. */
  private static final class HandlerFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    HandlerFailed() {
      super(null, null, false, false);
    }
  }

  /**
   * Turns to run handlers, at most {@code concurrency} at once, given in ticket order: a lane that locked earlier
   * runs its handlers no later than one that locked after it.
   */
  private static final class Turns {
    private final int concurrency;
    private long nextTicket; // guarded by this
    private long nextTurn; // guarded by this
    private int handling; // guarded by this
    private final Set<Long> skipped = new HashSet<>(); // guarded by this
    private boolean stopped; // guarded by this

    Turns(int concurrency) {
      this.concurrency = concurrency;
    }

    synchronized long ticket() {
      return nextTicket++;
    }

    /** Waits for the ticket's turn and a free handler. @return false once stopped: no handler may start */
    synchronized boolean await(long ticket) {
      while (!stopped && (ticket != nextTurn || handling >= concurrency)) {
        try {
          wait();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          stopped = true;
        }
      }
      if (stopped) {
        pass(ticket);
        return false;
      }
      nextTurn++;
      handling++;
      advancePastSkipped();
      notifyAll();
      return true;
    }

    /** The handlers of a turn are done. */
    synchronized void done() {
      handling--;
      notifyAll();
    }

    /** A ticket that will never wait for its turn. */
    synchronized void skip(long ticket) {
      pass(ticket);
      notifyAll();
    }

    synchronized void stop() {
      stopped = true;
      notifyAll();
    }

    private void pass(long ticket) {
      if (ticket == nextTurn) {
        nextTurn++;
        advancePastSkipped();
      } else if (ticket > nextTurn) {
        skipped.add(ticket);
      }
    }

    private void advancePastSkipped() {
      while (skipped.remove(nextTurn)) {
        nextTurn++;
      }
    }
  }
}
