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
import java.util.concurrent.locks.ReentrantReadWriteLock;
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
 * lane dying too; those past the retry policy's deliveries are dead-lettered, the others quarantined (ASSIGNED, which
 * batches do not take) by a transaction that commits at once. Quarantined messages are handled one per transaction,
 * while no other lane of the subscriber holds a lock, so a message that kills its consumer takes no other message's
 * delivery with it: it alone is counted again, and reaches the dead letter after the policy's deliveries. The mark is
 * in the row, so a message quarantined by a consumer that then died is found by the others (after a batch that was not
 * full, at most once a poll interval).
 */
final class HeldLanes {
  private static final Logger log = PipelineContext.LOG;
  /** How often a lane waiting to handle quarantined messages alone checks whether the subscriber closes. */
  private static final long ISOLATION_WAIT_MILLIS = 100;

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
  /**
   * Batches hold it shared for their transaction; a lane handling messages whose delivery ended without commit holds
   * it alone, so that this subscriber holds no other lock meanwhile. Fair: waiting lanes go in turn.
   */
  private final ReentrantReadWriteLock isolation = new ReentrantReadWriteLock(true);
  /** Messages this subscriber quarantined (committed) and has not settled yet. */
  private final Set<Long> quarantinedHere = ConcurrentHashMap.newKeySet();
  /** When to look for quarantined messages next after a batch that was not full. */
  private final AtomicLong nextQuarantineCheck = new AtomicLong(Long.MIN_VALUE);
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
    this.nextQuarantineCheck.set(context.now());
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
    boolean failed = false;
    isolation.readLock().lock();
    try {
      context.store.inHeldTransaction(tx -> {
        handleBatch(tx, batch);
        return null;
      });
    } catch (HandlerFailed handlerFailed) {
      failed = true;
      if (batch.transactionEnded) {
        // The transaction itself is gone (its connection failed or the server ended it), whatever the handler then
        // threw. Its messages are back, and the next lane that locks them counts this delivery as one that ended
        // without commit.
        log.warn("subscriber of \"{}\": the transaction of a batch of {} ended under its handler ({}); its messages"
            + " are claimable again", queue, batch.locked, batch.failure.toString());
        return batch.locked;
      }
      // The batch rolled back, its handlers' writes with it: each of its messages now gets a transaction of its own.
      log.warn("handler failed on message {} of \"{}\"; its batch of {} rolled back and each of its messages is"
          + " handled in a transaction of its own", batch.failedId, queue, batch.toHandle.size(), batch.failure);
      handleEachAlone(ids(batch.toHandle), batch.failedId, batch.failure);
    } finally {
      isolation.readLock().unlock();
      if (batch.ticket >= 0 && !batch.turnTaken) {
        turns.skip(batch.ticket);
      }
      holding.addAndGet(-batch.locked);
    }
    if (!failed) {
      context.acked.addAndGet(batch.handled.size());
      context.released.addAndGet(batch.released);
      quarantinedHere.addAll(batch.quarantined); // committed
    }
    boolean search = batch.locked < batchSize && quarantineCheckDue();
    if (search || !quarantinedHere.isEmpty()) {
      handleQuarantined(search);
    }
    return batch.locked;
  }

  /**
   * Whether to look for quarantined messages after a batch that was not full: once a poll interval, so that messages
   * a consumer that died quarantined are found by the others without a statement per batch.
   */
  private boolean quarantineCheckDue() {
    long now = context.now();
    long due = nextQuarantineCheck.get();
    return now - due >= 0 && nextQuarantineCheck.compareAndSet(due, now + context.settings.pollInterval().toNanos());
  }

  /**
   * Handles quarantined messages one by one, each in a transaction that locks only it, while no other lane of this
   * subscriber holds a lock: a message that kills its consumer then takes no other message's delivery with it, and its
   * count reaches the dead letter after the policy's deliveries. First those this subscriber quarantined, found by key;
   * then, if {@code search}, any others of the queue (quarantined by a consumer that died), found by a search of the
   * queue, whose cost grows with its backlog: hence at most once a poll interval.
   */
  private void handleQuarantined(boolean search) {
    try {
      while (!isolation.writeLock().tryLock(ISOLATION_WAIT_MILLIS, TimeUnit.MILLISECONDS)) {
        if (!running) {
          return; // closing: they stay quarantined, and a consumer of the queue handles them
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    try {
      while (running && !quarantinedHere.isEmpty()) {
        List<Long> ids = new ArrayList<>(new java.util.TreeSet<>(quarantinedHere));
        Long handledId;
        try {
          handledId = context.store.inHeldTransaction(tx -> handleOneQuarantined(tx, tx.lockQuarantined(ids)));
        } catch (RuntimeException e) {
          log.warn("subscriber of \"{}\": a transaction of a quarantined message failed ({}); it stays quarantined",
              queue, e.toString());
          return;
        }
        if (handledId == null) {
          quarantinedHere.removeAll(ids); // none is quarantined any more: another consumer handled them
        } else {
          quarantinedHere.remove(handledId);
        }
      }
      boolean more = search;
      while (more && running) {
        try {
          more = context.store.inHeldTransaction(tx -> handleOneQuarantined(tx, tx.lockQuarantined())) != null;
        } catch (RuntimeException e) {
          log.warn("subscriber of \"{}\": a transaction of a quarantined message failed ({}); it stays quarantined",
              queue, e.toString());
          return;
        }
      }
    } finally {
      isolation.writeLock().unlock();
    }
  }

  /** @return the id of the quarantined message settled (handled, failed or dead-lettered), or null if none */
  private Long handleOneQuarantined(HeldTransaction tx, LockedMessage message) {
    if (message == null) {
      return null;
    }
    Long id = message.message().id();
    if (message.endedWithoutCommit() && !withoutDeadLetters(tx, List.of(message)).contains(message)) {
      return id; // its deliveries kept ending without commit: dead-lettered
    }
    long ticket = turns.ticket();
    if (!turns.await(ticket)) {
      return null; // closing: it stays quarantined
    }
    long start = context.now();
    try {
      tx.inSavepoint(savepoint -> handler.handle(message.message(), savepoint));
      context.store.handled(context.now() - start, false);
    } catch (Exception e) {
      context.store.handled(context.now() - start, true);
      context.failed.incrementAndGet();
      settle(tx, message, e); // the handler failed, its consumer did not: retried or dead-lettered, as any failure
      return id;
    } finally {
      turns.done();
    }
    tx.delete(List.of(message.message().id()));
    context.acked.incrementAndGet();
    return id;
  }

  private static List<Long> ids(List<LockedMessage> messages) {
    List<Long> ids = new ArrayList<>(messages.size());
    messages.forEach(message -> ids.add(message.message().id()));
    return ids;
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
    List<Long> suspects = new ArrayList<>();
    for (LockedMessage message : toHandle) {
      if (message.endedWithoutCommit()) {
        suspects.add(message.message().id());
      }
    }
    if (!suspects.isEmpty()) {
      // Some deliveries of this batch ended without commit, so one of its messages may kill its consumer: quarantine
      // those, and commit at once, handling nothing, so that no rollback can undo the quarantine; the others are
      // back in the queue for the next batch.
      tx.quarantine(suspects);
      batch.quarantined = suspects;
      batch.released = toHandle.size() - suspects.size();
      return;
    }
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
    if (!batch.handled.isEmpty()) {
      tx.delete(batch.handled);
    }
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
   * After a batch rolled back: handles {@code ids} each in a transaction of its own, in id order, with a savepoint
   * around its handler; the one whose handler failed already ({@code failedId}, with {@code failure}) is settled by the
   * retry policy instead of run again. Each transaction locks the messages still to do (another consumer may have
   * taken some since) and handles the first, which gives the others back until the next transaction locks them again:
   * between two transactions no other consumer finds them with this lane's rollback in their row and counts it as a
   * crash.
   */
  private void handleEachAlone(List<Long> ids, long failedId, Throwable failure) {
    Set<Long> remaining = new LinkedHashSet<>(ids);
    while (!remaining.isEmpty() && running) {
      try {
        context.store.inHeldTransaction(tx -> {
          handleFirst(tx, remaining, failedId, failure);
          return null;
        });
      } catch (RuntimeException e) {
        log.warn("subscriber of \"{}\": a transaction of one message failed ({}); its messages are claimable again",
            queue, e.toString());
        return;
      }
    }
  }

  private void handleFirst(HeldTransaction tx, Set<Long> remaining, long failedId, Throwable failure) {
    List<LockedMessage> again = tx.lockAgain(new ArrayList<>(remaining));
    Set<Long> lockedIds = new HashSet<>();
    again.forEach(message -> lockedIds.add(message.message().id()));
    remaining.retainAll(lockedIds);
    if (again.isEmpty()) {
      return;
    }
    LockedMessage first = again.get(0);
    long id = first.message().id();
    remaining.remove(id);
    if (id == failedId) {
      settle(tx, first, failure);
      return;
    }
    long ticket = turns.ticket();
    if (!turns.await(ticket)) {
      return; // closing: committed unhandled, it goes back to the queue
    }
    long start = context.now();
    try {
      tx.inSavepoint(savepoint -> handler.handle(first.message(), savepoint));
      context.store.handled(context.now() - start, false);
    } catch (Exception e) {
      context.store.handled(context.now() - start, true);
      context.failed.incrementAndGet();
      settle(tx, first, e);
      return;
    } finally {
      turns.done();
    }
    tx.delete(List.of(id));
    context.acked.incrementAndGet();
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
    /** Messages of the batch it quarantined: their last delivery ended without commit. */
    List<Long> quarantined = List.of();
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
