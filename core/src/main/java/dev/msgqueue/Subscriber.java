package dev.msgqueue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Consumes one queue: claims messages, runs a {@link MessageHandler} on each with bounded concurrency, acks those it
 * handled. Build with {@link #builder}; {@link #close()} stops it gracefully.
 *
 * <ul>
 *   <li><b>Claiming.</b> One claimer thread claims up to {@code batchSize} messages, never more than there are free
 *       handler slots (a claimed message never waits in memory), again at once while batches come back full, then
 *       waits for a wake-up, a free slot or the poll interval. Polling never stops, wake-ups or not.</li>
 *   <li><b>Outcome.</b> A handler that returns acks its message. One that throws leaves it to the mode: in lease mode
 *       it is redelivered after the lease; in the default mode it stays ASSIGNED until it expires (at-most-once).
 *       Neither blocks other messages.</li>
 *   <li><b>Queue.</b> {@link Builder#start()} binds the queue; while running it touches the queue every
 *       {@link MsgQueueConfig#keepAliveInterval()}, so an auto-deleted queue with a live subscriber is never reaped,
 *       even with no publishes. Claims and acks never lock the queue row.</li>
 *   <li><b>Wake-ups.</b> With a {@link WakeupListener}, a publish wakes the subscriber at once; it also claims once
 *       more {@link MsgQueueConfig#wakeupWindow()} later, for messages whose notification was coalesced away.</li>
 * </ul>
 */
public final class Subscriber implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Subscriber.class);
  private static final long NEVER = Long.MAX_VALUE;
  /** The shortest poll interval. */
  public static final Duration MIN_POLL_INTERVAL = Duration.ofMillis(10);
  /** The longest poll interval. */
  public static final Duration MAX_POLL_INTERVAL = Duration.ofHours(1);
  /** The longest close timeout, of {@link Builder#closeTimeout} and {@link #close(Duration)}. */
  public static final Duration MAX_CLOSE_TIMEOUT = Duration.ofHours(1);

  private final MessageQueueRepository repository;
  private final QueueSpec queue;
  private final MessageHandler handler;
  private final int batchSize;
  private final Duration pollInterval;
  private final Duration lease;
  private final Duration closeTimeout;
  private final Semaphore slots;
  private final ExecutorService handlers;
  private final Thread claimer;
  private final Runnable unregisterWakeups;

  private final ReentrantLock lock = new ReentrantLock();
  private final Condition signalled = lock.newCondition();
  private boolean wakeRequested; // guarded by lock
  private boolean waitingForSlot; // guarded by lock
  private volatile boolean running = true;
  private final AtomicBoolean closed = new AtomicBoolean();

  private final AtomicLong claimRounds = new AtomicLong();
  private final AtomicLong wakeups = new AtomicLong();
  private final AtomicLong acked = new AtomicLong();
  private final AtomicLong failed = new AtomicLong();
  private final AtomicInteger inFlight = new AtomicInteger();

  private Subscriber(Builder builder) {
    this.repository = builder.repository;
    this.queue = builder.queue;
    this.handler = builder.handler;
    this.batchSize = builder.batchSize;
    this.pollInterval = builder.pollInterval;
    this.lease = builder.lease;
    this.closeTimeout = builder.closeTimeout;
    this.slots = new Semaphore(builder.concurrency);
    this.handlers = Executors.newFixedThreadPool(builder.concurrency, named("msgqueue-handler-" + queue.name()));
    this.claimer = named("msgqueue-claimer-" + queue.name()).newThread(this::claimUntilClosed);
    this.unregisterWakeups = builder.wakeups == null ? () -> { } : builder.wakeups.register(queue.name(), this::wake);
  }

  /**
   * A builder for a subscriber of {@code queue} on {@code repository} (whose configuration gives the keep-alive
   * interval and the wake-up window).
   */
  public static Builder builder(MessageQueueRepository repository, QueueSpec queue, MessageHandler handler) {
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
   * Stops claiming, lets the in-flight handlers finish and ack, then returns; waits at most {@code timeout} in all.
   * Handlers still running then are interrupted and not acked: in lease mode they are redelivered after their lease;
   * in the default mode they stay ASSIGNED until they expire. Messages not yet claimed stay in the queue. Do not call it
   * from a handler: it would wait for that handler to finish, that is for the whole timeout.
   *
   * @param timeout zero or positive, at most {@link #MAX_CLOSE_TIMEOUT}
   * @return whether every in-flight handler finished within the timeout
   */
  public boolean close(Duration timeout) {
    Arguments.requireWithin(timeout, "timeout", Duration.ZERO, MAX_CLOSE_TIMEOUT);
    running = false; // before `closed`, so whoever sees isClosing() knows no new claim starts
    if (!closed.compareAndSet(false, true)) {
      return handlers.isTerminated();
    }
    long deadline = System.nanoTime() + timeout.toNanos();
    unregisterWakeups.run();
    signal(true);
    boolean finished = false;
    try {
      claimer.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
      if (claimer.isAlive()) {
        claimer.interrupt(); // stuck in a claim statement: give up on it
      }
      handlers.shutdown();
      finished = handlers.awaitTermination(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (!finished) {
      log.warn("subscriber of \"{}\" closed with {} handler(s) still running after {}; they are interrupted and not"
          + " acked ({})", queue.name(), inFlight.get(), timeout,
          lease != null ? "redelivered after their lease" : "they stay ASSIGNED until they expire");
      handlers.shutdownNow();
    }
    log.info("subscriber of \"{}\" closed: {} acked, {} failed", queue.name(), acked.get(), failed.get());
    return finished;
  }

  /** Claims at once (called by the {@link WakeupListener}). */
  void wake() {
    wakeups.incrementAndGet();
    signal(true);
  }

  boolean isClosing() {
    return closed.get();
  }

  long claimRounds() {
    return claimRounds.get();
  }

  long wakeups() {
    return wakeups.get();
  }

  long acked() {
    return acked.get();
  }

  private Subscriber started() {
    repository.bindQueue(queue);
    claimer.start();
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

  private void claimLoop() {
    long keepAliveNanos = repository.config().keepAliveInterval().toNanos();
    long followUpNanos = repository.config().wakeupWindow().toNanos();
    long nextKeepAlive = System.nanoTime() + keepAliveNanos;
    long followUpAt = NEVER;
    boolean woken = false;
    while (running) {
      long now = System.nanoTime();
      if (now - nextKeepAlive >= 0) {
        keepAlive();
        nextKeepAlive = System.nanoTime() + keepAliveNanos;
      }
      if (woken) {
        followUpAt = now + followUpNanos;
      } else if (followUpAt != NEVER && now - followUpAt >= 0) {
        followUpAt = NEVER;
      }
      int free = slots.availablePermits();
      if (free > 0) {
        int wanted = Math.min(batchSize, free);
        int got = claimAndDispatch(wanted);
        if (got < 0) {
          followUpAt = NEVER; // the database failed: back off for a poll interval
        } else if (got == wanted) {
          woken = false;
          continue; // a full batch: there may be more
        }
      }
      long waitUntil = Math.min(now + pollInterval.toNanos(), nextKeepAlive);
      if (followUpAt != NEVER) {
        waitUntil = Math.min(waitUntil, followUpAt);
      }
      woken = awaitSignal(waitUntil, free == 0);
    }
  }

  /** @return how many messages it claimed and dispatched, or -1 if the claim failed */
  private int claimAndDispatch(int wanted) {
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
    for (ClaimedMessage message : claimed) {
      // Never blocks: at most `free` were claimed and only this thread takes slots.
      slots.acquireUninterruptibly();
      inFlight.incrementAndGet();
      try {
        handlers.execute(() -> handle(message));
      } catch (RejectedExecutionException e) {
        // Only after close() gave up waiting for a claim stuck in the database.
        inFlight.decrementAndGet();
        slots.release();
        log.warn("subscriber of \"{}\" closed while claiming; message {} was not handled ({})", queue.name(),
            message.id(), lease != null ? "redelivered after its lease" : "it stays ASSIGNED until it expires");
      }
    }
    return claimed.size();
  }

  private void handle(ClaimedMessage message) {
    try {
      try {
        handler.handle(message);
      } catch (Exception | Error e) {
        failed.incrementAndGet();
        if (lease != null) {
          log.warn("handler failed on message {} of \"{}\"; it is redelivered after its lease ({})",
              message.id(), queue.name(), lease, e);
        } else {
          log.error("handler failed on message {} of \"{}\"; it stays ASSIGNED and is not redelivered (default mode;"
              + " lease mode redelivers)", message.id(), queue.name(), e);
        }
        if (e instanceof VirtualMachineError fatal) {
          throw fatal;
        }
        return;
      }
      try {
        if (repository.ack(message)) {
          acked.incrementAndGet();
        } else {
          log.warn("message {} of \"{}\" was handled but not acked: its lease ran out and another claim took it"
              + " (or it expired), so it is delivered again", message.id(), queue.name());
        }
      } catch (RuntimeException e) {
        log.warn("ack of message {} of \"{}\" failed{}", message.id(), queue.name(),
            lease != null ? "; it is redelivered after its lease" : "; it stays ASSIGNED until it expires", e);
      }
    } finally {
      inFlight.decrementAndGet();
      slots.release();
      signal(false);
    }
  }

  private void keepAlive() {
    try {
      if (!repository.touch(queue.name())) {
        // Missing (reaped or deleted by hand) or its row busy right now: bind re-creates it or waits briefly.
        repository.bindQueue(queue);
      }
    } catch (RuntimeException e) {
      log.warn("subscriber of \"{}\": keep-alive failed, retrying next interval", queue.name(), e);
    }
  }

  /** @param wake a wake-up or close; otherwise a freed slot, which matters only to a claimer waiting for one */
  private void signal(boolean wake) {
    lock.lock();
    try {
      if (wake) {
        wakeRequested = true;
        signalled.signalAll();
      } else if (waitingForSlot) {
        signalled.signalAll();
      }
    } finally {
      lock.unlock();
    }
  }

  /** @return whether a wake-up arrived (as opposed to a timeout or a freed slot) */
  private boolean awaitSignal(long untilNanos, boolean forSlot) {
    lock.lock();
    try {
      waitingForSlot = forSlot;
      while (running && !wakeRequested && !(forSlot && slots.availablePermits() > 0)) {
        long remaining = untilNanos - System.nanoTime();
        if (remaining <= 0) {
          break;
        }
        signalled.awaitNanos(remaining);
      }
      boolean woken = wakeRequested;
      wakeRequested = false;
      waitingForSlot = false;
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

  /** Configures a {@link Subscriber}; each value is checked when set, and all of them again by {@link #start()}. */
  public static final class Builder {
    private final MessageQueueRepository repository;
    private final QueueSpec queue;
    private final MessageHandler handler;
    private int concurrency = 4;
    private int batchSize = 10;
    private Duration pollInterval = Duration.ofSeconds(1);
    private Duration lease;
    private WakeupListener wakeups;
    private Duration closeTimeout = Duration.ofSeconds(30);

    private Builder(MessageQueueRepository repository, QueueSpec queue, MessageHandler handler) {
      this.repository = Arguments.requireNonNull(repository, "repository");
      this.queue = Arguments.requireNonNull(queue, "queue");
      this.handler = Arguments.requireNonNull(handler, "handler");
    }

    /** How many handlers run at once, in [1, 1000]; default 4. */
    public Builder concurrency(int value) {
      this.concurrency = value;
      return this;
    }

    /** The most messages one claim takes, in [1, 1000]; default 10 (never more than free handler slots). */
    public Builder batchSize(int value) {
      this.batchSize = value;
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
     * redelivered, at-least-once. A handler should finish well within the lease, or its message may be handled
     * twice. Default: off (at-most-once). In [{@link MessageQueueRepository#MIN_LEASE},
     * {@link MsgQueueConfig#MAX_MESSAGE_LIFETIME}].
     */
    public Builder lease(Duration value) {
      this.lease = MessageQueueRepository.requireValidLease(value);
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
     * The longest {@link Subscriber#close()} waits for in-flight handlers; default 30 s, zero or positive, at most
     * {@link Subscriber#MAX_CLOSE_TIMEOUT}.
     */
    public Builder closeTimeout(Duration value) {
      this.closeTimeout = Arguments.requireWithin(value, "closeTimeout", Duration.ZERO, MAX_CLOSE_TIMEOUT);
      return this;
    }

    /**
     * Binds the queue (creating it, or updating its attributes to the spec) and starts claiming.
     *
     * @throws IllegalArgumentException for an invalid setting
     */
    public Subscriber start() {
      requireRange("concurrency", concurrency, 1, 1_000);
      requireRange("batchSize", batchSize, 1, 1_000);
      Arguments.requireWithin(pollInterval, "pollInterval", MIN_POLL_INTERVAL, MAX_POLL_INTERVAL);
      if (lease != null) {
        MessageQueueRepository.requireValidLease(lease);
      }
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
