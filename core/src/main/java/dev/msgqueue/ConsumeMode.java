package dev.msgqueue;

/**
 * How a {@link Subscriber} delivers messages: what a handler that throws, and a process that dies, do to a message.
 *
 * <table>
 *   <caption>The modes</caption>
 *   <tr><th>mode</th><th>guarantee</th><th>handler throws</th><th>process dies</th><th>use for</th></tr>
 *   <tr><td>{@link #TRANSACTION} (default)</td><td>at least once; the handler's own writes in the same database
 *       commit exactly when the message is removed</td><td>its writes roll back; the message is retried after the
 *       retry policy's backoff, dead-lettered after its last delivery</td><td>the transaction rolls back, the
 *       messages are claimable at once; deliveries cut short by a crash count toward the dead letter</td>
 *       <td>most handlers: those that finish well within the transaction timeout</td></tr>
 *   <tr><td>{@link #LEASE}</td><td>at least once</td><td>redelivered after the lease, or by the retry policy</td>
 *       <td>redelivered once the lease runs out</td><td>handlers that run longer than a transaction should stay
 *       open (minutes)</td></tr>
 *   <tr><td>{@link #AT_MOST_ONCE}</td><td>at most once</td><td>lost</td><td>up to
 *       {@code concurrency + prefetch} lost</td><td>messages whose loss is cheaper than a duplicate</td></tr>
 * </table>
 */
public enum ConsumeMode {
  /**
   * A held transaction per batch: a handler lane opens a transaction, locks up to a batch of messages
   * ({@code FOR UPDATE SKIP LOCKED}, which writes no row version), runs their handlers with that transaction, deletes
   * the handled messages and commits. The transaction is bounded by the server (the subscriber's transaction
   * timeout), so a hung or dead consumer gives its messages back. Each running handler holds a pooled connection.
   */
  TRANSACTION,
  /** A lease per message: a claim marks messages ASSIGNED until a deadline, which an ack (a second statement) beats. */
  LEASE,
  /** A take: the claim deletes what it returns, so nothing is delivered twice and nothing needs an ack. */
  AT_MOST_ONCE
}
