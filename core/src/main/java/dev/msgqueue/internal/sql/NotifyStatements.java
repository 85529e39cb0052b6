package dev.msgqueue.internal.sql;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.unnest;
import static org.jooq.impl.DSL.val;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Collection;
import org.jooq.DSLContext;
import org.jooq.Field;
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

  /**
   * Sends one {@code NOTIFY msgqueue_wakeup, '<queue>'} per queue of {@code queues}, in one statement and so in one
   * transaction: {@code SELECT pg_notify('msgqueue_wakeup', q.name) FROM unnest(?::varchar[]) q(name)}. One commit,
   * taking the notification lock once, for all of them.
   */
  public static void notifyWakeups(DSLContext ctx, Collection<String> queues) {
    if (queues.size() == 1) {
      notifyWakeup(ctx, queues.iterator().next());
      return;
    }
    Field<String> queue = field(name("q", "name"), SQLDataType.VARCHAR);
    ctx.select(function("pg_notify", SQLDataType.OTHER, inline(CHANNEL), queue))
        .from(unnest(val(queues.toArray(new String[0]), SQLDataType.VARCHAR.getArrayDataType())).as("q", "name"))
        .execute();
  }

  /** Subscribes {@code connection} (in autocommit) to the wake-up channel. */
  public static void listen(Connection connection) throws SQLException {
    // Plain SQL: jOOQ has no LISTEN statement. The channel is a constant identifier, never user input.
    try (Statement statement = connection.createStatement()) {
      statement.execute("LISTEN " + CHANNEL);
    }
  }
}
