package dev.msgqueue.bench;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import org.jooq.DSLContext;

/**
 * The drain and batching scenarios' reference cells: a queue table of the leading PostgreSQL queue's shape (pgmq: a bigint identity
 * key, a visibility timeout {@code vt} with its own index, a read count, the enqueue time and a {@code jsonb} message)
 * and its consumer's two statements: a read that makes up to a batch of visible rows invisible for the lease and
 * returns them, then one delete of the batch by id; and its batch send, one insert of a {@code jsonb[]} bind. Written from that shape, so every drain run reports msgqueue
 * beside it on the same server, payload and client.
 *
 * <p>Every statement here is plain SQL on purpose: the table is not part of msgqueue's schema, so there are no
 * generated jOOQ tables for it, and the point is to run exactly the other queue's statement shape.
 */
final class PgmqShape {
  static final String TABLE = "pgmq_shape_queue";

  static final String CREATE_TABLE = "CREATE TABLE IF NOT EXISTS " + TABLE + " ("
      + "msg_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
      + "read_ct int NOT NULL DEFAULT 0, "
      + "enqueued_at timestamptz NOT NULL DEFAULT now(), "
      + "vt timestamptz NOT NULL DEFAULT now(), "
      + "message jsonb)";
  static final String CREATE_VT_INDEX = "CREATE INDEX IF NOT EXISTS " + TABLE + "_vt_idx ON " + TABLE + " (vt)";

  /** The read: up to a batch of visible rows, oldest first, skipping rows others hold, invisible for the lease. */
  static final String READ_SQL = "UPDATE " + TABLE + " q SET vt = now() + interval '"
      + DrainScenario.LEASE.toSeconds() + " seconds', read_ct = q.read_ct + 1"
      + " FROM (SELECT msg_id FROM " + TABLE + " WHERE vt <= now() ORDER BY msg_id LIMIT " + DrainScenario.BATCH
      + " FOR UPDATE SKIP LOCKED) s WHERE q.msg_id = s.msg_id"
      + " RETURNING q.msg_id, q.read_ct, q.enqueued_at, q.vt, q.message";
  static final String DELETE_SQL = "DELETE FROM " + TABLE + " WHERE msg_id = ANY(?)";
  /** The batch send: the messages as one {@code jsonb[]} bind, visible at once, their ids returned. */
  static final String SEND_BATCH_SQL = "INSERT INTO " + TABLE + " (vt, message)"
      + " SELECT clock_timestamp(), unnest(?::jsonb[]) RETURNING msg_id";

  private PgmqShape() { }

  static void create(DSLContext control) {
    control.execute(CREATE_TABLE);
    control.execute(CREATE_VT_INDEX);
  }

  /** Empties the table (fresh relation, identity restarted) and loads {@code messages} copies of the payload. */
  static void preload(DSLContext control, int messages) {
    control.execute("TRUNCATE " + TABLE + " RESTART IDENTITY");
    control.execute("INSERT INTO " + TABLE + " (message) SELECT ?::jsonb FROM generate_series(1, ?)",
        BenchContext.PAYLOAD.data(), messages);
    control.execute("VACUUM ANALYZE " + TABLE);
  }

  /** Empties the table (fresh relation, identity restarted) before a batching cell. */
  static void truncate(DSLContext control) {
    control.execute("TRUNCATE " + TABLE + " RESTART IDENTITY");
  }

  /** Sends {@code batch} as one batch on {@code connection}: @return how many ids came back */
  static int sendBatch(Connection connection, String[] batch) throws SQLException {
    try (PreparedStatement send = connection.prepareStatement(SEND_BATCH_SQL)) {
      send.setArray(1, connection.createArrayOf("jsonb", batch));
      int ids = 0;
      try (ResultSet rows = send.executeQuery()) {
        while (rows.next()) {
          rows.getLong(1);
          ids++;
        }
      }
      return ids;
    }
  }

  static int rowsLeft(DSLContext control) {
    return control.fetchOne("SELECT count(*) FROM " + TABLE).get(0, Integer.class);
  }

  /** Reads and deletes batches on one connection until a read finds nothing. */
  static void drainLoop(DataSource pool, AtomicLong statements, AtomicLong consumed) throws SQLException {
    DrainScenario.readThenDeleteLoop(pool, READ_SQL, 5, DELETE_SQL, statements, consumed);
  }
}
