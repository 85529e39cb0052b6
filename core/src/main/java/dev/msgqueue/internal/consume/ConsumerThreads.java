package dev.msgqueue.internal.consume;

import dev.msgqueue.internal.support.DaemonThreads;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.concurrent.Executor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The threads shared by every subscriber of one owner (a repository): a pool of workers that run claims, ack
 * statements and housekeeping rounds, and one timer that only hands due tasks to the workers. An idle subscriber holds
 * no thread: it is a timer entry. The threads start on demand, end after {@link #IDLE_SECONDS} without work, and the
 * whole set is shut down when the last subscriber that {@link #acquire acquired} it {@link #release releases} it.
 */
public final class ConsumerThreads {
  /** The most worker threads per owner: bounds the statements subscribers of one repository run at once. */
  public static final int MAX_WORKERS = 32;
  private static final long IDLE_SECONDS = 10;
  private static final Map<Object, ConsumerThreads> BY_OWNER = new IdentityHashMap<>();
  private static final AtomicInteger SETS = new AtomicInteger();

  private final Object owner;
  private final String namePrefix;
  private final ThreadPoolExecutor workers;
  private final ScheduledThreadPoolExecutor timer;
  private int users; // guarded by BY_OWNER

  private ConsumerThreads(Object owner) {
    this.owner = owner;
    this.namePrefix = "msgqueue-consume-" + SETS.incrementAndGet();
    this.workers = new ThreadPoolExecutor(MAX_WORKERS, MAX_WORKERS, IDLE_SECONDS, TimeUnit.SECONDS,
        new LinkedBlockingQueue<>(), DaemonThreads.numbered(namePrefix));
    workers.allowCoreThreadTimeOut(true);
    this.timer = new ScheduledThreadPoolExecutor(1, DaemonThreads.numbered(namePrefix + "-timer"));
    timer.setKeepAliveTime(IDLE_SECONDS, TimeUnit.SECONDS);
    timer.allowCoreThreadTimeOut(true);
    timer.setRemoveOnCancelPolicy(true); // an idle subscriber re-arms its poll often: cancelled entries must not pile up
  }

  /** The shared threads of {@code owner}, created on first use; every call needs one {@link #release()}. */
  public static ConsumerThreads acquire(Object owner) {
    synchronized (BY_OWNER) {
      ConsumerThreads threads = BY_OWNER.computeIfAbsent(owner, ConsumerThreads::new);
      threads.users++;
      return threads;
    }
  }

  /** Gives up one use; the last one shuts the threads down (running tasks finish, timed ones are dropped). */
  public void release() {
    synchronized (BY_OWNER) {
      if (--users > 0) {
        return;
      }
      BY_OWNER.remove(owner);
    }
    timer.shutdownNow();
    workers.shutdown();
  }

  /** The names of these threads: {@code msgqueue-consume-<set>-<n>}, and {@code -timer-1} for the timer. */
  String namePrefix() {
    return namePrefix;
  }

  /** Where claims, acks and housekeeping rounds run. */
  Executor workers() {
    return workers;
  }

  /** Runs {@code task} on a worker after {@code delayNanos}. */
  ScheduledFuture<?> schedule(Runnable task, long delayNanos) {
    return timer.schedule(() -> workers.execute(task), Math.max(0, delayNanos), TimeUnit.NANOSECONDS);
  }
}
