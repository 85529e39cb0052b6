package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;

import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.JSONB;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DefaultConnectionProvider;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The publish algorithm behind {@link MessageQueueRepository#publish} and {@link MessageQueueRepository#publishBatch}:
 * the keep-alive (at most one write of the queue's {@code "lastActive"} per interval), the insert chosen by the
 * connection's autocommit mode, the heal of a reaped auto-deleted queue, and the wake-up.
 *
 * <p>One per repository; its views share it, and with it the keep-alive and wake-up throttles.
 */
final class Publisher {
  private static final Logger log = LoggerFactory.getLogger(Publisher.class);

  private final MsgQueueConfig config;
  private final IntervalThrottle keepAlive;
  private final Wakeups wakeups;

  Publisher(MsgQueueConfig config, IntervalThrottle keepAlive, Wakeups wakeups) {
    this.config = config;
    this.keepAlive = keepAlive;
    this.wakeups = wakeups;
  }

  /**
   * Publishes validated payloads to {@code spec}'s queue through {@code ctx}, in autocommit or in the transaction
   * open on its connection.
   *
   * @return the message ids, in the order of {@code payloads}
   * @throws QueueNotFoundException if the queue is missing and not auto-deleted
   */
  List<Long> publish(DSLContext ctx, QueueSpec spec, List<JSONB> payloads, Duration delay, Duration ttl) {
    // One connection for the whole publish, so it can tell whether the insert committed on its own (autocommit): a
    // wake-up failing after that must not turn a committed publish into an "outcome unknown" failure. A context on
    // one connection already is that (and pinning it again would cost a configuration per publish).
    if (ctx.configuration().connectionProvider() instanceof DefaultConnectionProvider) {
      return publishOn(ctx, ctx.connectionResult(Connection::getAutoCommit), spec, payloads, delay, ttl);
    }
    return ctx.connectionResult(connection -> publishOn(
        ctx.configuration().derive(new DefaultConnectionProvider(connection)).dsl(), connection.getAutoCommit(),
        spec, payloads, delay, ttl));
  }

  /** Records that the queue's {@code "lastActive"} was just written by another path (bind, touch). */
  void keptAlive(String queue) {
    keepAlive.restart(queue);
  }

  /** Forgets a deleted queue, so that its next publish writes the keep-alive at once. */
  void forget(String queue) {
    keepAlive.forget(queue);
  }

  /** How many queues' keep-alive deadlines this publisher currently remembers (bounded by the config). */
  int trackedQueues() {
    return keepAlive.trackedKeys();
  }

  private List<Long> publishOn(
      DSLContext on, boolean autoCommit, QueueSpec spec, List<JSONB> payloads, Duration delay, Duration ttl) {
    if (keepAlive.tryPass(spec.name())) {
      writeKeepAlive(on, spec.name());
    }
    List<Long> ids = insertIfQueueExists(on, autoCommit, spec.name(), payloads, delay, ttl);
    if (!ids.isEmpty()) {
      wakeUp(on, autoCommit, spec.name());
      return sorted(ids);
    }
    if (!spec.autoDeleted()) {
      keepAlive.forget(spec.name());
      throw new QueueNotFoundException(spec.name());
    }
    ids = QueueStatements.healAndInsertItems(on, spec, payloads, delay, ttl).fetch(MESSAGE_QUEUE_ITEM.ID);
    keepAlive.restart(spec.name());
    log.info("re-created auto-deleted queue \"{}\" on publish (it had been reaped)", spec.name());
    wakeUp(on, autoCommit, spec.name());
    return sorted(ids);
  }

  /**
   * The fast path: inserts into an existing queue, or returns no ids if the queue is missing. The statement depends on
   * the connection: in autocommit the plain insert (whose 23503 aborts nothing else), inside a transaction one that
   * cannot raise 23503 at all.
   */
  private static List<Long> insertIfQueueExists(
      DSLContext on, boolean autoCommit, String queue, List<JSONB> payloads, Duration delay, Duration ttl) {
    if (!autoCommit) {
      return QueueStatements.insertItemsIfQueueExists(on, queue, payloads, delay, ttl).fetch(MESSAGE_QUEUE_ITEM.ID);
    }
    try {
      return QueueStatements.insertItems(on, queue, payloads, delay, ttl).fetch(MESSAGE_QUEUE_ITEM.ID);
    } catch (DataAccessException e) {
      if (QueueStatements.isMissingQueue(e)) {
        return List.of();
      }
      throw e;
    }
  }

  /**
   * Sends the (coalesced) wake-up after the insert. In autocommit the messages are already committed, and a wake-up
   * only shortens latency (subscribers poll), so its failure is logged, not thrown: throwing would report a committed
   * publish as failed, and a caller retrying it would publish it twice. Inside the caller's transaction the failure
   * is thrown, since that transaction is lost.
   */
  private void wakeUp(DSLContext on, boolean autoCommit, String queue) {
    try {
      wakeups.published(on, queue);
    } catch (RuntimeException e) {
      if (!autoCommit) {
        throw e;
      }
      log.warn("published to \"{}\" (committed), but its wake-up notification failed ({}); subscribers find the"
          + " messages by polling", queue, e.toString());
    }
  }

  // Before the insert, so that if it fails no message has been committed behind the caller's back (autocommit).
  private void writeKeepAlive(DSLContext on, String queue) {
    try {
      QueueStatements.touchIfStale(on, queue, config.keepAliveInterval());
    } catch (RuntimeException e) {
      keepAlive.forget(queue);
      throw e;
    }
  }

  private static List<Long> sorted(List<Long> ids) {
    // Identity values are drawn in insertion order, which follows the payloads' order (ORDER BY ordinal).
    List<Long> copy = new ArrayList<>(ids);
    Collections.sort(copy);
    return copy;
  }
}
