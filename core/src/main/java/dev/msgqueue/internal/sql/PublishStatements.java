package dev.msgqueue.internal.sql;

import static dev.msgqueue.internal.sql.ServerTime.utcNowPlus;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.array;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.generateSeries;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.unnest;
import static org.jooq.impl.DSL.val;

import dev.msgqueue.QueueSpec;
import dev.msgqueue.jooq.tables.MessageQueue;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import java.nio.charset.StandardCharsets;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.Arrays;
import java.util.List;
import org.jooq.CommonTableExpression;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.InsertValuesStep4;
import org.jooq.JSONB;
import org.jooq.Record1;
import org.jooq.Record3;
import org.jooq.ResultQuery;
import org.jooq.Table;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.SQLDataType;
import org.postgresql.copy.CopyIn;
import org.postgresql.copy.CopyManager;

/**
 * The publish statements, with the locks each takes:
 *
 * <ul>
 *   <li>{@link #insertItems} (autocommit) and {@link #insertItemsIfQueueExists} (in a caller's transaction): FOR KEY
 *       SHARE on the queue row, the lock the foreign-key check takes. KEY SHARE conflicts only with FOR UPDATE (a
 *       delete), so publishers never block each other, nor the keep-alive write.
 *   <li>{@link #insertItemsKeepingAlive} (autocommit, a queue's first publish in a keep-alive interval): the same
 *       insert, and the keep-alive {@code UPDATE} of the queue row in the same statement, which takes FOR NO KEY
 *       UPDATE SKIP LOCKED on it for the statement's length: it writes nothing rather than wait, and publishers' KEY
 *       SHARE does not conflict with it.
 *   <li>{@link #healAndInsertItems}: the queue upsert ({@link QueueStatements#upsertQueue}), NO KEY UPDATE on an
 *       existing row, and the insert, in one statement.
 *   <li>{@link #reserveItems} then {@link #copyItems} (autocommit batches, in a transaction of their own): no lock
 *       until the COPY, whose foreign-key checks take FOR KEY SHARE on the queue row, as {@link #insertItems} does.
 * </ul>
 */
public final class PublishStatements {
  private static final MessageQueue Q = MESSAGE_QUEUE;
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;
  private static final Field<Long> ORDINAL = field(name("v", "ordinal"), SQLDataType.BIGINT);
  private static final Field<JSONB> PAYLOAD = field(name("v", "payload"), SQLDataType.JSONB);

  /** SQLSTATE foreign_key_violation: the only foreign key of "MessageQueueItem" is its queue. */
  private static final String FOREIGN_KEY_VIOLATION = "23503";
  /** SQLSTATE insufficient_privilege. */
  private static final String INSUFFICIENT_PRIVILEGE = "42501";

  /** The COPY data sent at a time. */
  private static final int COPY_CHUNK_BYTES = 32 * 1024;

  /** {@link #copyItems}' statement. Plain SQL, since jOOQ has no COPY; the names are the generated table's. */
  public static final String COPY_ITEMS = "COPY " + quoted(I.getName()) + " (" + quoted(I.ID.getName()) + ", "
      + quoted(I.PAYLOAD.getName()) + ", " + quoted(I.READ_AFTER.getName()) + ", " + quoted(I.EXPIRES_AT.getName())
      + ", " + quoted(I.QUEUE_ID.getName()) + ") FROM STDIN";

  private PublishStatements() { }

  /**
   * The publish fast path outside a transaction (autocommit): a plain insert of the payloads, the cheapest statement
   * there is. Its foreign-key check takes KEY SHARE on the queue row; if the queue is missing (or a concurrent reaper
   * deletes it while the check waits), it fails with 23503 ({@link #isMissingQueue}), which in autocommit aborts
   * nothing but this statement.
   *
   * @return the message ids
   */
  public static List<Long> insertItems(
      DSLContext ctx, String queue, List<JSONB> payloads, Duration delay, Duration ttl) {
    return insertPayloads(ctx.insertInto(I, I.PAYLOAD, I.READ_AFTER, I.EXPIRES_AT, I.QUEUE_ID),
        queue, payloads, delay, ttl);
  }

  /** The insert of {@link #insertItems}, after whatever {@code WITH} {@code into} was begun with. */
  private static List<Long> insertPayloads(
      InsertValuesStep4<MessageQueueItemRecord, JSONB, LocalDateTime, LocalDateTime, String> into,
      String queue, List<JSONB> payloads, Duration delay, Duration ttl) {
    if (payloads.size() == 1) {
      // One message (an uncoalesced publish): a one-row VALUES is cheaper to render, bind and plan than unnest.
      return into.values(val(payloads.get(0)), utcNowPlus(delay), utcNowPlus(ttl), val(queue))
          .returning(I.ID)
          .fetch(I.ID);
    }
    return into.select(select(PAYLOAD, utcNowPlus(delay), utcNowPlus(ttl), val(queue))
            .from(payloadRows(payloads))
            .orderBy(ORDINAL))
        .returning(I.ID)
        .fetch(I.ID);
  }

  /**
   * {@link #insertItems} with the queue's keep-alive in the same statement: {@code WITH kept_alive AS (UPDATE
   * "MessageQueue" ... SKIP LOCKED) INSERT INTO "MessageQueueItem" ...}. A queue's first publish in a keep-alive
   * interval pays one statement and one commit instead of two: with many queues nearly every publish is a queue's
   * first, and the separate keep-alive statement slowed publishing to many queues (measured: docs/scaling.md).
   * PostgreSQL runs a data-modifying {@code WITH} once, to completion, whether or not the insert
   * reads it. The update writes the row only if its {@code "lastActive"} is older than {@code maxAge} and no one else
   * holds it (the same statement as {@link QueueStatements#keepAliveIfStale}), so it never waits; the insert's
   * foreign-key check then finds the row locked by its own statement. A missing queue fails the whole statement with
   * 23503, as {@link #insertItems} does, and the keep-alive with it (it had no row to write).
   *
   * @return the message ids
   */
  public static List<Long> insertItemsKeepingAlive(
      DSLContext ctx, String queue, List<JSONB> payloads, Duration delay, Duration ttl, Duration maxAge) {
    CommonTableExpression<Record1<String>> keptAlive = name("kept_alive").fields(Q.NAME.getName())
        .as(QueueStatements.keepAliveIfStaleUpdate(ctx, queue, maxAge).returningResult(Q.NAME));
    return insertPayloads(ctx.with(keptAlive).insertInto(I, I.PAYLOAD, I.READ_AFTER, I.EXPIRES_AT, I.QUEUE_ID),
        queue, payloads, delay, ttl);
  }

  /** Whether {@code failure} is the foreign-key violation of an item whose queue row does not exist. */
  public static boolean isMissingQueue(DataAccessException failure) {
    return FOREIGN_KEY_VIOLATION.equals(failure.sqlState());
  }

  /**
   * The publish fast path inside a caller's transaction, where a 23503 would abort the whole transaction: inserts
   * the payloads into an existing queue, as one statement that reads the queue row {@code FOR KEY SHARE}. If the row
   * does not exist (or a concurrent reaper deletes it while this waits), the statement inserts nothing and returns no
   * ids instead of raising 23503. The foreign-key check then finds the row already locked by this transaction.
   *
   * @return the message ids; empty if the queue is missing
   */
  public static List<Long> insertItemsIfQueueExists(
      DSLContext ctx, String queue, List<JSONB> payloads, Duration delay, Duration ttl) {
    Table<?> rows = payloadRows(payloads);
    return ctx.insertInto(I, I.PAYLOAD, I.READ_AFTER, I.EXPIRES_AT, I.QUEUE_ID)
        .select(select(PAYLOAD, utcNowPlus(delay), utcNowPlus(ttl), Q.NAME)
            .from(Q)
            .crossJoin(rows)
            .where(Q.NAME.eq(queue))
            .orderBy(ORDINAL)
            .forKeyShare()
            .of(Q))
        .returning(I.ID)
        .fetch(I.ID);
  }

  /**
   * The heal path: re-creates a reaped auto-deleted queue with the publisher's attributes and inserts the payloads,
   * in one statement, so no reaper can run between the two. A concurrent healer's row wins (its attributes stay) and
   * only {@code "lastActive"} is written.
   *
   * @return the message ids
   */
  public static List<Long> healAndInsertItems(
      DSLContext ctx, QueueSpec spec, List<JSONB> payloads, Duration delay, Duration ttl) {
    CommonTableExpression<Record1<String>> healed = name("healed").fields(Q.NAME.getName())
        .as(QueueStatements.upsertQueue(ctx, spec, false).returningResult(Q.NAME));
    Field<String> healedName = healed.field(Q.NAME.getName(), String.class);
    return ctx.with(healed)
        .insertInto(I, I.PAYLOAD, I.READ_AFTER, I.EXPIRES_AT, I.QUEUE_ID)
        .select(select(PAYLOAD, utcNowPlus(delay), utcNowPlus(ttl), healedName)
            .from(healed)
            .crossJoin(payloadRows(payloads))
            .orderBy(ORDINAL))
        .returning(I.ID)
        .fetch(I.ID);
  }

  /**
   * The payloads as rows {@code (payload, ordinal)}: {@code unnest(?::jsonb[]) WITH ORDINALITY}, one array bind
   * for all of them (a multi-row VALUES costs a bind and its parsing per row, several times the client CPU), and one
   * JSON array read with {@code jsonb_array_elements} ran slower on the server for large batches.
   */
  private static Table<?> payloadRows(List<JSONB> payloads) {
    // The JSON array measured publishBatch(1000) / COPY 0.62-0.63 against 0.80-1.03 with this array (PostgreSQL 15,
    // quiet machine, two interleaved runs each).
    Field<JSONB[]> array = val(payloads.toArray(new JSONB[0]), SQLDataType.JSONB.getArrayDataType());
    return unnest(array).withOrdinality().as("v", PAYLOAD.getName(), ORDINAL.getName());
  }

  /**
   * What {@link #copyItems} writes besides the payloads: their ids, in ascending order, and the server's
   * {@code "readAfter"} and {@code "expiresAt"} in its own text form.
   */
  public record Reservation(long[] ids, String readAfter, String expiresAt) { }

  /**
   * The first statement of a publish by COPY, in the transaction that then runs {@link #copyItems}: draws
   * {@code count} ids from the identity sequence of {@code "MessageQueueItem"."id"} (found by
   * {@code pg_get_serial_sequence}, so through the search path, as the tables are), reads the server's clock as the
   * insert statements do, and bounds every later statement of the transaction by {@code statementTimeout}
   * ({@code SET LOCAL statement_timeout}): the COPY runs outside jOOQ, so outside the deadlines its statements get.
   * Those three run once, in a materialized {@code WITH}; {@code nextval} once per row.
   *
   * <p>Drawing ids explicitly needs {@code USAGE} on the sequence (an INSERT draws them without any privilege): a
   * role without it gets 42501, see {@link #isInsufficientPrivilege}.
   */
  public static Reservation reserveItems(
      DSLContext tx, int count, Duration delay, Duration ttl, Duration statementTimeout) throws SQLException {
    Field<Object> sequence = field(name("once", "sequence"), SQLDataType.OTHER);
    Field<String> readAfter = field(name("once", "readAfter"), SQLDataType.VARCHAR);
    Field<String> expiresAt = field(name("once", "expiresAt"), SQLDataType.VARCHAR);
    CommonTableExpression<?> once = name("once").fields("sequence", "readAfter", "expiresAt", "timeout")
        .asMaterialized(select(
            // regclass once: nextval of the name would look it up again for every id.
            function("to_regclass", SQLDataType.OTHER, function("pg_get_serial_sequence", SQLDataType.VARCHAR,
                inline(quoted(I.getName())), inline(I.ID.getName()))),
            utcNowPlus(delay).cast(SQLDataType.VARCHAR),
            utcNowPlus(ttl).cast(SQLDataType.VARCHAR),
            function("set_config", SQLDataType.VARCHAR, inline("statement_timeout"),
                val(statementTimeout.toMillis() + "ms"), inline(true))));
    // The ids come back as one array, read from the result set by pgjdbc: a row per id measured 1.1-1.3 ms per 1,000
    // in the client, and the array converted by jOOQ 0.4-0.5 ms more than by pgjdbc.
    ResultQuery<Record3<Long[], String, String>> query = tx.with(once)
        .select(array(select(function("nextval", SQLDataType.BIGINT, sequence)).from(generateSeries(1, count))),
            readAfter, expiresAt)
        .from(once);
    long[] ids = new long[count];
    String readAfterText;
    String expiresAtText;
    try (ResultSet row = query.fetchResultSet()) {
      row.next();
      Long[] drawn = (Long[]) row.getArray(1).getArray();
      if (drawn.length != count || drawn[0] == null) {
        throw new IllegalStateException("no identity sequence found for " + quoted(I.getName()) + "."
            + quoted(I.ID.getName()) + " through the search path");
      }
      for (int i = 0; i < count; i++) {
        ids[i] = drawn[i];
      }
      readAfterText = row.getString(2);
      expiresAtText = row.getString(3);
    }
    Arrays.sort(ids);
    return new Reservation(ids, readAfterText, expiresAtText);
  }

  /** Whether {@code failure} is a missing privilege: {@link #reserveItems} without USAGE on the sequence. */
  public static boolean isInsufficientPrivilege(DataAccessException failure) {
    return INSUFFICIENT_PRIVILEGE.equals(failure.sqlState());
  }

  /**
   * Copies the payloads into {@code queue} with the ids and times of {@code reserved}, the i-th payload under the i-th
   * smallest id, as {@link #insertItems} orders them: {@link #COPY_ITEMS}, in COPY's text format, sent in chunks as
   * it is written. COPY writes the rows in multi-row WAL records (500 WAL bytes per message against the insert's 550)
   * and plans nothing. Its foreign-key checks fail it with 23503 if the queue is missing
   * ({@link #isMissingQueue}).
   *
   * @return the number of rows copied
   */
  public static long copyItems(CopyManager copy, String queue, List<JSONB> payloads, Reservation reserved)
      throws SQLException {
    byte[] readAfter = reserved.readAfter().getBytes(StandardCharsets.UTF_8);
    byte[] expiresAt = reserved.expiresAt().getBytes(StandardCharsets.UTF_8);
    byte[] queueName = queue.getBytes(StandardCharsets.UTF_8);
    CopyText rows = new CopyText(COPY_CHUNK_BYTES + 4096);
    CopyIn in = copy.copyIn(COPY_ITEMS);
    try {
      for (int i = 0; i < payloads.size(); i++) {
        rows.number(reserved.ids()[i]);
        rows.tab();
        rows.value(payloads.get(i).data().getBytes(StandardCharsets.UTF_8));
        rows.tab();
        rows.value(readAfter);
        rows.tab();
        rows.value(expiresAt);
        rows.tab();
        rows.value(queueName);
        rows.newline();
        // Sent as it is written, so the server copies the first rows while the client writes the next.
        if (rows.length() >= COPY_CHUNK_BYTES) {
          in.writeToCopy(rows.bytes(), 0, rows.length());
          rows.clear();
        }
      }
      if (rows.length() > 0) {
        in.writeToCopy(rows.bytes(), 0, rows.length());
      }
      return in.endCopy();
    } finally {
      if (in.isActive()) {
        in.cancelCopy();
      }
    }
  }

  private static String quoted(String identifier) {
    return '"' + identifier + '"';
  }

  /** Rows in COPY's text format: columns split by tabs, rows by newlines, backslash and control characters escaped. */
  private static final class CopyText {
    private byte[] bytes;
    private int length;

    CopyText(int capacity) {
      bytes = new byte[capacity];
    }

    void number(long value) {
      String digits = Long.toString(value);
      ensure(digits.length());
      for (int i = 0; i < digits.length(); i++) {
        bytes[length++] = (byte) digits.charAt(i);
      }
    }

    void tab() {
      ensure(1);
      bytes[length++] = '\t';
    }

    void newline() {
      ensure(1);
      bytes[length++] = '\n';
    }

    /**
     * A value's UTF-8 bytes, escaped: no byte of a multi-byte character is below 0x80, so escaping byte by byte is
     * exact. Control characters other than tab, newline and carriage return go as octal escapes.
     */
    void value(byte[] utf8) {
      ensure(utf8.length);
      for (int i = 0; i < utf8.length; i++) {
        byte b = utf8[i];
        if (b == '\\' || (b >= 0 && b < 0x20)) {
          // Room for the escape and for the rest of the value, which the ensure above counted one byte each.
          ensure(4 + utf8.length - i);
          escape(b);
        } else {
          bytes[length++] = b;
        }
      }
    }

    private void escape(byte b) {
      bytes[length++] = '\\';
      switch (b) {
        case '\\' -> bytes[length++] = '\\';
        case '\n' -> bytes[length++] = 'n';
        case '\r' -> bytes[length++] = 'r';
        case '\t' -> bytes[length++] = 't';
        default -> {
          bytes[length++] = (byte) ('0' + (b >> 6));
          bytes[length++] = (byte) ('0' + ((b >> 3) & 7));
          bytes[length++] = (byte) ('0' + (b & 7));
        }
      }
    }

    byte[] bytes() {
      return bytes;
    }

    void clear() {
      length = 0;
    }

    int length() {
      return length;
    }

    private void ensure(int more) {
      if (length + more > bytes.length) {
        bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, length + more));
      }
    }
  }
}
