package dev.msgqueue;

/**
 * Defers an action until the calling thread's current transaction commits, for a transaction manager msgqueue cannot
 * see itself. {@link MicrometerMetrics} counts {@code msgqueue.messages.published} through one, so that a publish whose
 * transaction rolls back is not counted; the Spring Boot starter binds one on Spring's transaction synchronization.
 */
@FunctionalInterface
public interface CommitHook {
  /** Runs every action at once: no transaction is observed (a publish counts when its statement succeeds). */
  CommitHook IMMEDIATE = Runnable::run;

  /**
   * Runs {@code action} once the calling thread's current transaction commits, never if it rolls back, and at once
   * when the thread is in no transaction. Called on the publishing thread, inside the publish; must not throw.
   */
  void afterCommit(Runnable action);
}
