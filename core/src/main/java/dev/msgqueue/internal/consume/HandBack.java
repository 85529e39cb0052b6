package dev.msgqueue.internal.consume;

/**
 * Handing claimed messages back to their queue, claimable at once, as an act that may be repeated after a failure:
 * each attempt is safe whatever the outcome of the one before, an unanswered commit included.
 */
@FunctionalInterface
public interface HandBack {
  /**
   * One attempt.
   *
   * @return how many messages are back in the queue
   * @throws RuntimeException if the attempt failed; another may follow
   */
  int attempt();
}
