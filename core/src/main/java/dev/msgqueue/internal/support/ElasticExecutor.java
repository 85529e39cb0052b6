package dev.msgqueue.internal.support;

import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A pool that hands a task to an idle thread when it has one and starts a thread only when none is idle, up to a
 * maximum, queueing beyond it; a thread ends after {@code keepAliveSeconds} without work. A plain
 * {@link ThreadPoolExecutor} with a core size starts a new thread for every task until the core is full, even while
 * its other threads are idle, and with core size 0 it queues rather than grows: under light traffic from many
 * subscribers, the first holds every thread it may, the second runs one task at a time.
 *
 * <p>The queue offers a task to the waiting threads only while the tasks submitted and not finished do not outnumber
 * the threads; otherwise it refuses, so the pool adds a thread. Once the pool is full, the task waits in the queue.
 */
public final class ElasticExecutor extends ThreadPoolExecutor {
  private final AtomicInteger unfinished = new AtomicInteger();

  /**
   * @param maxThreads the most threads at once
   * @param keepAliveSeconds how long an idle thread waits for a task before it ends
   * @param namePrefix its threads are daemon threads named {@code namePrefix-1}, {@code namePrefix-2}, ...
   */
  public ElasticExecutor(int maxThreads, long keepAliveSeconds, String namePrefix) {
    super(0, maxThreads, keepAliveSeconds, TimeUnit.SECONDS, new GrowFirstQueue(),
        DaemonThreads.numbered(namePrefix), (task, pool) -> ((ElasticExecutor) pool).queueWhenFull(task));
    ((GrowFirstQueue) getQueue()).pool = this;
  }

  @Override
  public void execute(Runnable task) {
    unfinished.incrementAndGet();
    try {
      super.execute(task);
    } catch (RuntimeException | Error e) {
      unfinished.decrementAndGet();
      throw e;
    }
  }

  @Override
  protected void afterExecute(Runnable task, Throwable failure) {
    unfinished.decrementAndGet();
  }

  /** The pool refused to grow (full, or another task took the last free place first): the task waits its turn. */
  private void queueWhenFull(Runnable task) {
    if (isShutdown()) {
      throw new RejectedExecutionException("the pool is shut down");
    }
    ((GrowFirstQueue) getQueue()).enqueue(task);
  }

  /** Whether a thread of the pool is free for one more task: fewer unfinished tasks than threads. */
  private boolean hasIdleThread() {
    return unfinished.get() <= getPoolSize();
  }

  /** A task queue that refuses a task while the pool can still grow and no thread is idle for it. */
  private static final class GrowFirstQueue extends LinkedBlockingQueue<Runnable> {
    private transient ElasticExecutor pool;

    @Override
    public boolean offer(Runnable task) {
      if (pool.getPoolSize() < pool.getMaximumPoolSize() && !pool.hasIdleThread()) {
        return false; // the pool starts a thread for it
      }
      return super.offer(task);
    }

    void enqueue(Runnable task) {
      super.offer(task);
    }
  }
}
