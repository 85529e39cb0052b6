package dev.msgqueue.internal.sql;

import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.val;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import org.jooq.DSLContext;
import org.jooq.impl.SQLDataType;

/**
 * The wake-up channel: {@link #notifyWakeup} takes no row lock, but PostgreSQL takes a database-wide lock on its
 * notification queue while a notifying transaction commits, which is why publishers coalesce these.
 */
public final class NotifyStatements {
  /** The one channel all wake-ups use; the payload is the queue name. */
  public static final String CHANNEL = "msgqueue_wakeup";

  private NotifyStatements() { }

  /**
   * Sends {@code NOTIFY msgqueue_wakeup, '<queue>'} through {@code pg_notify}, a function call jOOQ can express (it
   * has no NOTIFY statement). Inside a transaction PostgreSQL delivers it on commit, and not at all on rollback. The
   * payload is only the queue name (at most {@value dev.msgqueue.QueueSpec#MAX_NAME_BYTES} bytes, far below the
   * 8000-byte limit).
   */
  public static void notifyWakeup(DSLContext ctx, String queue) {
    ctx.select(function("pg_notify", SQLDataType.OTHER, inline(CHANNEL), val(queue))).execute();
  }

  /** Subscribes {@code connection} (in autocommit) to the wake-up channel. */
  public static void listen(Connection connection) throws SQLException {
    // Plain SQL: jOOQ has no LISTEN statement. The channel is a constant identifier, never user input.
    try (Statement statement = connection.createStatement()) {
      statement.execute("LISTEN " + CHANNEL);
    }
  }
}
