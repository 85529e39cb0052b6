package dev.msgqueue.internal.consume;

import java.util.concurrent.RejectedExecutionException;

/**
 * What a consuming pipeline runs on: workers for its database acts (claims, acks, retries, housekeeping rounds),
 * handler threads for the application's handlers, a timer that hands due tasks to the workers, and the clock that
 * every timing decision of the pipeline reads. {@link ConsumerThreads} is the one used in production; tests drive a
 * pipeline through one whose tasks and time they advance themselves.
 */
public interface PipelineThreads {
  /**
   * Runs {@code task} on a worker.
   *
   * @throws RejectedExecutionException once the threads are shut down
   */
  void execute(Runnable task);

  /**
   * Runs {@code task} on a handler thread: application code that may take long, kept off the workers.
   *
   * @throws RejectedExecutionException once the threads are shut down
   */
  void executeHandler(Runnable task);

  /**
   * Runs {@code task} on a worker after {@code delayNanos}.
   *
   * @return what cancels it, if it has not started
   * @throws RejectedExecutionException once the threads are shut down
   */
  Cancellable schedule(Runnable task, long delayNanos);

  /** The pipeline's clock, in nanoseconds, as {@link System#nanoTime()}. */
  long nanoTime();

  /**
   * Lets {@code nanos} of the clock pass on the calling thread, which must be the caller's own (close), never a worker
   * or handler thread. Returns early if the thread is interrupted.
   */
  void pause(long nanos);

  /** The name prefix of the threads, for thread dumps and tests. */
  String namePrefix();

  /** Gives up one use of the threads; the last use shuts them down. */
  void release();

  /** A scheduled task that can still be called off. */
  @FunctionalInterface
  interface Cancellable {
    void cancel();
  }
}
