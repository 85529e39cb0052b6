package dev.msgqueue;

import org.jooq.DSLContext;

/**
 * Handles one message for a {@link Subscriber} in {@link ConsumeMode#TRANSACTION}, inside the transaction that holds
 * it. Called concurrently, up to the subscriber's concurrency, each call on a transaction of its own lane.
 */
@FunctionalInterface
public interface TransactionalMessageHandler {
  /**
   * Handles {@code message}. What the handler writes through {@code transaction} commits exactly when the message is
   * removed from its queue, or not at all: returning normally commits both (with the other messages of the batch);
   * throwing rolls back the handler's writes and hands the message to the retry policy, while the rest of its batch
   * commits. Do not commit, roll back or close {@code transaction}'s connection; to publish in it, use
   * {@code repository.inTransaction(transaction)}.
   */
  void handle(ClaimedMessage message, DSLContext transaction) throws Exception;
}
