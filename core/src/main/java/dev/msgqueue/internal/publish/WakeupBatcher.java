package dev.msgqueue.internal.publish;

import dev.msgqueue.internal.sql.NotifyStatements;
import dev.msgqueue.internal.support.Contexts;
import dev.msgqueue.internal.support.DaemonThreads;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import org.jooq.DSLContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sends the wake-up notifications of autocommit publishes from one thread of its own, after the publishes have
 * returned: the queues published to while a notification statement is in flight go out together in the next one
 * ({@link NotifyStatements#notifyWakeups}), whatever their queue.
 *
 * <p>Why a thread of its own: a transaction that notifies takes PostgreSQL's database-wide notification lock from its
 * pre-commit until its commit record is flushed, so notifying transactions commit one at a time, each with a WAL flush
 * of its own. Publishing to many queues, nearly every publish is its queue's first in the wake-up window and notifies.
 * A publisher that sent or waited for its notification would wait for other publishers' notifications at that lock;
 * here publishers never wait for a notification at all, and one statement carries every queue published to meanwhile.
 * The notification is only a shortcut (subscribers also poll), and the messages are committed before it is queued, so
 * a subscriber it wakes finds them.
 *
 * <p>The thread starts on the first wake-up and ends after {@link #IDLE_MILLIS} without one: an idle repository holds
 * none. A notification statement that fails is logged, and its queues are handed to {@code failed} (which forgets
 * their wake-up window, so that their next publish notifies again). A context over one connection (a repository
 * created over a single {@code Connection}) cannot be used from another thread: its wake-ups are sent on the caller's
 * thread, one statement each, and there is no thread.
 */
final class WakeupBatcher {
  private static final Logger log = LoggerFactory.getLogger(WakeupBatcher.class);
  /** How long the sending thread waits for another wake-up before it ends. */
  static final long IDLE_MILLIS = 1_000;
  /** The most queues one notification statement carries: a bounded array bind, however many queues wait. */
  static final int MAX_QUEUES_PER_STATEMENT = 1_000;
  /**
   * The least time from the start of one notification statement to the start of the next while wake-ups keep coming:
   * at most 500 notifying commits a second, however many queues are published to, each carrying the queues queued
   * meanwhile. A wake-up that finds the thread idle goes out at once.
   */
  static final long MIN_STATEMENT_GAP_NANOS = 2_000_000;

  private final DSLContext ctx;
  private final Consumer<String> failed;
  /** {@code null} over one connection: the wake-ups go out on the callers' threads. */
  private final ThreadPoolExecutor sender;
  private final Object lock = new Object();
  /** Guarded by {@link #lock}: the queues to notify, in arrival order. */
  private final Set<String> pending = new LinkedHashSet<>();
  /** Guarded by {@link #lock}: whether a send task is queued or running. */
  private boolean sending;

  /**
   * @param ctx what the notifications go out through, in autocommit
   * @param failed called with each queue whose notification failed
   */
  WakeupBatcher(DSLContext ctx, Consumer<String> failed) {
    this.ctx = ctx;
    this.failed = failed;
    if (Contexts.overOneConnection(ctx)) {
      this.sender = null;
    } else {
      this.sender = new ThreadPoolExecutor(1, 1, IDLE_MILLIS, TimeUnit.MILLISECONDS, new LinkedBlockingQueue<>(),
          DaemonThreads.numbered("msgqueue-wakeups"));
      sender.allowCoreThreadTimeOut(true);
    }
  }

  /**
   * Queues the wake-up of {@code queue} for the batcher's thread; over one connection, sends it now on the caller's
   * thread.
   */
  void send(String queue) {
    if (sender == null) {
      NotifyStatements.notifyWakeup(ctx, queue);
      return;
    }
    synchronized (lock) {
      pending.add(queue);
      if (sending) {
        return;
      }
      sending = true;
    }
    sender.execute(this::sendPending);
  }

  /** Sends what is pending, statement after statement, until nothing is. */
  private void sendPending() {
    boolean drained = false;
    try {
      drained = sendUntilNothingPending();
    } finally {
      if (!drained) {
        // Anything but a statement's failure (an Error): the next wake-up starts a new task rather than none ever.
        log.error("the wake-up sender stopped unexpectedly; the next publish starts it again");
        synchronized (lock) {
          sending = false;
        }
      }
    }
  }

  /** @return true once nothing is pending ({@code sending} cleared under the lock) */
  private boolean sendUntilNothingPending() {
    while (true) {
      List<String> queues = new ArrayList<>();
      synchronized (lock) {
        if (pending.isEmpty()) {
          sending = false;
          return true;
        }
        Iterator<String> taken = pending.iterator();
        while (taken.hasNext() && queues.size() < MAX_QUEUES_PER_STATEMENT) {
          queues.add(taken.next());
          taken.remove();
        }
      }
      long start = System.nanoTime();
      try {
        if (queues.size() == 1) {
          NotifyStatements.notifyWakeup(ctx, queues.get(0));
        } else {
          NotifyStatements.notifyWakeups(ctx, queues);
        }
      } catch (RuntimeException e) {
        log.warn("the wake-up notification of {} queue(s) failed ({}); their subscribers find the messages by polling,"
            + " and their next publish notifies again", queues.size(), e.toString());
        queues.forEach(failed);
      }
      // The wake-ups queued meanwhile go out together in the next statement.
      pauseUntil(start + MIN_STATEMENT_GAP_NANOS);
    }
  }

  private static void pauseUntil(long nanoTime) {
    long wait = nanoTime - System.nanoTime();
    if (wait > 0) {
      LockSupport.parkNanos(wait);
    }
  }

  /** Whether a send task is queued or running: for tests. */
  boolean isSending() {
    synchronized (lock) {
      return sending;
    }
  }
}
