package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.FailureOutcome;
import dev.msgqueue.MessageHandler;
import dev.msgqueue.internal.support.DaemonThreads;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One subscriber's consuming pipeline: claims into a bounded room (free handlers plus the prefetch buffer), a handler
 * pool, and an ack batcher, plus a housekeeping round (lease renewal, keep-alive, ack retries, hand-backs, failure
 * settlement). Claims, acks and housekeeping rounds are tasks on the {@link ConsumerThreads} shared by the subscribers
 * of one repository; only handlers run on threads of this subscriber, started while messages wait and ended when idle.
 *
 * <p>The room is a semaphore of {@code concurrency + prefetch} permits taken before a claim is sent (as many as it
 * asks for) and given back for what it did not find and as each handler ends: so the messages claimed or being
 * claimed never exceed the free room plus the prefetch. While claims find full batches, up to
 * {@link #maxClaimsInFlight} run at once; otherwise one. Up to as many ack statements run at once, each of at most
 * {@code batchSize} receipts.
 */
public final class ConsumerPipeline {
  private static final Logger log = LoggerFactory.getLogger(ConsumerPipeline.class);
  private static final long NEVER = Long.MAX_VALUE;
  /** The first wait after an empty claim that followed claims that found messages; it doubles from there. */
  private static final long FIRST_RECHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
  /** Attempts of one ack statement; then its messages are handed back to the queue instead. */
  private static final int ACK_ATTEMPTS = 5;
  /** Attempts to hand back the messages of an ack that kept failing; then they are left to the mode, loudly. */
  private static final int HAND_BACK_ATTEMPTS = 5;
  /** The wait before the second attempt of a failed ack; it doubles with each attempt, up to the next one. */
  private static final long FIRST_ACK_RETRY_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
  private static final long MAX_ACK_RETRY_NANOS = TimeUnit.SECONDS.toNanos(1);
  /** The most claims (and, separately, ack statements) of one subscriber in flight at once. */
  private static final int MAX_STATEMENTS_IN_FLIGHT = 4;
  /** How long close() waits for a housekeeping round or ack statement already running. */
  private static final long HOUSEKEEPING_STOP_NANOS = TimeUnit.SECONDS.toNanos(30);
  private static final long HANDLER_IDLE_SECONDS = 10;

  private final ConsumerStore store;
  private final MessageHandler handler;
  private final ConsumerThreads threads;
  private final String queue;
  private final int batchSize;
  private final int concurrency;
  private final int claimThreshold;
  private final int fullBatch;
  private final int maxClaimsInFlight;
  private final int maxAcksInFlight;
  private final Duration lease;
  private final boolean retries;
  private final long leaseNanos;
  private final long maxHandlerNanos;
  private final long ackDelayNanos;
  private final long pollNanos;
  private final long maxIdlePollNanos;
  private final long followUpNanos;
  private final long keepAliveNanos;
  private final PipelineSettings settings;

  /** Free room: handlers plus prefetch, taken before a claim is sent. */
  private final Semaphore slots;
  private final ThreadPoolExecutor handlers;
  private final ConcurrentLinkedQueue<Held> ready = new ConcurrentLinkedQueue<>();
  private final AtomicInteger busyHandlerThreads = new AtomicInteger();

  private final Object claimLock = new Object();
  private int claimsInFlight; // guarded by claimLock
  private boolean fullClaims; // guarded by claimLock: the last claim found all it asked for
  private long recheckNanos = FIRST_RECHECK_NANOS; // guarded by claimLock
  private long idlePollNanos; // guarded by claimLock
  private long followUpAt = NEVER; // guarded by claimLock
  private ScheduledFuture<?> nextPoll; // guarded by claimLock
  private final AtomicLong wakeCount = new AtomicLong();
  private final AtomicBoolean waitingForRoom = new AtomicBoolean();

  private volatile boolean running = true;
  private volatile boolean stopping;
  private final AtomicBoolean closed = new AtomicBoolean();

  /** Every message claimed and not yet acked, failed or handed back, by id. */
  private final Map<Long, Held> held = new ConcurrentHashMap<>();
  private final ConcurrentLinkedQueue<Held> finished = new ConcurrentLinkedQueue<>();
  private final AtomicInteger finishedCount = new AtomicInteger();
  private final AtomicInteger acksInFlight = new AtomicInteger();
  private final AtomicBoolean ackTimerArmed = new AtomicBoolean();
  private final ConcurrentLinkedQueue<Held> unstarted = new ConcurrentLinkedQueue<>();
  private final ConcurrentLinkedQueue<Failure> failures = new ConcurrentLinkedQueue<>();
  private final ConcurrentLinkedQueue<PendingAck> failedAcks = new ConcurrentLinkedQueue<>();
  /**
   * Lease mode: a renewal replaces receipts, so it excludes the ack statements and failure settlements that read
   * them (those share it among themselves); an ack therefore never sends a receipt a renewal is about to replace.
   */
  private final ReadWriteLock receipts = new ReentrantReadWriteLock();

  private final AtomicBoolean housekeepingQueued = new AtomicBoolean();
  private volatile boolean housekeepingAgain;
  private volatile boolean housekeeperStopped;
  private ScheduledFuture<?> nextHousekeeping; // guarded by this
  /** When the armed round is due; NEVER once it fired (written under this, read without it by starting handlers). */
  private volatile long nextHousekeepingAt = NEVER;
  private volatile long nextKeepAlive; // written by start() and then by one housekeeping round at a time

  private final AtomicLong claimRounds = new AtomicLong();
  private final AtomicLong ackFlushes = new AtomicLong();
  private final AtomicLong leaseRenewals = new AtomicLong();
  private final AtomicLong wakeups = new AtomicLong();
  private final AtomicLong acked = new AtomicLong();
  private final AtomicLong failed = new AtomicLong();
  private final AtomicLong handedBack = new AtomicLong();
  private final AtomicLong deadLettered = new AtomicLong();
  private final AtomicInteger inFlight = new AtomicInteger();
  private final AtomicInteger largestAck = new AtomicInteger();
  private final AtomicInteger leastFreeRoom;

  /** A pipeline on {@code threads}, which it {@link ConsumerThreads#release releases} on close. */
  public ConsumerPipeline(ConsumerStore store, MessageHandler handler, PipelineSettings settings,
      ConsumerThreads threads) {
    this.store = store;
    this.handler = handler;
    this.settings = settings;
    this.threads = threads;
    this.queue = store.queueName();
    this.batchSize = settings.batchSize();
    this.concurrency = settings.concurrency();
    int capacity = settings.capacity();
    this.fullBatch = Math.min(batchSize, capacity);
    this.claimThreshold = Math.max(1, (fullBatch + 1) / 2);
    this.maxClaimsInFlight = Math.max(1, Math.min(MAX_STATEMENTS_IN_FLIGHT, capacity / claimThreshold));
    this.maxAcksInFlight = Math.max(1, Math.min(MAX_STATEMENTS_IN_FLIGHT, concurrency));
    this.lease = settings.lease();
    this.retries = settings.retries();
    this.leaseNanos = lease == null ? 0 : lease.toNanos();
    this.maxHandlerNanos = settings.maxHandlerTime().toNanos();
    this.ackDelayNanos = settings.ackDelay().toNanos();
    this.pollNanos = settings.pollInterval().toNanos();
    this.idlePollNanos = pollNanos;
    this.maxIdlePollNanos = Math.max(pollNanos, PipelineSettings.MAX_IDLE_POLL_INTERVAL.toNanos());
    this.followUpNanos = settings.wakeupWindow().toNanos();
    this.keepAliveNanos = settings.keepAliveInterval().toNanos();
    this.slots = new Semaphore(capacity);
    this.leastFreeRoom = new AtomicInteger(capacity);
    this.handlers = new ThreadPoolExecutor(concurrency, concurrency, HANDLER_IDLE_SECONDS, TimeUnit.SECONDS,
        new LinkedBlockingQueue<>(), DaemonThreads.numbered("msgqueue-handler-" + queue));
    handlers.allowCoreThreadTimeOut(true);
  }

  /** Binds the queue and sends the first claim. On failure nothing keeps running and the threads are released. */
  public void start() {
    try {
      store.bindQueue();
    } catch (RuntimeException e) {
      running = false;
      closed.set(true);
      handlers.shutdownNow();
      threads.release();
      throw e;
    }
    nextKeepAlive = System.nanoTime() + keepAliveNanos;
    scheduleHousekeeping(nextKeepAlive);
    claimNow();
  }

  /** A wake-up: claims at once, and once more a wake-up window later for notifications coalesced away. */
  public void wake() {
    wakeups.incrementAndGet();
    wakeCount.incrementAndGet();
    synchronized (claimLock) {
      followUpAt = System.nanoTime() + followUpNanos;
      claimNow();
    }
  }

  public boolean isClosing() {
    return closed.get();
  }

  public long claimRounds() {
    return claimRounds.get();
  }

  public long ackFlushes() {
    return ackFlushes.get();
  }

  public long leaseRenewals() {
    return leaseRenewals.get();
  }

  public long wakeups() {
    return wakeups.get();
  }

  public long acked() {
    return acked.get();
  }

  public long deadLettered() {
    return deadLettered.get();
  }

  public long handedBack() {
    return handedBack.get();
  }

  /** The name prefix of the shared threads this pipeline runs on. */
  public String sharedThreadPrefix() {
    return threads.namePrefix();
  }

  /** The most receipts one ack statement carried so far. */
  public int largestAck() {
    return largestAck.get();
  }

  /** The most messages claimed or being claimed at once and not yet handled (running, waiting or asked for). */
  public int mostHeld() {
    return settings.capacity() - leastFreeRoom.get();
  }

  /**
   * Stops claiming, waits for the claims in flight, hands the buffered (claimed, not started) messages back, lets the
   * running handlers finish within {@code timeout}, flushes their acks and returns; releases the shared threads.
   *
   * @return whether every running handler finished within the timeout
   */
  public boolean close(Duration timeout) {
    running = false;
    stopping = true;
    if (!closed.compareAndSet(false, true)) {
      return handlers.isTerminated();
    }
    long deadline = System.nanoTime() + timeout.toNanos();
    boolean finishedInTime = false;
    try {
      // A claim that returns from now on hands its messages back itself, so handlers and claims are awaited together.
      handlers.shutdown();
      finishedInTime = handlers.awaitTermination(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      synchronized (claimLock) {
        cancelNextPoll();
        while (claimsInFlight > 0) {
          long remaining = deadline - System.nanoTime();
          if (remaining <= 0) {
            // Stuck in the database: the claim hands its messages back itself when it returns.
            log.warn("subscriber of \"{}\" closes with {} claim(s) still running; their messages are handed back"
                + " when they return", queue, claimsInFlight);
            break;
          }
          TimeUnit.NANOSECONDS.timedWait(claimLock, remaining);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (!finishedInTime) {
      log.warn("subscriber of \"{}\" closed with {} handler(s) still running after {}; they are interrupted and not"
          + " acked ({})", queue, inFlight.get(), timeout,
          lease != null ? "redelivered after their lease" : "they stay ASSIGNED until they expire");
      handlers.shutdownNow();
    }
    stopHousekeeping();
    // Nothing else runs for this subscriber now: this thread owns the receipts.
    flushAllAcks();
    settleFailures();
    for (Held message : held.values()) {
      if (message.startedNanos == 0 && !message.done) {
        unstarted.add(message);
      }
    }
    handBackUnstarted();
    threads.release();
    log.info("subscriber of \"{}\" closed: {} acked, {} failed, {} handed back unstarted", queue, acked.get(),
        failed.get(), handedBack.get());
    return finishedInTime;
  }

  private void stopHousekeeping() {
    housekeeperStopped = true;
    synchronized (this) {
      if (nextHousekeeping != null) {
        nextHousekeeping.cancel(false);
      }
    }
    long until = System.nanoTime() + HOUSEKEEPING_STOP_NANOS;
    while ((housekeepingQueued.get() || acksInFlight.get() > 0) && System.nanoTime() - until < 0) {
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
    }
  }

  // ---- claims ----

  /** Sends claims while there is room and fewer than the allowed number run; never blocks. */
  private void claimNow() {
    synchronized (claimLock) {
      if (!running) {
        return;
      }
      cancelNextPoll();
      int allowed = fullClaims ? maxClaimsInFlight : 1;
      while (claimsInFlight < allowed) {
        // Set before the room is read: a handler that frees room after this read sees it and claims again.
        waitingForRoom.set(true);
        int free = slots.availablePermits();
        if (!worthClaiming(free)) {
          return;
        }
        waitingForRoom.set(false);
        int wanted = Math.min(batchSize, free);
        slots.acquireUninterruptibly(wanted); // never waits: only this lock's holder takes room
        leastFreeRoom.accumulateAndGet(slots.availablePermits(), Math::min);
        claimsInFlight++;
        long wakesBefore = wakeCount.get();
        if (!submit(() -> claim(wanted, wakesBefore))) {
          claimsInFlight--;
          slots.release(wanted);
          return;
        }
      }
    }
  }

  /**
   * One claim's task. Whatever happens, it ends by deciding what follows, so claiming never stops silently: a failure
   * nobody expects is logged and claiming goes on after a poll interval; only a {@link VirtualMachineError} ends the
   * task, logged as such.
   */
  private void claim(int wanted, long wakesBefore) {
    int found = -1;
    try {
      found = claimAndDispatch(wanted);
    } catch (VirtualMachineError fatal) {
      log.error("subscriber of \"{}\": a claim failed fatally; claiming again after the poll interval", queue, fatal);
      throw fatal;
    } catch (RuntimeException | Error e) {
      log.error("subscriber of \"{}\": unexpected failure after a claim; claiming again after the poll interval",
          queue, e);
    } finally {
      claimDone(Math.max(0, found), wanted, found < 0, wakesBefore);
    }
  }

  /** @return how many messages the claim found, or -1 if its statement failed (its room is given back either way) */
  private int claimAndDispatch(int wanted) {
    long claimedAt = System.nanoTime(); // before the statement: never later than the deadline the server stores
    List<ClaimedMessage> claimed;
    try {
      claimed = store.claim(wanted);
      claimRounds.incrementAndGet();
    } catch (RuntimeException | Error e) {
      slots.release(wanted);
      if (e instanceof VirtualMachineError fatal) {
        throw fatal;
      }
      if (e instanceof RuntimeException) {
        // One line per failed poll while the database is away; the stack trace only at debug.
        log.warn("subscriber of \"{}\": claim failed ({}), retrying after the poll interval", queue, e.toString());
        log.debug("claim failure", e);
      } else {
        log.error("subscriber of \"{}\": unexpected failure in a claim; claiming again after the poll interval",
            queue, e);
      }
      return -1;
    }
    int found = claimed.size();
    if (retries && !claimed.isEmpty()) {
      try {
        claimed = store.countRedeliveries(claimed);
      } catch (RuntimeException e) {
        // Delivered uncounted (never lost): their claim stands, and the next failure or lapse counts again.
        log.warn("subscriber of \"{}\": counting redeliveries failed ({}); delivering them uncounted", queue,
            e.toString());
      }
    }
    if (!running) {
      slots.release(wanted);
      handBackClaimedWhileClosing(claimed);
      return found;
    }
    slots.release(wanted - claimed.size());
    for (ClaimedMessage message : claimed) {
      Held entry = new Held(message, claimedAt, claimedAt + leaseNanos);
      held.put(message.id(), entry);
      ready.add(entry);
    }
    if (!claimed.isEmpty()) {
      startHandlerThread();
    }
    return found;
  }

  private void handBackClaimedWhileClosing(List<ClaimedMessage> claimed) {
    if (claimed.isEmpty()) {
      return;
    }
    try {
      handedBack.addAndGet(store.release(claimed).size());
    } catch (RuntimeException e) {
      log.warn("could not hand {} message(s) of \"{}\" claimed during close back{}", claimed.size(), queue,
          lease != null ? "; they are redelivered after their lease" : "; they stay ASSIGNED until they expire", e);
    }
  }

  /** Decides what follows a claim: another at once, a recheck, a poll later, or nothing while others run. */
  private void claimDone(int found, int wanted, boolean claimFailed, long wakesBefore) {
    synchronized (claimLock) {
      claimsInFlight--;
      if (!running) {
        claimLock.notifyAll();
        return;
      }
      fullClaims = found == wanted;
      if (found > 0) {
        recheckNanos = FIRST_RECHECK_NANOS;
        idlePollNanos = pollNanos;
        claimNow(); // messages were there: there may be more
        return;
      }
      if (!claimFailed && wakeCount.get() != wakesBefore) {
        claimNow(); // a wake-up came while the claim ran: its message may have committed after the claim's snapshot
        return;
      }
      if (claimsInFlight > 0) {
        return; // the last claim to return decides
      }
      long now = System.nanoTime();
      long wait;
      if (claimFailed) {
        wait = pollNanos;
        recheckNanos = NEVER;
      } else if (recheckNanos != NEVER) {
        wait = recheckNanos;
        recheckNanos = recheckNanos >= pollNanos / 2 ? NEVER : recheckNanos * 2;
      } else {
        wait = nextIdlePoll();
      }
      if (followUpAt != NEVER) {
        if (followUpAt - now > 0) {
          wait = Math.min(wait, followUpAt - now);
        } else {
          followUpAt = NEVER;
        }
      }
      schedulePoll(wait);
    }
  }

  /**
   * The wait before the next idle poll: it doubles (up to {@link PipelineSettings#MAX_IDLE_POLL_INTERVAL}) while a
   * wake-up listener is connected, since a publish wakes the subscriber anyway, and is the poll interval otherwise.
   */
  private long nextIdlePoll() {
    boolean listening = settings.wakeupsListening() != null && settings.wakeupsListening().getAsBoolean();
    if (!listening) {
      idlePollNanos = pollNanos;
      return pollNanos;
    }
    long wait = idlePollNanos;
    idlePollNanos = Math.min(maxIdlePollNanos, idlePollNanos * 2);
    return wait;
  }

  private void schedulePoll(long waitNanos) {
    cancelNextPoll();
    try {
      nextPoll = threads.schedule(this::claimNow, waitNanos);
    } catch (RejectedExecutionException e) {
      log.debug("subscriber of \"{}\": the shared threads are shut down, no more polls", queue);
    }
  }

  private void cancelNextPoll() {
    if (nextPoll != null) {
      nextPoll.cancel(false);
      nextPoll = null;
    }
  }

  /**
   * Whether a claim into {@code free} room is worth its statement: a whole batch fits, or at least half of one fits
   * and the buffer has run dry (handlers are about to wait). Claiming whenever half a batch fits would halve the claims
   * of quick handlers (a claim is sent the moment half of the last one is handled), doubling the statements per
   * message for no gain: the other half is handled long before the claim returns.
   */
  private boolean worthClaiming(int free) {
    return free >= fullBatch || (free >= claimThreshold && ready.isEmpty());
  }

  /** A handler ended and gave back its room: claims again if the claims wait for room. */
  private void roomFreed() {
    if (waitingForRoom.get() && worthClaiming(slots.availablePermits()) && waitingForRoom.compareAndSet(true, false)) {
      claimNow();
    }
  }

  // ---- handlers ----

  /**
   * Puts one more handler thread to work on {@link #ready}, unless {@code concurrency} already are. Each handler
   * thread that takes a message while more are ready starts the next one, so threads join only while messages wait
   * for them: a batch of quick handlers costs a hand-off or two, not one per message.
   */
  private void startHandlerThread() {
    if (reserveHandlerThread()) {
      try {
        handlers.execute(this::handleReady);
      } catch (RejectedExecutionException e) {
        // Only after close() stopped the handlers; close() hands the messages back.
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
        while ((entry = ready.poll()) != null) {
          if (!ready.isEmpty()) {
            startHandlerThread();
          }
          handle(entry);
        }
      } finally {
        busyHandlerThreads.decrementAndGet();
      }
    } while (!ready.isEmpty() && reserveHandlerThread());
  }

  private void handle(Held entry) {
    boolean started = false;
    try {
      if (stopping || (lease != null && System.nanoTime() - entry.claimedNanos > leaseNanos / 2)) {
        // Closing, or it waited so long that its lease could run out while it runs: not started, handed back.
        unstarted.add(entry);
        requestHousekeeping();
        return;
      }
      started = true;
      entry.startedNanos = System.nanoTime();
      inFlight.incrementAndGet();
      if (lease != null) {
        renewBy(entry.leaseEndsNanos - leaseNanos / 2);
      }
      try {
        handler.handle(entry.receipt);
      } catch (Exception | Error e) {
        store.handled(System.nanoTime() - entry.startedNanos, true);
        failed.incrementAndGet();
        entry.done = true;
        handlerFailed(entry, e);
        if (e instanceof VirtualMachineError fatal) {
          throw fatal;
        }
        return;
      }
      store.handled(System.nanoTime() - entry.startedNanos, false);
      entry.done = true;
      finished.add(entry);
      int pending = finishedCount.incrementAndGet();
      if (pending >= batchSize) {
        startAckFlush();
      } else if (pending == 1) {
        armAckTimer();
      }
    } finally {
      if (started) {
        inFlight.decrementAndGet();
      }
      slots.release();
      roomFreed();
    }
  }

  private void handlerFailed(Held entry, Throwable e) {
    ClaimedMessage message = entry.receipt;
    if (retries) {
      // Settled by a housekeeping round, under the receipts lock (a lease renewal could be in flight).
      failures.add(new Failure(entry, e));
      requestHousekeeping();
      log.warn("handler failed on message {} of \"{}\"; it is retried after a backoff or dead-lettered", message.id(),
          queue, e);
    } else if (lease != null) {
      held.remove(message.id());
      log.warn("handler failed on message {} of \"{}\"; it is redelivered after its lease ({})", message.id(), queue,
          lease, e);
    } else {
      held.remove(message.id());
      log.error("handler failed on message {} of \"{}\"; it stays ASSIGNED and is not redelivered (default mode;"
          + " lease mode redelivers)", message.id(), queue, e);
    }
  }

  // ---- acks ----

  private void armAckTimer() {
    if (ackTimerArmed.compareAndSet(false, true)) {
      try {
        threads.schedule(() -> {
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
    if (acksInFlight.incrementAndGet() > maxAcksInFlight || housekeeperStopped || !submit(this::flushAcks)) {
      acksInFlight.decrementAndGet();
    }
  }

  /** One ack statement's task: flushes full batches while a backlog lasts, leaves a partial one to its delay. */
  private void flushAcks() {
    try {
      do {
        takeAndAck();
      } while (finishedCount.get() >= batchSize && !housekeeperStopped);
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
    boolean locked = lease != null;
    if (locked) {
      receipts.readLock().lock();
    }
    try {
      List<ClaimedMessage> batch = new ArrayList<>(Math.min(batchSize, Math.max(1, finishedCount.get())));
      Held entry;
      while (batch.size() < batchSize && (entry = finished.poll()) != null) {
        held.remove(entry.receipt.id());
        batch.add(entry.receipt);
      }
      if (batch.isEmpty()) {
        return 0;
      }
      finishedCount.addAndGet(-batch.size());
      attempt(new PendingAck(batch));
      return batch.size();
    } finally {
      if (locked) {
        receipts.readLock().unlock();
      }
    }
  }

  /** On close, once nothing else runs: every pending ack, in batches, and every failed one to its end. */
  private void flushAllAcks() {
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
   * handing them back to the queue. A failed attempt is scheduled again after a backoff until the attempts run out.
   */
  private void attempt(PendingAck ack) {
    ack.attempts++;
    RuntimeException failure;
    if (ack.attempts <= ACK_ATTEMPTS) {
      ackFlushes.incrementAndGet();
      largestAck.accumulateAndGet(ack.receipts.size(), Math::max);
      try {
        int deleted = store.ack(ack.receipts);
        acked.addAndGet(deleted);
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
      log.warn("ack of {} handled message(s) of \"{}\" failed {} times; handing them back to the queue",
          ack.receipts.size(), queue, ACK_ATTEMPTS, failure);
    }
    try {
      List<Long> released = store.release(ack.receipts);
      log.warn("{} handled message(s) of \"{}\" whose ack kept failing were handed back to the queue and are"
          + " delivered again", released.size(), queue);
      return;
    } catch (RuntimeException e) {
      failure = e;
    }
    if (ack.attempts < ACK_ATTEMPTS + HAND_BACK_ATTEMPTS - 1) { // the first hand-back shared the last ack's attempt
      retryLater(ack, "hand-back", failure);
      return;
    }
    log.error("could neither ack nor hand back {} handled message(s) of \"{}\"{}", ack.receipts.size(), queue,
        lease != null ? "; they are redelivered after their lease" : "; they stay ASSIGNED until they expire", failure);
  }

  private void retryLater(PendingAck ack, String what, RuntimeException failure) {
    long backoff = Math.min(MAX_ACK_RETRY_NANOS, FIRST_ACK_RETRY_NANOS << Math.min(20, ack.attempts - 1));
    ack.dueNanos = System.nanoTime() + backoff;
    failedAcks.add(ack);
    log.warn("{} of {} handled message(s) of \"{}\" failed (attempt {}), trying again in {} ms ({})", what,
        ack.receipts.size(), queue, ack.attempts, TimeUnit.NANOSECONDS.toMillis(backoff), failure.toString());
    log.debug("{} failure", what, failure);
    if (!housekeeperStopped) {
      scheduleHousekeeping(ack.dueNanos);
    }
  }

  // ---- housekeeping ----

  /** Runs a housekeeping round soon; rounds of one subscriber never overlap. */
  private void requestHousekeeping() {
    housekeepingAgain = true;
    if (housekeepingQueued.compareAndSet(false, true)) {
      if (housekeeperStopped || !submit(this::housekeep)) {
        housekeepingQueued.set(false);
      }
    }
  }

  private void housekeep() {
    long due = NEVER;
    try {
      do {
        housekeepingAgain = false;
        if (housekeeperStopped) {
          return;
        }
        due = housekeepingRound();
      } while (housekeepingAgain);
    } catch (RuntimeException | Error e) {
      log.error("subscriber of \"{}\": unexpected failure in a housekeeping round; another follows shortly", queue,
          e);
      due = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(100);
      if (e instanceof VirtualMachineError fatal) {
        throw fatal;
      }
    } finally {
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
    long nextAckRetry = failedAcks.isEmpty() ? NEVER : retryFailedAcksLocked();
    if (!unstarted.isEmpty()) {
      handBackUnstarted();
    }
    if (!failures.isEmpty()) {
      settleFailures();
    }
    long nextRenewal = lease == null ? NEVER : renewLeases();
    if (System.nanoTime() - nextKeepAlive >= 0) {
      keepAlive();
      nextKeepAlive = System.nanoTime() + keepAliveNanos;
    }
    return Math.min(nextKeepAlive, Math.min(nextRenewal, nextAckRetry));
  }

  private long retryFailedAcksLocked() {
    boolean locked = lease != null;
    if (locked) {
      receipts.readLock().lock();
    }
    try {
      return retryFailedAcks();
    } finally {
      if (locked) {
        receipts.readLock().unlock();
      }
    }
  }

  /**
   * A handler started (lease mode): makes sure a round comes by the time its lease needs renewing. Lock-free unless
   * the armed round is later, since every message passes here.
   */
  private void renewBy(long atNanos) {
    long armed = nextHousekeepingAt;
    if (armed == NEVER || armed - atNanos > 0) {
      scheduleHousekeeping(atNanos);
    }
  }

  /** Arms the next round at {@code atNanos}, unless one is armed for no later. */
  private synchronized void scheduleHousekeeping(long atNanos) {
    if (atNanos == NEVER || housekeeperStopped) {
      return;
    }
    if (nextHousekeeping != null && nextHousekeepingAt != NEVER && nextHousekeepingAt - atNanos <= 0) {
      return;
    }
    if (nextHousekeeping != null) {
      nextHousekeeping.cancel(false);
    }
    try {
      nextHousekeeping = threads.schedule(this::armedRoundDue, atNanos - System.nanoTime());
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
  private void settleFailures() {
    boolean locked = lease != null;
    if (locked) {
      receipts.readLock().lock();
    }
    try {
      Failure failure;
      while ((failure = failures.poll()) != null) {
        held.remove(failure.entry().receipt.id());
        try {
          if (store.fail(failure.entry().receipt, failure.error()) == FailureOutcome.DEAD_LETTERED) {
            deadLettered.incrementAndGet();
          }
        } catch (RuntimeException e) {
          log.warn("could not settle the failure of message {} of \"{}\"; it is redelivered after its lease",
              failure.entry().receipt.id(), queue, e);
        }
      }
    } finally {
      if (locked) {
        receipts.readLock().unlock();
      }
    }
  }

  /** Releases the messages claimed but never started, so any consumer can claim them at once. */
  private void handBackUnstarted() {
    List<ClaimedMessage> batch = new ArrayList<>();
    Held entry;
    while ((entry = unstarted.poll()) != null) {
      if (held.remove(entry.receipt.id(), entry)) {
        entry.done = true;
        batch.add(entry.receipt);
      }
    }
    for (int from = 0; from < batch.size(); from += batchSize) {
      List<ClaimedMessage> part = batch.subList(from, Math.min(batch.size(), from + batchSize));
      try {
        handedBack.addAndGet(store.release(part).size());
      } catch (RuntimeException e) {
        log.warn("could not hand {} unstarted message(s) of \"{}\" back{}", part.size(), queue,
            lease != null ? "; they are redelivered after their lease" : "; they stay ASSIGNED until they expire", e);
      }
    }
  }

  /**
   * Renews, in statements of at most {@code batchSize}, the lease of every running handler with less than half of it
   * left, unless the handler has run for {@code maxHandlerTime}.
   *
   * @return when to look again
   */
  private long renewLeases() {
    long now = System.nanoTime();
    long next = NEVER;
    receipts.writeLock().lock();
    try {
      List<Held> due = new ArrayList<>();
      for (Held entry : held.values()) {
        if (entry.startedNanos == 0 || entry.done || entry.lost) {
          continue;
        }
        if (now - entry.startedNanos >= maxHandlerNanos) {
          if (!entry.gaveUp) {
            entry.gaveUp = true;
            log.warn("handler of message {} of \"{}\" has run for more than {}; its lease is no longer renewed and"
                + " the message is redelivered when it runs out", entry.receipt.id(), queue,
                Duration.ofNanos(maxHandlerNanos));
          }
          continue;
        }
        long renewAt = entry.leaseEndsNanos - leaseNanos / 2;
        if (renewAt - now <= 0) {
          due.add(entry);
          next = Math.min(next, now + leaseNanos / 2); // renewed now: due again half a lease from now
        } else {
          next = Math.min(next, renewAt);
        }
      }
      for (int from = 0; from < due.size(); from += batchSize) {
        if (!renew(due.subList(from, Math.min(due.size(), from + batchSize)))) {
          return System.nanoTime() + Math.max(TimeUnit.MILLISECONDS.toNanos(1), leaseNanos / 20);
        }
      }
      return next;
    } finally {
      receipts.writeLock().unlock();
    }
  }

  private boolean renew(List<Held> due) {
    List<ClaimedMessage> current = new ArrayList<>(due.size());
    due.forEach(entry -> current.add(entry.receipt));
    long renewedAt = System.nanoTime();
    try {
      Map<Long, ClaimedMessage> renewed = new HashMap<>();
      for (ClaimedMessage message : store.extendLeases(current)) {
        renewed.put(message.id(), message);
      }
      leaseRenewals.incrementAndGet();
      for (Held entry : due) {
        ClaimedMessage fresh = renewed.get(entry.receipt.id());
        if (fresh != null) {
          entry.receipt = fresh;
          entry.leaseEndsNanos = renewedAt + leaseNanos;
        } else {
          entry.lost = true;
          log.warn("message {} of \"{}\" lost its lease while its handler runs; it is delivered again",
              entry.receipt.id(), queue);
        }
      }
      return true;
    } catch (RuntimeException e) {
      log.warn("renewing {} lease(s) of \"{}\" failed, retrying shortly", due.size(), queue, e);
      return false;
    }
  }

  private void keepAlive() {
    try {
      if (store.keepAlive()) {
        log.info("subscriber of \"{}\" re-created its queue (it was missing)", queue);
      }
    } catch (RuntimeException e) {
      log.warn("subscriber of \"{}\": keep-alive failed, retrying next interval", queue, e);
    }
  }

  private boolean submit(Runnable task) {
    try {
      threads.workers().execute(task);
      return true;
    } catch (RejectedExecutionException e) {
      return false;
    }
  }

  private record Failure(Held entry, Throwable error) { }

  /** Handled messages whose ack is not settled yet, with the attempts made so far. */
  private static final class PendingAck {
    final List<ClaimedMessage> receipts;
    int attempts;
    long dueNanos;

    PendingAck(List<ClaimedMessage> receipts) {
      this.receipts = receipts;
    }
  }

  /** A claimed message from its claim until it is acked, fails or is handed back. */
  private static final class Held {
    /** The current receipt: replaced only by a lease renewal, under the receipts write lock. */
    volatile ClaimedMessage receipt;
    final long claimedNanos;
    volatile long leaseEndsNanos;
    volatile long startedNanos; // 0: not started
    volatile boolean done;
    volatile boolean lost;
    volatile boolean gaveUp;

    Held(ClaimedMessage receipt, long claimedNanos, long leaseEndsNanos) {
      this.receipt = receipt;
      this.claimedNanos = claimedNanos;
      this.leaseEndsNanos = leaseEndsNanos;
    }
  }
}
