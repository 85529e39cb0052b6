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
    if (!(failure instanceof DataAccessException dataAccess)) {
      return;
    }
    String state = dataAccess.sqlState();
    if ("57014".equals(state) || "55P03".equals(state)) {
      ctx.exception(new MsgQueueTimeoutException(
          "statement timed out (SQLSTATE " + state + "), most likely waiting for a lock: " + firstLine(ctx), failure));
    } else if (state != null && (state.startsWith("08") || state.startsWith("57P"))) {
      ctx.exception(new MsgQueueConnectionException(
          "the database connection failed (SQLSTATE " + state + "); the statement's outcome is unknown: "
              + firstLine(ctx), failure));
    }
  }

  private static String firstLine(ExecuteContext ctx) {
    String sql = ctx.sql();
    if (sql == null) {
      return "(no statement)";
    }
    return sql.length() > 120 ? sql.substring(0, 120) + "..." : sql;
  }
}
