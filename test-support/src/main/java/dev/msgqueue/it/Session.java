package dev.msgqueue.it;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * One database connection with explicit transactions, for tests that step two or more sessions through an exact
 * interleaving of statements.
 */
public final class Session implements AutoCloseable {
  private final Connection connection;
  private final DSLContext dsl;
  private final int pid;

  private Session(Connection connection) {
    this.connection = connection;
    this.dsl = DSL.using(connection, SQLDialect.POSTGRES);
    this.pid = dsl.select(function("pg_backend_pid", Integer.class)).fetchSingle().value1();
  }

  /** Opens a session with autocommit off: every statement runs in a transaction until commit or rollback. */
  public static Session open(TestDatabase db) {
    try {
      Connection connection = db.connect();
      connection.setAutoCommit(false);
      return new Session(connection);
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  public DSLContext dsl() {
    return dsl;
  }

  public int pid() {
    return pid;
  }

  /** Makes every lock wait in this session fail after {@code timeout} (SQLSTATE 55P03) instead of waiting. */
  public Session lockTimeout(Duration timeout) {
    dsl.select(function("set_config", String.class, inline("lock_timeout"), inline(timeout.toMillis() + "ms"),
        inline(false))).fetch();
    commit();
    return this;
  }

  public void commit() {
    try {
      connection.commit();
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  public void rollback() {
    try {
      connection.rollback();
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Waits until this session's backend is waiting for a lock, as another session observes it. */
  public void awaitWaitingOnLock(DSLContext observer) {
    Instant deadline = Instant.now().plusSeconds(20);
    while (Instant.now().isBefore(deadline)) {
      Integer waiting = observer.selectCount()
          .from(table(name("pg_catalog", "pg_stat_activity")))
          .where(field(name("pid")).eq(pid))
          .and(field(name("wait_event_type")).eq("Lock"))
          .fetchSingle().value1();
      if (waiting > 0) {
        return;
      }
      try {
        Thread.sleep(10);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }
    throw new AssertionError("session " + pid + " never waited on a lock");
  }

  @Override
  public void close() {
    try {
      if (!connection.isClosed()) {
        connection.rollback();
        connection.close();
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }
}
