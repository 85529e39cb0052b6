package dev.msgqueue.internal.consume;

import dev.msgqueue.internal.support.DaemonThreads;
import dev.msgqueue.internal.support.ElasticExecutor;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * The threads shared by every subscriber of one owner (a repository): workers that run claims, ack statements,
 * retries and housekeeping rounds; handler threads that run the application's handlers; and one timer that only hands
 * due tasks to the workers. An idle subscriber holds no thread: it is a timer entry. Both pools hand a task to an
 * idle thread when they have one and start a thread only when none is idle ({@link ElasticExecutor}), and a thread
 * ends after {@link #IDLE_SECONDS} without work, so under light traffic a few threads serve every subscriber. The
 * whole set is shut down when the last subscriber that {@link #acquire acquired} it {@link #release releases} it.
 *
 * <p>The handler threads have no limit of their own: each subscriber runs at most its concurrency of handlers at
 * once, so they never outnumber the subscribers' concurrency added up.
 */
public final class ConsumerThreads implements PipelineThreads {
  /** The most worker threads per owner: bounds the statements subscribers of one repository run at once. */
  public static final int MAX_WORKERS = 32;
  static final long IDLE_SECONDS = 10;
  private static final int MAX_HANDLER_THREADS = 100_000;
  private static final Map<Object, ConsumerThreads> BY_OWNER = new IdentityHashMap<>();
  private static final AtomicInteger SETS = new AtomicInteger();

  private final Object owner;
  private final String namePrefix;
  private final ElasticExecutor workers;
  private final ElasticExecutor handlers;
  private final ScheduledThreadPoolExecutor timer;
  private int users; // guarded by BY_OWNER

  private ConsumerThreads(Object owner) {
    this.owner = owner;
    int set = SETS.incrementAndGet();
    this.namePrefix = "msgqueue-consume-" + set;
    this.workers = new ElasticExecutor(MAX_WORKERS, IDLE_SECONDS, namePrefix);
    this.handlers = new ElasticExecutor(MAX_HANDLER_THREADS, IDLE_SECONDS, "msgqueue-handler-" + set);
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
  @Override
  public void release() {
    synchronized (BY_OWNER) {
      if (--users > 0) {
        return;
      }
      BY_OWNER.remove(owner);
    }
    timer.shutdownNow();
    workers.shutdown();
    handlers.shutdown();
  }

  /**
   * The names of these threads: {@code msgqueue-consume-<set>-<n>} for the workers, {@code -timer-1} for the timer;
   * the handler threads are {@code msgqueue-handler-<set>-<n>}.
   */
  @Override
  public String namePrefix() {
    return namePrefix;
  }

  @Override
  public void execute(Runnable task) {
    workers.execute(task);
  }

  @Override
  public void executeHandler(Runnable task) {
    handlers.execute(task);
  }

  @Override
  public Cancellable schedule(Runnable task, long delayNanos) {
    ScheduledFuture<?> due = timer.schedule(() -> workers.execute(task), Math.max(0, delayNanos), TimeUnit.NANOSECONDS);
    return () -> due.cancel(false);
  }

  @Override
  public long nanoTime() {
    return System.nanoTime();
  }

  @Override
  public void pause(long nanos) {
    LockSupport.parkNanos(nanos);
  }
}
