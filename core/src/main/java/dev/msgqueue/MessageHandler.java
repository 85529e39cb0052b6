package dev.msgqueue;

/**
 * Handles one message for a {@link Subscriber}, in any {@link ConsumeMode}. Called concurrently, up to the
 * subscriber's concurrency.
 */
@FunctionalInterface
public interface MessageHandler {
  /**
   * Handles {@code message}. Returning normally settles it: it is removed from its queue (held transactions: when the
   * lane commits; lease mode: by the ack). Throwing leaves it to the subscriber's mode: retried by the retry policy
   * (held transactions, and lease mode with one), redelivered once the lease runs out (lease mode without one), or
   * gone (at most once, whose claim already took it). Either way other messages go on being delivered. In held
   * transactions the handler runs while its message is locked but does not see the transaction: to write in it, use
   * a {@link TransactionalMessageHandler}.
   */
  void handle(ClaimedMessage message) throws Exception;
}
