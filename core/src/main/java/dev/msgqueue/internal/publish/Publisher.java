package dev.msgqueue.internal.publish;

import dev.msgqueue.internal.sql.PublishStatements;
import dev.msgqueue.internal.sql.QueueStatements;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.QueueNotFoundException;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.internal.support.Contexts;
import dev.msgqueue.internal.support.EventSink;
import dev.msgqueue.internal.support.FailureTranslation;
import dev.msgqueue.internal.support.IntervalThrottle;
import dev.msgqueue.internal.support.QueueContext;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.function.Consumer;
import org.jooq.DSLContext;
import org.jooq.JSONB;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DefaultConnectionProvider;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The publish algorithm behind the repository's {@code publish} and {@code publishBatch}:
 * the keep-alive (at most one write of the queue's {@code "lastActive"} per interval; in autocommit part of the
 * insert statement, {@link PublishStatements#insertItemsKeepingAlive}), the insert chosen by the connection's
 * autocommit mode, the heal of a reaped auto-deleted queue, and the wake-up.
 *
 * <p>One per repository; its views share it, and with it the keep-alive and wake-up throttles and the repository's own
 * context.
 *
 * <h2>Inside a caller's transaction</h2>
 * A publish on a connection with autocommit off belongs to the caller's transaction, which may stay open as long as
 * the caller likes. Nothing it writes to the queue row may be held that long, or other publishers and subscribers
 * would wait for it. So two writes go to the repository's own context instead, each as a short autocommit
 * statement on a connection of its own:
 * <ul>
 *   <li>the keep-alive ({@link QueueStatements#keepAliveIfStale}), which would otherwise hold the queue row FOR NO KEY
 *       UPDATE until the caller commits;</li>
 *   <li>the re-creation of a reaped auto-deleted queue ({@link QueueStatements#createOrKeepAlive}), whose uncommitted
 *       row would otherwise make every other publisher to that queue wait until the caller commits. A committed empty
 *       auto-deleted queue is harmless: if the caller rolls back, it is reaped like any idle queue. The message is
 *       then inserted in the caller's transaction with the statement that cannot raise 23503; if a reaper deletes
 *       the queue in between, the two steps are retried, {@value #MAX_CREATE_ATTEMPTS} times at most.</li>
 * </ul>
 * When the repository's own context has no connection outside the caller's transaction (its connection is not in
 * autocommit: a context over the caller's own connection, or a data source that hands out the transaction's
 * connection, as Spring's {@code TransactionAwareDataSourceProxy} does), both writes run in the caller's transaction
 * instead: correct, but another publisher to a queue healed that way waits for the caller's commit (at most its
 * statement timeout), and a keep-alive written that way holds the queue row until then. A caller's transaction above
 * READ COMMITTED also heals inside itself (its snapshot could not see a row committed elsewhere).
 *
 * <h2>Batches by COPY</h2>
 * A batch of at least {@value #COPY_MIN_BATCH} payloads in autocommit, with no keep-alive due, goes by COPY in a
 * short transaction of its own ({@link PublishStatements#reserveItems}, then {@link PublishStatements#copyItems}): the
 * same rows, ids, times and locks as the insert, in COPY's multi-row WAL records. A missing queue fails the COPY with
 * 23503 as it fails the insert, and the heal follows as for the insert. The transaction needs {@code USAGE} on the
 * item table's identity sequence; without it (or on a connection that is not pgjdbc's) the first batch logs why and
 * every batch of this publisher is inserted instead.
 */
public final class Publisher {
  /** How often a publish in a caller's transaction re-creates a reaped queue before healing inside the transaction. */
  static final int MAX_CREATE_ATTEMPTS = 3;
  /**
   * The smallest batch published by COPY: from about this size its three round trips (ids, rows, commit) cost about
   * what the insert's one does, and larger batches gain (measured: docs/benchmark.md).
   */
  // On one connection, without payload checks, the statements alone ran 1.04-1.10x the insert at 100 payloads,
  // 0.78-1.00x at 32 and 0.51-0.87x at 4 to 16 (PostgreSQL 15, three interleaved rounds).
  public static final int COPY_MIN_BATCH = 100;
  private static final Logger log = LoggerFactory.getLogger(Publisher.class);

  private final DSLContext own;
  /** The repository's event sink (metrics), shared with it and its views. */
  private final EventSink events;
  private final MsgQueueConfig config;
  private final IntervalThrottle keepAlive;
  private final Wakeups wakeups;
  /** Cleared for good when a batch finds that this publisher's connections cannot COPY (see the class comment). */
  private volatile boolean copyUsable = true;

  /**
   * @param context the repository's: its own context is where a publish inside a caller's transaction writes the
   *     keep-alive and re-creates a reaped queue, each in autocommit
   */
  public Publisher(QueueContext context, Wakeups wakeups) {
    this.own = context.own();
    this.events = context.events();
    this.config = context.config();
    this.keepAlive = context.keepAlives();
    this.wakeups = wakeups;
  }

  /**
   * Publishes validated payloads to {@code spec}'s queue through {@code ctx}, in autocommit or in the transaction
   * open on its connection.
   *
   * @return the message ids, in the order of {@code payloads}
   * @throws QueueNotFoundException if the queue is missing and not auto-deleted
   */
  public List<Long> publish(DSLContext ctx, QueueSpec spec, List<JSONB> payloads, Duration delay, Duration ttl) {
    // One connection for the whole publish, so it can tell whether the insert committed on its own (autocommit): a
    // wake-up failing after that must not turn a committed publish into an "outcome unknown" failure. A context on
    // one connection already is that (and pinning it again would cost a configuration per publish).
    if (Contexts.overOneConnection(ctx)) {
      return publishOn(ctx, ctx.connectionResult(Connection::getAutoCommit), spec, payloads, delay, ttl);
    }
    return ctx.connectionResult(connection -> publishOn(
        ctx.configuration().derive(new DefaultConnectionProvider(connection)).dsl(), connection.getAutoCommit(),
        spec, payloads, delay, ttl));
  }

  private List<Long> publishOn(
      DSLContext on, boolean autoCommit, QueueSpec spec, List<JSONB> payloads, Duration delay, Duration ttl) {
    boolean keepAliveDue = keepAlive.tryPass(spec.name());
    if (keepAliveDue && !autoCommit) {
      writeKeepAliveOutsideTransaction(on, spec.name());
    }
    List<Long> ids;
    try {
      ids = insertIfQueueExists(on, autoCommit, keepAliveDue, spec.name(), payloads, delay, ttl);
    } catch (RuntimeException e) {
      if (keepAliveDue && autoCommit) {
        // The keep-alive went down with the insert: the queue's next publish writes it.
        keepAlive.forget(spec.name());
      }
      throw e;
    }
    if (ids.isEmpty()) {
      if (!spec.autoDeleted()) {
        keepAlive.forget(spec.name());
        throw new QueueNotFoundException(spec.name());
      }
      ids = autoCommit ? healAndInsert(on, spec, payloads, delay, ttl)
          : createThenInsertInTransaction(on, spec, payloads, delay, ttl);
    }
    wakeUp(on, autoCommit, spec.name());
    return sorted(ids);
  }

  /** The heal in one statement: re-creates the queue and inserts the messages, so no reaper can run in between. */
  private List<Long> healAndInsert(DSLContext on, QueueSpec spec, List<JSONB> payloads, Duration delay, Duration ttl) {
    List<Long> ids = PublishStatements.healAndInsertItems(on, spec, payloads, delay, ttl);
    keepAlive.done(spec.name());
    events.events().healed(spec.name());
    log.info("re-created auto-deleted queue \"{}\" on publish (it had been reaped)", spec.name());
    return ids;
  }

  /**
   * The heal inside a caller's transaction: the queue row is created and committed on the repository's own
   * connection, so no other publisher ever waits for the caller's transaction, then the messages are inserted in
   * that transaction. Falls back to {@link #healAndInsert} in the transaction when there is no own connection, or
   * when reapers keep winning the race.
   */
  private List<Long> createThenInsertInTransaction(
      DSLContext on, QueueSpec spec, List<JSONB> payloads, Duration delay, Duration ttl) {
    // Above READ COMMITTED the transaction's snapshot could never see the row committed on the own connection.
    if (on.connectionResult(Connection::getTransactionIsolation) != Connection.TRANSACTION_READ_COMMITTED) {
      return healAndInsert(on, spec, payloads, delay, ttl);
    }
    for (int attempt = 1; attempt <= MAX_CREATE_ATTEMPTS; attempt++) {
      if (!onOwnConnection(own -> QueueStatements.createOrKeepAlive(own, spec))) {
        break;
      }
      keepAlive.done(spec.name());
      List<Long> ids = PublishStatements.insertItemsIfQueueExists(on, spec.name(), payloads, delay, ttl);
      if (!ids.isEmpty()) {
        events.events().healed(spec.name());
        log.info("re-created auto-deleted queue \"{}\" on publish (it had been reaped)", spec.name());
        return ids;
      }
      log.debug("auto-deleted queue \"{}\" was reaped again right after its re-creation (attempt {})",
          spec.name(), attempt);
    }
    return healAndInsert(on, spec, payloads, delay, ttl);
  }

  /**
   * Runs {@code write} in autocommit on a connection of the repository's own context.
   *
   * @return {@code false} (having run nothing) if that context's connection is not in autocommit: it is the caller's
   *     transaction, or some other transaction, and the write would be held until it ends
   */
  private boolean onOwnConnection(Consumer<DSLContext> write) {
    return own.connectionResult(connection -> {
      if (!connection.getAutoCommit()) {
        return false;
      }
      write.accept(own.configuration().derive(new DefaultConnectionProvider(connection)).dsl());
      return true;
    });
  }

  /**
   * The fast path: inserts into an existing queue, or returns no ids if the queue is missing. The statement depends on
   * the connection: in autocommit the plain insert (whose 23503 aborts nothing else), carrying the keep-alive when
   * {@code keepAliveDue} so that it costs no statement of its own; inside a transaction one that cannot raise 23503
   * at all (its keep-alive was written outside the transaction before).
   */
  private List<Long> insertIfQueueExists(DSLContext on, boolean autoCommit, boolean keepAliveDue, String queue,
      List<JSONB> payloads, Duration delay, Duration ttl) {
    if (!autoCommit) {
      return PublishStatements.insertItemsIfQueueExists(on, queue, payloads, delay, ttl);
    }
    try {
      if (!keepAliveDue && payloads.size() >= COPY_MIN_BATCH && copyUsable) {
        List<Long> copied = copyIfQueueExists(on, queue, payloads, delay, ttl);
        if (copied != null) {
          return copied;
        }
      }
      return keepAliveDue
          ? PublishStatements.insertItemsKeepingAlive(on, queue, payloads, delay, ttl, config.keepAliveInterval())
          : PublishStatements.insertItems(on, queue, payloads, delay, ttl);
    } catch (DataAccessException e) {
      if (PublishStatements.isMissingQueue(e)) {
        return List.of();
      }
      throw e;
    }
  }

  /**
   * Copies the payloads in a transaction of its own on {@code on}'s connection (in autocommit).
   *
   * @return the ids; empty if the queue is missing; {@code null} (having written nothing) if this publisher cannot
   *     COPY, which it then never tries again
   */
  private List<Long> copyIfQueueExists(
      DSLContext on, String queue, List<JSONB> payloads, Duration delay, Duration ttl) {
    return on.connectionResult(connection -> {
      CopyManager copy = copyManager(connection);
      if (copy == null) {
        return null;
      }
      connection.setAutoCommit(false);
      try {
        PublishStatements.Reservation reserved = PublishStatements.reserveItems(
            on, payloads.size(), delay, ttl, config.statementTimeout());
        PublishStatements.copyItems(copy, queue, payloads, reserved);
        connection.commit();
        List<Long> ids = new ArrayList<>(payloads.size());
        for (long id : reserved.ids()) {
          ids.add(id);
        }
        return ids;
      } catch (DataAccessException e) {
        rollbackAfterFailure(connection, e);
        if (PublishStatements.isInsufficientPrivilege(e)) {
          copyUsable = false;
          log.warn("publishBatch inserts its batches instead of copying them: the database role may not draw ids"
              + " from the identity sequence of \"MessageQueueItem\".\"id\" ({}); grant USAGE on it, as"
              + " db/msgqueue/app-role-grants.sql does", e.getMessage());
          return null;
        }
        throw e;
      } catch (SQLException e) {
        rollbackAfterFailure(connection, e);
        DataAccessException failure =
            new DataAccessException("COPY of " + payloads.size() + " messages failed: " + e.getMessage(), e);
        if (PublishStatements.isMissingQueue(failure)) {
          return List.<Long>of();
        }
        throw FailureTranslation.translate(failure, PublishStatements.COPY_ITEMS);
      } catch (RuntimeException | Error e) {
        rollbackAfterFailure(connection, e);
        throw e;
      } finally {
        restoreAutoCommit(connection);
      }
    });
  }

  /** pgjdbc's COPY on {@code connection}, or {@code null} (and COPY off for good) for any other driver or proxy. */
  private CopyManager copyManager(Connection connection) {
    try {
      if (connection.isWrapperFor(PGConnection.class)) {
        return connection.unwrap(PGConnection.class).getCopyAPI();
      }
    } catch (SQLException | RuntimeException e) {
      log.debug("the connection does not unwrap to pgjdbc's", e);
    }
    copyUsable = false;
    log.warn("publishBatch inserts its batches instead of copying them: the connection ({}) does not unwrap to"
        + " pgjdbc's PGConnection", connection.getClass().getName());
    return null;
  }

  private static void rollbackAfterFailure(Connection connection, Throwable failure) {
    try {
      connection.rollback();
    } catch (SQLException | RuntimeException e) {
      failure.addSuppressed(e);
    }
  }

  /** Back to autocommit; a connection that cannot be is broken, and the pool finds that out on its own. */
  private static void restoreAutoCommit(Connection connection) {
    try {
      connection.setAutoCommit(true);
    } catch (SQLException e) {
      log.debug("could not restore autocommit after a COPY", e);
    }
  }

  /**
   * Sends the (coalesced) wake-up after the insert ({@link Wakeups}). In autocommit the messages are already
   * committed, and since a wake-up only shortens latency (subscribers poll), a failure is logged, not thrown: throwing
   * would report a committed publish as failed, and a caller retrying it would publish it twice. Inside the caller's
   * transaction the wake-up is part of that transaction and its failure is thrown, since that transaction is lost.
   */
  private void wakeUp(DSLContext on, boolean autoCommit, String queue) {
    try {
      wakeups.published(on, queue, autoCommit);
    } catch (RuntimeException e) {
      if (!autoCommit) {
        throw e;
      }
      log.warn("published to \"{}\" (committed), but its wake-up notification failed ({}); subscribers find the"
          + " messages by polling", queue, e.toString());
    }
  }

  /**
   * The keep-alive of a publish inside a caller's transaction, before its insert: written in autocommit on the
   * repository's own connection, so the caller's transaction never holds the queue row (in it only if there is no
   * such connection).
   */
  private void writeKeepAliveOutsideTransaction(DSLContext on, String queue) {
    Duration interval = config.keepAliveInterval();
    try {
      if (!onOwnConnection(own -> QueueStatements.keepAliveIfStale(own, queue, interval))) {
        QueueStatements.keepAliveIfStale(on, queue, interval);
      }
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
