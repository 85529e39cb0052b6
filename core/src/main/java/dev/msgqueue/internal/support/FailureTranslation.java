package dev.msgqueue.internal.support;

import dev.msgqueue.MsgQueueTimeoutException;
import dev.msgqueue.MsgQueueConnectionException;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.jooq.exception.DataAccessException;

/**
 * Turns the database failures a caller can act on into msgqueue's typed exceptions, for every statement msgqueue
 * runs; everything else stays jOOQ's {@link DataAccessException}.
 */
public final class FailureTranslation implements ExecuteListener {
  private static final long serialVersionUID = 1L;

  @Override
  public void exception(ExecuteContext ctx) {
    RuntimeException failure = ctx.exception();
    if (failure instanceof DataAccessException dataAccess) {
      ctx.exception(translate(dataAccess, firstLine(ctx)));
    }
  }

  /**
   * The typed exception for a failure of {@code statement}, or {@code failure} itself: for statements run outside
   * jOOQ's execution, where this listener does not see them.
   */
  public static RuntimeException translate(DataAccessException failure, String statement) {
    String state = failure.sqlState();
    if ("57014".equals(state) || "55P03".equals(state)) {
      return new MsgQueueTimeoutException(
          "statement timed out (SQLSTATE " + state + "), most likely waiting for a lock: " + statement, failure);
    } else if (state != null && (state.startsWith("08") || state.startsWith("57P"))) {
      return new MsgQueueConnectionException(
          "the database connection failed (SQLSTATE " + state + "); the statement's outcome is unknown: "
              + statement, failure);
    }
    return failure;
  }

  private static String firstLine(ExecuteContext ctx) {
    String sql = ctx.sql();
    if (sql == null) {
      return "(no statement)";
    }
    return sql.length() > 120 ? sql.substring(0, 120) + "..." : sql;
  }
}
