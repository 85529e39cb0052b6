package dev.msgqueue;

import dev.msgqueue.internal.consume.Consumption;
import dev.msgqueue.internal.support.Arguments;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Consumes one queue: claims messages in batches, runs a {@link MessageHandler} on each with bounded concurrency, and
 * acks those it handled in batches. Build with {@link #builder}; {@link #close()} stops it gracefully.
 *
 * <ul>
 *   <li><b>Claiming.</b> One claimer thread claims up to {@code batchSize} messages into the handler slots plus a
 *       bounded buffer of {@code prefetch} messages waiting for a slot. It claims as soon as at least half a batch
 *       fits (so claims stay large and handlers never run dry), again at once while claims find messages, then
 *       waits for a wake-up, for room, or for the poll interval. After the start and after claims that found
 *       messages, the first empty claim is followed by others after 1, 2, 4, ... ms up to the poll interval: a queue
 *       that was busy a moment ago (or whose publishers start with the service) is likely to get more, and
 *       publishers commit in groups, so a steady stream is picked up within milliseconds even without a
 *       {@link WakeupListener}, at the cost of about {@code log2(pollInterval / 1 ms)} empty claims when the stream
 *       stops. Polling never stops, wake-ups or not.</li>
 *   <li><b>Acks.</b> A handler that returns has its message acked together with the others that finished about
 *       then: receipt-checked statements of at most {@code batchSize} receipts each, when {@code batchSize} acks are
 *       pending, {@code ackDelay} after the first pending one, and on close; a backlog is several statements. A
 *       receipt that no longer matches (its lease ran out and another claim took it) deletes nothing, while the rest
 *       of the batch is deleted. An ack statement that fails is tried again after 50, 100, 200 and 400 ms; if its
 *       fifth attempt fails too, its messages are handed back to the queue (PENDING, delivered again, in either
 *       mode) rather than left ASSIGNED, and the hand-back is itself tried up to five times, a second apart at most.
 *       Only if all of that fails do they stay ASSIGNED until they expire (lease mode: redelivered after the
 *       lease), logged as an error.</li>
 *   <li><b>Failures.</b> A handler that throws leaves its message to the mode: in lease mode it is redelivered after
 *       the lease; in the default mode it stays ASSIGNED until it expires (at-most-once). Neither blocks others.</li>
 *   <li><b>Lease mode.</b> The lease of each running handler is renewed (in batches) whenever less than half of it
 *       remains, for up to {@code maxHandlerTime} from the handler's start; after that its message is redelivered
 *       when the lease runs out. A buffered message starts only while at least half its lease remains; otherwise it
 *       is handed back to the queue unstarted, so waiting in the buffer never causes a second delivery.</li>
 *   <li><b>What a crash can lose (default mode).</b> At most {@code concurrency + prefetch} messages: those running
 *       and those claimed but not started. They stay ASSIGNED until they expire. Lease mode loses nothing.</li>
 *   <li><b>Queue.</b> {@link Builder#start()} binds the queue; while running it keeps the queue alive every
 *       {@link MsgQueueConfig#keepAliveInterval()} from its own housekeeping thread, never the claiming thread, so an
 *       auto-deleted queue with a live subscriber is never reaped. If the keep-alive finds the queue row busy (another
 *       transaction is writing it), the queue exists and nothing more is done; only a missing queue is re-created,
 *       with a bounded lock wait. Claims and acks never lock the queue row.</li>
 *   <li><b>Wake-ups.</b> With a {@link WakeupListener}, a publish wakes the subscriber at once; it also claims once
 *       more {@link MsgQueueConfig#wakeupWindow()} later, for messages whose notification was coalesced away.</li>
 * </ul>
 */
public final class Subscriber implements AutoCloseable {
  /** Default handler concurrency. */
  public static final int DEFAULT_CONCURRENCY = 8;
  /** Default largest claim, and the ack flush size. */
  public static final int DEFAULT_BATCH_SIZE = 100;
  /** Default longest wait of a finished handler's ack for others to share its statement. */
  public static final Duration DEFAULT_ACK_DELAY = Duration.ofMillis(5);
  /** The longest {@code ackDelay}. */
  public static final Duration MAX_ACK_DELAY = Duration.ofSeconds(1);
  /** Default longest time a handler's lease is renewed for (lease mode). */
  public static final Duration DEFAULT_MAX_HANDLER_TIME = Duration.ofMinutes(30);
  /** The most messages the buffer ahead of the handlers may hold. */
  public static final int MAX_PREFETCH = 10_000;
  /** The shortest poll interval. */
  public static final Duration MIN_POLL_INTERVAL = Duration.ofMillis(10);
  /** The longest poll interval. */
  public static final Duration MAX_POLL_INTERVAL = Duration.ofHours(1);
  /** The longest close timeout, of {@link Builder#closeTimeout} and {@link #close(Duration)}. */
  public static final Duration MAX_CLOSE_TIMEOUT = Duration.ofHours(1);

  private static final Logger log = LoggerFactory.getLogger(Subscriber.class);
  private static final long NEVER = Long.MAX_VALUE;
  /** The first wait after an empty claim that followed claims that found messages; it doubles from there. */
  private static final long FIRST_RECHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
  /** The longest a re-creating bind of a missing queue waits for a lock before trying again next interval. */
  private static final Duration BIND_LOCK_WAIT = Duration.ofSeconds(1);
  /** Attempts of one ack statement; then its messages are handed back to the queue instead. */
  private static final int ACK_ATTEMPTS = 5;
  /** Attempts to hand back the messages of an ack that kept failing; then they are left to the mode, loudly. */
  private static final int HAND_BACK_ATTEMPTS = 5;
  /** The wait before the second attempt of a failed ack; it doubles with each attempt, up to the next one. */
  private static final long FIRST_ACK_RETRY_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
  private static final long MAX_ACK_RETRY_NANOS = TimeUnit.SECONDS.toNanos(1);

  private final MsgQueueRepository repository;
  private final Consumption consumption;
  private final QueueSpec queue;
  private final MessageHandler handler;
  private final int batchSize;
  private final int claimThreshold;
  private final Duration pollInterval;
  private final Duration lease;
  private final RetryPolicy retryPolicy;
  private final long leaseNanos;
  private final long maxHandlerNanos;
  private final long ackDelayNanos;
  private final Duration closeTimeout;
  private final Semaphore slots;
  private final int concurrency;
  private final ExecutorService handlers;
  /** Claimed messages not yet taken by a handler thread, oldest first. */
  private final ConcurrentLinkedQueue<Held> ready = new ConcurrentLinkedQueue<>();
  /** Handler threads running {@link #handleReady}; at most {@link #concurrency}. */
  private final AtomicInteger busyHandlerThreads = new AtomicInteger();
  private final Thread claimer;
  private final Thread housekeeper;
  private final Runnable unregisterWakeups;

  private final ReentrantLock lock = new ReentrantLock();
  private final Condition signalled = lock.newCondition();
  private boolean wakeRequested; // guarded by lock
  private volatile boolean waitingForRoom; // written under lock, read without it by finishing handlers
  private volatile boolean running = true;
  private volatile boolean stopping; // close(): buffered messages are handed back instead of started
  private final AtomicBoolean closed = new AtomicBoolean();

  private final ReentrantLock housekeeping = new ReentrantLock();
  private final Condition housekeepingDue = housekeeping.newCondition();
  private boolean housekeepingRequested; // guarded by housekeeping
  private volatile boolean housekeeperStopped;

  /** Every message claimed and not yet acked, failed or handed back, by id. */
  private final Map<Long, Held> held = new ConcurrentHashMap<>();
  private final ConcurrentLinkedQueue<Held> finished = new ConcurrentLinkedQueue<>();
  private final AtomicInteger finishedCount = new AtomicInteger();
  private final ConcurrentLinkedQueue<Held> unstarted = new ConcurrentLinkedQueue<>();
  private final ConcurrentLinkedQueue<Failure> failures = new ConcurrentLinkedQueue<>();
  /** Acks whose statement failed, waiting for their next attempt; the housekeeper's, and close()'s once it stopped. */
  private final ConcurrentLinkedQueue<PendingAck> failedAcks = new ConcurrentLinkedQueue<>();

  private final AtomicLong claimRounds = new AtomicLong();
  private final AtomicLong ackFlushes = new AtomicLong();
  private final AtomicLong leaseRenewals = new AtomicLong();
  private final AtomicLong wakeups = new AtomicLong();
  private final AtomicLong acked = new AtomicLong();
  private final AtomicLong failed = new AtomicLong();
  private final AtomicLong handedBack = new AtomicLong();
  private final AtomicLong deadLettered = new AtomicLong();
  private final AtomicInteger inFlight = new AtomicInteger();

  private Subscriber(Builder builder) {
    this.repository = builder.repository;
    this.consumption = new Consumption(builder.repository.context());
    this.queue = builder.queue;
    this.handler = builder.handler;
    this.batchSize = builder.batchSize;
    int capacity = builder.concurrency + builder.effectivePrefetch();
    this.claimThreshold = Math.max(1, (Math.min(batchSize, capacity) + 1) / 2);
    this.pollInterval = builder.pollInterval;
    this.lease = builder.lease;
    this.retryPolicy = builder.retryPolicy;
    this.leaseNanos = lease == null ? 0 : lease.toNanos();
    this.maxHandlerNanos = builder.maxHandlerTime.toNanos();
    this.ackDelayNanos = builder.ackDelay.toNanos();
    this.closeTimeout = builder.closeTimeout;
    this.slots = new Semaphore(capacity);
    this.concurrency = builder.concurrency;
    this.handlers = Executors.newFixedThreadPool(builder.concurrency, named("msgqueue-handler-" + queue.name()));
    this.claimer = named("msgqueue-claimer-" + queue.name()).newThread(this::claimUntilClosed);
    this.housekeeper = named("msgqueue-housekeeper-" + queue.name()).newThread(this::housekeepUntilClosed);
    this.unregisterWakeups = builder.wakeups == null ? () -> { } : builder.wakeups.register(queue.name(), this::wake);
  }

  /**
   * A builder for a subscriber of {@code queue} on {@code repository} (whose configuration gives the keep-alive
   * interval and the wake-up window).
   */
  public static Builder builder(MsgQueueRepository repository, QueueSpec queue, MessageHandler handler) {
    return new Builder(repository, queue, handler);
  }

  public QueueSpec queue() {
    return queue;
  }

  /** Closes with the builder's close timeout; see {@link #close(Duration)}. */
  @Override
  public void close() {
    close(closeTimeout);
  }

  /**
   * Stops claiming, hands the buffered (claimed, not started) messages back to the queue, lets the running handlers
   * finish, flushes their acks, then returns; waits at most {@code timeout} for the handlers. Handlers still running
   * then are interrupted and not acked: in lease mode they are redelivered after their lease; in the default mode
   * they stay ASSIGNED until they expire. Do not call it from a handler: it would wait for that handler to finish,
   * that is for the whole timeout.
   *
   * @param timeout zero or positive, at most {@link #MAX_CLOSE_TIMEOUT}
   * @return whether every running handler finished within the timeout
   */
  public boolean close(Duration timeout) {
    Arguments.requireWithin(timeout, "timeout", Duration.ZERO, MAX_CLOSE_TIMEOUT);
    running = false; // before `closed`, so whoever sees isClosing() knows no new claim starts
    stopping = true; // and no buffered message either: a handler thread that frees up hands them back
    if (!closed.compareAndSet(false, true)) {
      return handlers.isTerminated();
    }
    long deadline = System.nanoTime() + timeout.toNanos();
    unregisterWakeups.run();
    signalWake();
    boolean finishedInTime = false;
    try {
      claimer.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
      if (claimer.isAlive()) {
        claimer.interrupt(); // stuck in a claim statement: give up on it
      }
      handlers.shutdown();
      finishedInTime = handlers.awaitTermination(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (!finishedInTime) {
      log.warn("subscriber of \"{}\" closed with {} handler(s) still running after {}; they are interrupted and not"
          + " acked ({})", queue.name(), inFlight.get(), timeout,
          lease != null ? "redelivered after their lease" : "they stay ASSIGNED until they expire");
      handlers.shutdownNow();
    }
    stopHousekeeper();
    // The housekeeper is gone: this thread owns the receipts now. Flush what finished, hand back what never started.
    flushAllAcks();
    settleFailures();
    for (Held message : held.values()) {
      if (message.startedNanos == 0 && !message.done) {
        unstarted.add(message);
      }
    }
    handBackUnstarted();
    log.info("subscriber of \"{}\" closed: {} acked, {} failed, {} handed back unstarted", queue.name(), acked.get(),
        failed.get(), handedBack.get());
    return finishedInTime;
  }

  private void stopHousekeeper() {
    housekeeperStopped = true;
    requestHousekeeping();
    try {
      housekeeper.join(TimeUnit.SECONDS.toMillis(30));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (housekeeper.isAlive()) {
      housekeeper.interrupt();
    }
  }

  /** Claims at once (called by the {@link WakeupListener}). */
  void wake() {
    wakeups.incrementAndGet();
    signalWake();
  }

  boolean isClosing() {
    return closed.get();
  }

  long claimRounds() {
    return claimRounds.get();
  }

  long ackFlushes() {
    return ackFlushes.get();
  }

  long leaseRenewals() {
    return leaseRenewals.get();
  }

  long wakeups() {
    return wakeups.get();
  }

  long acked() {
    return acked.get();
  }

  long deadLettered() {
    return deadLettered.get();
  }

  long handedBack() {
    return handedBack.get();
  }

  private Subscriber started() {
    repository.bindQueue(queue);
    claimer.start();
    housekeeper.start();
    return this;
  }

  /**
   * Runs the claim loop until close. A failure the loop does not expect is logged and the loop restarts after a poll
   * interval, so delivery never stops silently; only a {@link VirtualMachineError} stops it, logged as such.
   */
  private void claimUntilClosed() {
    while (running) {
      try {
        claimLoop();
      } catch (VirtualMachineError fatal) {
        log.error("subscriber of \"{}\": its claiming thread stopped; no more messages are delivered until it is"
            + " rebuilt", queue.name(), fatal);
        throw fatal;
      } catch (RuntimeException | Error e) {
        log.error("subscriber of \"{}\": unexpected failure in its claiming thread; claiming again after the poll"
            + " interval", queue.name(), e);
        awaitSignal(System.nanoTime() + pollInterval.toNanos(), false);
      }
    }
  }

  /** Like {@link #claimUntilClosed()}, for the housekeeping thread: logged, restarted shortly, never silent. */
  private void housekeepUntilClosed() {
    while (!housekeeperStopped) {
      try {
        housekeepingLoop();
      } catch (VirtualMachineError fatal) {
        log.error("subscriber of \"{}\": its housekeeping thread stopped; acks are flushed only on close",
            queue.name(), fatal);
        throw fatal;
      } catch (RuntimeException | Error e) {
        log.error("subscriber of \"{}\": unexpected failure in its housekeeping thread; resuming shortly",
            queue.name(), e);
        awaitHousekeeping(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(100));
      }
    }
  }

  private void claimLoop() {
    long followUpNanos = repository.config().wakeupWindow().toNanos();
    long followUpAt = NEVER;
    // After start and after claims that found messages: the wait after the next empty claim.
    long recheckNanos = FIRST_RECHECK_NANOS;
    boolean woken = false;
    while (running) {
      long now = System.nanoTime();
      if (woken) {
        followUpAt = now + followUpNanos;
      } else if (followUpAt != NEVER && now - followUpAt >= 0) {
        followUpAt = NEVER;
      }
      int free = slots.availablePermits();
      boolean foundNothing = false;
      if (free >= claimThreshold) {
        int wanted = Math.min(batchSize, free);
        int got = claimAndDispatch(wanted);
        if (got < 0) {
          followUpAt = NEVER; // the database failed: back off for a poll interval
          recheckNanos = NEVER;
        } else if (got > 0) {
          woken = false;
          recheckNanos = FIRST_RECHECK_NANOS;
          continue; // messages were there: there may be more (waiting for the poll here would add its latency)
        } else {
          foundNothing = true;
        }
      }
      long waitUntil = now + pollInterval.toNanos();
      if (followUpAt != NEVER) {
        waitUntil = Math.min(waitUntil, followUpAt);
      }
      if (foundNothing && recheckNanos != NEVER) {
        waitUntil = Math.min(waitUntil, System.nanoTime() + recheckNanos);
        recheckNanos = recheckNanos >= pollInterval.toNanos() / 2 ? NEVER : recheckNanos * 2;
      }
      woken = awaitSignal(waitUntil, free < claimThreshold);
    }
  }

  /** @return how many messages it claimed and dispatched, or -1 if the claim failed */
  private int claimAndDispatch(int wanted) {
    // Taken before the statement, so never later than the server's clock when it stored the deadline.
    long claimedAt = System.nanoTime();
    List<ClaimedMessage> claimed;
    try {
      claimed = lease == null ? repository.claim(queue.name(), wanted) : repository.claim(queue.name(), wanted, lease);
    } catch (RuntimeException e) {
      // One line per failed poll while the database is away; the stack trace only at debug.
      log.warn("subscriber of \"{}\": claim failed ({}), retrying after the poll interval", queue.name(), e.toString());
      log.debug("claim failure", e);
      return -1;
    }
    claimRounds.incrementAndGet();
    if (retryPolicy != null && !claimed.isEmpty()) {
      try {
        claimed = consumption.countRedeliveries(queue.name(), claimed, ClaimedMessage::receipt, retryPolicy);
      } catch (RuntimeException e) {
        // Delivered uncounted (never lost): their claim stands, and the next failure or lapse counts again.
        log.warn("subscriber of \"{}\": counting redeliveries failed ({}); delivering them uncounted", queue.name(),
            e.toString());
      }
    }
    for (ClaimedMessage message : claimed) {
      // Never blocks: at most `free` were claimed and only this thread takes slots.
      slots.acquireUninterruptibly();
      Held entry = new Held(message, claimedAt, claimedAt + leaseNanos);
      held.put(message.id(), entry);
      ready.add(entry);
    }
    if (!claimed.isEmpty()) {
      startHandlerThread();
    }
    return claimed.size();
  }

  /**
   * Puts one more handler thread to work on {@link #ready}, unless {@code concurrency} already are. Each handler
   * thread that takes a message while more are ready starts the next one, so threads join only while messages wait
   * for them: a batch of quick handlers costs a hand-off or two, not one per message, and slow handlers still get
   * every thread within a few hand-offs' time.
   */
  private void startHandlerThread() {
    if (reserveHandlerThread()) {
      try {
        handlers.execute(this::handleReady);
      } catch (RejectedExecutionException e) {
        // Only after close() gave up waiting for a claim stuck in the database; close() hands the messages back.
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

  /**
   * A handler thread's work: handles ready messages until there are none. A message made ready after this thread's
   * last look, while every handler thread still counted as busy, started none: the re-check after leaving picks it up.
   */
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
      try {
        handler.handle(entry.receipt);
      } catch (Exception | Error e) {
        repository.context().report().handled(queue.name(), System.nanoTime() - entry.startedNanos, true);
        failed.incrementAndGet();
        entry.done = true;
        ClaimedMessage message = entry.receipt;
        if (retryPolicy != null) {
          // Settled by the housekeeper, the only thread that changes receipts (a lease renewal could be in flight).
          failures.add(new Failure(entry, e));
          requestHousekeeping();
          log.warn("handler failed on message {} of \"{}\"; it is retried after a backoff or dead-lettered ({})",
              message.id(), queue.name(), retryPolicy, e);
        } else if (lease != null) {
          held.remove(message.id());
          log.warn("handler failed on message {} of \"{}\"; it is redelivered after its lease ({})",
              message.id(), queue.name(), lease, e);
        } else {
          held.remove(message.id());
          log.error("handler failed on message {} of \"{}\"; it stays ASSIGNED and is not redelivered (default mode;"
              + " lease mode redelivers)", message.id(), queue.name(), e);
        }
        if (e instanceof VirtualMachineError fatal) {
          throw fatal;
        }
        return;
      }
      repository.context().report().handled(queue.name(), System.nanoTime() - entry.startedNanos, false);
      entry.done = true;
      finished.add(entry);
      int pending = finishedCount.incrementAndGet();
      // Once when the first ack is pending (its delay starts) and once when a batch is full: every message passes
      // here, and the housekeeper looks again by itself while a full batch is still pending after a flush.
      if (pending == 1 || pending == batchSize) {
        requestHousekeeping();
      }
    } finally {
      if (started) {
        inFlight.decrementAndGet();
      }
      slots.release();
      roomFreed();
    }
  }

  /**
   * The housekeeping thread: flushes acks, hands back unstarted messages, renews the leases of running handlers and
   * keeps the queue alive, so the claiming thread only ever claims.
   */
  private void housekeepingLoop() {
    long keepAliveNanos = repository.config().keepAliveInterval().toNanos();
    long nextKeepAlive = System.nanoTime() + keepAliveNanos;
    long firstPendingAt = NEVER;
    while (!housekeeperStopped) {
      long now = System.nanoTime();
      int pending = finishedCount.get();
      if (pending > 0 && firstPendingAt == NEVER) {
        firstPendingAt = now;
      }
      if (pending >= batchSize || (pending > 0 && now - firstPendingAt >= ackDelayNanos)) {
        boolean fullBatch = flushAcks() == batchSize;
        // After a full batch, those left were pending before it (a backlog, flushed one batch per round so that
        // renewals and keep-alives still get their turn): they have waited long enough. Otherwise they finished
        // during the flush, and wait ackDelay for others as the first pending ack always does.
        firstPendingAt = finishedCount.get() == 0 ? NEVER : fullBatch ? firstPendingAt : System.nanoTime();
      }
      long nextAckRetry = failedAcks.isEmpty() ? NEVER : retryFailedAcks();
      if (!unstarted.isEmpty()) {
        handBackUnstarted();
      }
      if (!failures.isEmpty()) {
        settleFailures();
      }
      long nextRenewal = lease == null ? NEVER : renewLeases();
      if (now - nextKeepAlive >= 0) {
        keepAlive();
        nextKeepAlive = System.nanoTime() + keepAliveNanos;
      }
      long waitUntil = nextKeepAlive;
      if (firstPendingAt != NEVER) {
        waitUntil = Math.min(waitUntil, firstPendingAt + ackDelayNanos);
      }
      if (nextRenewal != NEVER) {
        waitUntil = Math.min(waitUntil, nextRenewal);
      }
      if (nextAckRetry != NEVER) {
        waitUntil = Math.min(waitUntil, nextAckRetry);
      }
      if (finishedCount.get() >= batchSize) {
        continue; // a full batch finished while this one was flushed
      }
      awaitHousekeeping(waitUntil);
    }
  }

  /**
   * Acks the oldest finished handlers' messages, at most {@code batchSize} of them, in one statement; a failed
   * statement is tried again later ({@link #retryFailedAcks}). Runs on the housekeeper, or on close after it.
   *
   * @return how many messages it took
   */
  private int flushAcks() {
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
  }

  /** On close, after the housekeeper stopped: every pending ack, in batches, and every failed one to its end. */
  private void flushAllAcks() {
    while (!finished.isEmpty()) {
      flushAcks();
    }
    while (!failedAcks.isEmpty()) {
      long next = retryFailedAcks();
      if (next == NEVER) {
        break; // the last ones were settled just now
      }
      long wait = next - System.nanoTime();
      if (wait > 0 && !Thread.currentThread().isInterrupted()) {
        LockSupport.parkNanos(wait); // interrupted: the remaining attempts follow at once, still bounded
      }
    }
  }

  /**
   * Makes the attempts of failed acks that are due, each once.
   *
   * @return when the next one is due, or {@link #NEVER}
   */
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
      try {
        int deleted = consumption.ack(queue.name(), ClaimedMessage.receipts(ack.receipts));
        acked.addAndGet(deleted);
        if (deleted < ack.receipts.size()) {
          log.warn("{} of {} handled message(s) of \"{}\" were not acked: their lease ran out and another claim took"
              + " them (or they expired{}), so they are delivered again", ack.receipts.size() - deleted,
              ack.receipts.size(), queue.name(), ack.attempts > 1 ? ", or a failed attempt did delete them" : "");
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
          ack.receipts.size(), queue.name(), ACK_ATTEMPTS, failure);
    }
    try {
      List<Long> released = consumption.release(ClaimedMessage.receipts(ack.receipts));
      log.warn("{} handled message(s) of \"{}\" whose ack kept failing were handed back to the queue and are"
          + " delivered again", released.size(), queue.name());
      return;
    } catch (RuntimeException e) {
      failure = e;
    }
    if (ack.attempts < ACK_ATTEMPTS + HAND_BACK_ATTEMPTS - 1) { // the first hand-back shared the last ack's attempt
      retryLater(ack, "hand-back", failure);
      return;
    }
    log.error("could neither ack nor hand back {} handled message(s) of \"{}\"{}", ack.receipts.size(), queue.name(),
        lease != null ? "; they are redelivered after their lease" : "; they stay ASSIGNED until they expire", failure);
  }

  private void retryLater(PendingAck ack, String what, RuntimeException failure) {
    long backoff = Math.min(MAX_ACK_RETRY_NANOS, FIRST_ACK_RETRY_NANOS << Math.min(20, ack.attempts - 1));
    ack.dueNanos = System.nanoTime() + backoff;
    failedAcks.add(ack);
    log.warn("{} of {} handled message(s) of \"{}\" failed (attempt {}), trying again in {} ms ({})", what,
        ack.receipts.size(), queue.name(), ack.attempts, TimeUnit.NANOSECONDS.toMillis(backoff), failure.toString());
    log.debug("{} failure", what, failure);
  }

  /** Hands each failed message to the retry policy: retried after its backoff, or dead-lettered. */
  private void settleFailures() {
    Failure failure;
    while ((failure = failures.poll()) != null) {
      held.remove(failure.entry().receipt.id());
      try {
        FailureOutcome outcome = repository.fail(failure.entry().receipt, failure.error(), retryPolicy);
        if (outcome == FailureOutcome.DEAD_LETTERED) {
          deadLettered.incrementAndGet();
        }
      } catch (RuntimeException e) {
        log.warn("could not settle the failure of message {} of \"{}\"; it is redelivered after its lease",
            failure.entry().receipt.id(), queue.name(), e);
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
    if (batch.isEmpty()) {
      return;
    }
    try {
      handedBack.addAndGet(consumption.release(ClaimedMessage.receipts(batch)).size());
    } catch (RuntimeException e) {
      log.warn("could not hand {} unstarted message(s) of \"{}\" back{}", batch.size(), queue.name(),
          lease != null ? "; they are redelivered after their lease" : "; they stay ASSIGNED until they expire", e);
    }
  }

  /**
   * Renews, in one statement, the lease of every running handler with less than half of it left, unless the handler
   * has run for {@code maxHandlerTime}.
   *
   * @return when to look again
   */
  private long renewLeases() {
    long now = System.nanoTime();
    long next = now + leaseNanos / 4;
    List<Held> due = new ArrayList<>();
    for (Held entry : held.values()) {
      if (entry.startedNanos == 0 || entry.done || entry.lost) {
        continue;
      }
      if (now - entry.startedNanos >= maxHandlerNanos) {
        if (!entry.gaveUp) {
          entry.gaveUp = true;
          log.warn("handler of message {} of \"{}\" has run for more than {}; its lease is no longer renewed and the"
              + " message is redelivered when it runs out", entry.receipt.id(), queue.name(),
              Duration.ofNanos(maxHandlerNanos));
        }
        continue;
      }
      if (entry.leaseEndsNanos - now < leaseNanos / 2) {
        due.add(entry);
      }
    }
    if (due.isEmpty()) {
      return next;
    }
    List<ClaimedMessage> receipts = new ArrayList<>(due.size());
    due.forEach(entry -> receipts.add(entry.receipt));
    long renewedAt = System.nanoTime();
    try {
      Map<Long, ClaimedMessage> renewed = new java.util.HashMap<>();
      for (ClaimedMessage message : repository.extendLeases(receipts, lease)) {
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
              entry.receipt.id(), queue.name());
        }
      }
    } catch (RuntimeException e) {
      log.warn("renewing {} lease(s) of \"{}\" failed, retrying shortly", due.size(), queue.name(), e);
      return Math.min(next, System.nanoTime() + Math.max(TimeUnit.MILLISECONDS.toNanos(1), leaseNanos / 20));
    }
    return next;
  }

  private void keepAlive() {
    try {
      if (repository.keepAlive(queue.name()) || consumption.queueExists(queue.name())) {
        return; // written, or its row is busy: another transaction is writing it, so it exists
      }
      consumption.bindWithin(queue, BIND_LOCK_WAIT.compareTo(repository.config().lockTimeout()) < 0
          ? BIND_LOCK_WAIT : repository.config().lockTimeout());
      log.info("subscriber of \"{}\" re-created its queue (it was missing)", queue.name());
    } catch (RuntimeException e) {
      log.warn("subscriber of \"{}\": keep-alive failed, retrying next interval", queue.name(), e);
    }
  }

  private void requestHousekeeping() {
    housekeeping.lock();
    try {
      housekeepingRequested = true;
      housekeepingDue.signalAll();
    } finally {
      housekeeping.unlock();
    }
  }

  private void awaitHousekeeping(long untilNanos) {
    housekeeping.lock();
    try {
      while (!housekeepingRequested && !housekeeperStopped) {
        long remaining = untilNanos - System.nanoTime();
        if (remaining <= 0) {
          break;
        }
        housekeepingDue.awaitNanos(remaining);
      }
      housekeepingRequested = false;
    } catch (InterruptedException e) {
      housekeeperStopped = true;
      Thread.currentThread().interrupt();
    } finally {
      housekeeping.unlock();
    }
  }

  /** A wake-up or close: the claimer claims (or stops) at once. */
  private void signalWake() {
    lock.lock();
    try {
      wakeRequested = true;
      signalled.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /**
   * A handler finished and released its slot: wakes the claimer if it waits for this much room. Lock-free unless it
   * does, since every message passes here. No wake-up is lost: the claimer sets {@link #waitingForRoom} before it
   * reads the free slots, and this reads the flag after releasing the slot, so one of the two sees the other; and the
   * claimer holds the lock from that read until it waits.
   */
  private void roomFreed() {
    if (waitingForRoom && slots.availablePermits() >= claimThreshold) {
      lock.lock();
      try {
        signalled.signalAll();
      } finally {
        lock.unlock();
      }
    }
  }

  /** @return whether a wake-up arrived (as opposed to a timeout or freed room) */
  private boolean awaitSignal(long untilNanos, boolean forRoom) {
    lock.lock();
    try {
      waitingForRoom = forRoom;
      while (running && !wakeRequested && !(forRoom && slots.availablePermits() >= claimThreshold)) {
        long remaining = untilNanos - System.nanoTime();
        if (remaining <= 0) {
          break;
        }
        signalled.awaitNanos(remaining);
      }
      boolean woken = wakeRequested;
      wakeRequested = false;
      waitingForRoom = false;
      return woken;
    } catch (InterruptedException e) {
      running = false;
      Thread.currentThread().interrupt();
      return false;
    } finally {
      lock.unlock();
    }
  }

  private static ThreadFactory named(String prefix) {
    AtomicInteger counter = new AtomicInteger();
    return runnable -> {
      Thread thread = new Thread(runnable, prefix + "-" + counter.incrementAndGet());
      thread.setDaemon(true);
      return thread;
    };
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
    /** The current receipt: replaced only by the housekeeper (lease renewal), or on close after it stopped. */
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

  /** Configures a {@link Subscriber}; every value is checked by {@link #start()}. */
  public static final class Builder {
    private final MsgQueueRepository repository;
    private final QueueSpec queue;
    private final MessageHandler handler;
    private int concurrency = DEFAULT_CONCURRENCY;
    private int batchSize = DEFAULT_BATCH_SIZE;
    private Integer prefetch; // null: batchSize
    private Duration pollInterval = Duration.ofSeconds(1);
    private Duration lease;
    private Duration maxHandlerTime = DEFAULT_MAX_HANDLER_TIME;
    private RetryPolicy retryPolicy;
    private Duration ackDelay = DEFAULT_ACK_DELAY;
    private WakeupListener wakeups;
    private Duration closeTimeout = Duration.ofSeconds(30);

    private Builder(MsgQueueRepository repository, QueueSpec queue, MessageHandler handler) {
      this.repository = Arguments.requireNonNull(repository, "repository");
      this.queue = Arguments.requireNonNull(queue, "queue");
      this.handler = Arguments.requireNonNull(handler, "handler");
    }

    /** How many handlers run at once, in [1, 1000]; default {@value Subscriber#DEFAULT_CONCURRENCY}. */
    public Builder concurrency(int value) {
      this.concurrency = value;
      return this;
    }

    /**
     * The most messages one claim takes and one ack statement deletes, in [1, 1000]; default
     * {@value Subscriber#DEFAULT_BATCH_SIZE}.
     */
    public Builder batchSize(int value) {
      this.batchSize = value;
      return this;
    }

    /**
     * The most messages claimed ahead of the handlers, waiting for a free handler, in [0, {@value
     * Subscriber#MAX_PREFETCH}]; default: the batch size. In the default (at-most-once) mode a crash loses at most
     * {@code concurrency + prefetch} messages (those running and those waiting); 0 claims only into free handlers,
     * in smaller claims. In lease mode a waiting message is started only while at least half its lease remains,
     * else handed back to the queue unstarted.
     */
    public Builder prefetch(int value) {
      this.prefetch = value;
      return this;
    }

    /**
     * How long an idle subscriber waits between claims when no wake-up comes; default 1 s, in
     * [{@link Subscriber#MIN_POLL_INTERVAL}, {@link Subscriber#MAX_POLL_INTERVAL}].
     */
    public Builder pollInterval(Duration value) {
      this.pollInterval = Arguments.requireWithin(value, "pollInterval", MIN_POLL_INTERVAL, MAX_POLL_INTERVAL);
      return this;
    }

    /**
     * Turns on lease mode: a message not acked within {@code value} (a handler that threw, or a crashed process) is
     * redelivered, at-least-once. While a handler runs its lease is renewed, up to {@link #maxHandlerTime}. Default:
     * off (at-most-once).
     */
    public Builder lease(Duration value) {
      this.lease = MsgQueueRepository.requireValidLease(value);
      return this;
    }

    /**
     * Lease mode: what happens to a message whose handler throws. With a policy, the message is retried after the
     * policy's exponential backoff with jitter, and moved to its dead-letter queue after {@code maxDeliveries}
     * deliveries (a delivery whose lease ran out, as in a crash, counts too); see
     * {@link MsgQueueRepository#fail}. Without one (the default) it is redelivered when its lease runs out,
     * without limit until it expires. Requires {@link #lease}.
     */
    public Builder retryPolicy(RetryPolicy value) {
      this.retryPolicy = Arguments.requireNonNull(value, "retryPolicy");
      return this;
    }

    /**
     * Lease mode: how long a running handler's lease is renewed for, from its start; after that its message is
     * redelivered when the lease runs out. In (0, a year]; default 30 minutes.
     */
    public Builder maxHandlerTime(Duration value) {
      this.maxHandlerTime = Arguments.requirePositiveAtMost(value, "maxHandlerTime", MsgQueueConfig.MAX_MESSAGE_LIFETIME);
      return this;
    }

    /**
     * The longest a finished handler's ack waits for others to share its statement, in [0, 1 s]; default 5 ms. A
     * full batch of acks is flushed at once, and close() flushes what is pending.
     */
    public Builder ackDelay(Duration value) {
      this.ackDelay = Arguments.requireWithin(value, "ackDelay", Duration.ZERO, MAX_ACK_DELAY);
      return this;
    }

    /**
     * The process's {@link WakeupListener}, for claims at once after a publish; default (and {@code null}): none,
     * polling only.
     */
    public Builder wakeups(WakeupListener value) {
      this.wakeups = value;
      return this;
    }

    /**
     * The longest {@link Subscriber#close()} waits for running handlers; default 30 s, zero or positive, at most
     * {@link Subscriber#MAX_CLOSE_TIMEOUT}.
     */
    public Builder closeTimeout(Duration value) {
      this.closeTimeout = Arguments.requireWithin(value, "closeTimeout", Duration.ZERO, MAX_CLOSE_TIMEOUT);
      return this;
    }

    int effectivePrefetch() {
      return prefetch == null ? batchSize : prefetch;
    }

    /**
     * Binds the queue (creating it, or updating its attributes to the spec) and starts claiming.
     *
     * @throws IllegalArgumentException for an invalid setting
     */
    public Subscriber start() {
      requireRange("concurrency", concurrency, 1, 1_000);
      requireRange("batchSize", batchSize, 1, 1_000);
      requireRange("prefetch", effectivePrefetch(), 0, MAX_PREFETCH);
      Arguments.requireWithin(pollInterval, "pollInterval", MIN_POLL_INTERVAL, MAX_POLL_INTERVAL);
      if (lease != null) {
        MsgQueueRepository.requireValidLease(lease);
      }
      if (retryPolicy != null && lease == null) {
        throw new IllegalArgumentException("retryPolicy needs lease mode: set a lease too");
      }
      if (retryPolicy != null && retryPolicy.deadLetterQueue().equals(queue.name())) {
        throw new IllegalArgumentException("the retry policy's dead-letter queue must be another queue than \""
            + queue.name() + "\"");
      }
      Arguments.requirePositiveAtMost(maxHandlerTime, "maxHandlerTime", MsgQueueConfig.MAX_MESSAGE_LIFETIME);
      Arguments.requireWithin(ackDelay, "ackDelay", Duration.ZERO, MAX_ACK_DELAY);
      Arguments.requireWithin(closeTimeout, "closeTimeout", Duration.ZERO, MAX_CLOSE_TIMEOUT);
      Subscriber subscriber = new Subscriber(this);
      try {
        return subscriber.started();
      } catch (RuntimeException e) {
        subscriber.unregisterWakeups.run();
        subscriber.handlers.shutdownNow();
        throw e;
      }
    }

    private static void requireRange(String name, int value, int min, int max) {
      if (value < min || value > max) {
        throw new IllegalArgumentException(name + " must be in [" + min + ", " + max + "], was " + value);
      }
    }
  }
}
