package dev.msgqueue.internal.consume;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.Consumer;

/**
 * Threads whose tasks and time the test advances itself: nothing runs until the test runs it, and the clock moves only
 * when the test moves it. So a test decides the exact order of claims, handler ends, timers and close.
 */
final class ManualThreads implements PipelineThreads {
  private long now = 1_000_000_000L;
  private long sequence;
  private final Deque<Runnable> workers = new ArrayDeque<>();
  private final Deque<Runnable> handlers = new ArrayDeque<>();
  private final List<Timed> timed = new ArrayList<>();
  private boolean released;
  /** Called with each handler task as it is submitted, before it is queued; lets a test act at that moment. */
  volatile Consumer<Runnable> onHandlerTask = task -> { };

  private record Timed(long due, long sequence, Runnable task) { }

  @Override
  public synchronized void execute(Runnable task) {
    if (released) {
      throw new RejectedExecutionException("released");
    }
    workers.add(task);
  }

  @Override
  public void executeHandler(Runnable task) {
    onHandlerTask.accept(task);
    synchronized (this) {
      if (released) {
        throw new RejectedExecutionException("released");
      }
      handlers.add(task);
    }
  }

  @Override
  public synchronized Cancellable schedule(Runnable task, long delayNanos) {
    if (released) {
      throw new RejectedExecutionException("released");
    }
    Timed entry = new Timed(now + Math.max(0, delayNanos), sequence++, task);
    timed.add(entry);
    return () -> {
      synchronized (ManualThreads.this) {
        timed.remove(entry);
      }
    };
  }

  @Override
  public synchronized long nanoTime() {
    return now;
  }

  /** The clock moves on by {@code nanos} (timers that come due are queued): a close's wait takes no real time. */
  @Override
  public void pause(long nanos) {
    advance(nanos);
  }

  @Override
  public String namePrefix() {
    return "manual";
  }

  @Override
  public synchronized void release() {
    released = true;
  }

  synchronized boolean released() {
    return released;
  }

  /** Moves the clock on by {@code nanos}; timers that come due go to the workers' queue, earliest first. */
  synchronized void advance(long nanos) {
    now += nanos;
    timed.sort(Comparator.comparingLong(Timed::due).thenComparingLong(Timed::sequence));
    while (!timed.isEmpty() && timed.get(0).due() <= now) {
      workers.add(timed.remove(0).task());
    }
  }

  /** Moves the clock to the next timer, if any, and queues it. @return whether there was one */
  boolean advanceToNextTimer() {
    long next;
    synchronized (this) {
      if (timed.isEmpty()) {
        return false;
      }
      next = timed.stream().mapToLong(Timed::due).min().getAsLong();
    }
    advance(Math.max(0, next - nanoTime()));
    return true;
  }

  /** Runs the next queued worker task. @return whether there was one */
  boolean runWorker() {
    Runnable task;
    synchronized (this) {
      task = workers.poll();
    }
    if (task == null) {
      return false;
    }
    task.run();
    return true;
  }

  /** Runs the next queued handler task. @return whether there was one */
  boolean runHandler() {
    Runnable task;
    synchronized (this) {
      task = handlers.poll();
    }
    if (task == null) {
      return false;
    }
    task.run();
    return true;
  }

  /** Runs worker tasks until none is queued (they may queue more). */
  void runWorkers() {
    while (runWorker()) {
      // next
    }
  }

  /** Runs worker and handler tasks until neither is queued; the clock does not move. */
  void runAll() {
    boolean ran;
    do {
      ran = false;
      while (runWorker()) {
        ran = true;
      }
      while (runHandler()) {
        ran = true;
      }
    } while (ran);
  }

  synchronized int queuedWorkers() {
    return workers.size();
  }

  synchronized int queuedHandlers() {
    return handlers.size();
  }

  synchronized int timers() {
    return timed.size();
  }
}
