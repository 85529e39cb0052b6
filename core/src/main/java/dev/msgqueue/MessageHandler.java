package dev.msgqueue;

/** Handles one message for a {@link Subscriber}. Called concurrently, up to the subscriber's concurrency. */
@FunctionalInterface
public interface MessageHandler {
  /**
   * Handles {@code message}. Returning normally acks it (deletes it); throwing leaves it to the subscriber's mode: in
   * lease mode it is redelivered once the lease runs out, otherwise it stays ASSIGNED until it expires. Either way
   * other messages go on being delivered.
   */
  void handle(ClaimedMessage message) throws Exception;
}
