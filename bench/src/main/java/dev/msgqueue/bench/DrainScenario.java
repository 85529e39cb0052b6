package dev.msgqueue.bench;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.ConsumeMode;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.Subscriber;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.impl.DefaultConfiguration;

/**
 * Scenario 5: drain a preloaded queue to empty, with each consumer in turn, from the same client: the Subscriber in
 * each mode (held transaction, take, lease; several concurrencies), with a no-op handler and with a handler that
 * inserts a row per message, the repository's claim+ack loop, and over plain JDBC the statements of the held
 * transaction and of the lease, the production consumer's SQL, the floor statement and the leading peer's statement
 * shape on a table of its shape ({@link PgmqShape}). Reports messages/s, statements per message and the ratio to the
 * floor.
 */
final class DrainScenario implements Scenario {
  static final String ID = "drain";
  static final String QUEUE = "drain";
  static final int BATCH = 100;
  static final String FLOOR = "floor-sql";
  static final String PRODUCTION = "production-sql";
  static final String PGMQ_SHAPE = "pgmq-shape-sql";
  /** The held-transaction mode's statements as plain JDBC: lock a batch, delete it, commit. */
  static final String HELD_SQL = "held-sql";
  /** The lease mode's two statements as plain JDBC: the lease claim, then the receipt-checked ack. */
  static final String LEASE_SQL = "lease-sql";
  /** {@link #HELD_SQL} whose lock also reads whether each row's last locker ended without commit (the crash count). */
  static final String HELD_SQL_COUNTED = "held-sql-counted";
  /**
   * The default mode after a crash: the lowest {@code (concurrency + 1) * BATCH} messages, what a killed subscriber of
   * that concurrency held, were locked by a transaction that then rolled back. Their deliveries are counted on a
   * connection of their own and they are handled one per transaction, alone; the rest drain in batches.
   */
  static final String SUBSCRIBER_AFTER_CRASH = "subscriber-tx-crashed";
  static final String REPOSITORY = "repository-loop";
  /** The Subscriber in its default mode, {@link ConsumeMode#TRANSACTION}. */
  static final String SUBSCRIBER = "subscriber-tx";
  static final String SUBSCRIBER_TAKE = "subscriber-take";
  static final String SUBSCRIBER_LEASE = "subscriber-lease";
  /**
   * The at-most-once Subscriber with {@code prefetch(BATCH)}: room for one whole claim in flight, so claims never
   * overlap; compared in one run with {@link #SUBSCRIBER_TAKE} (two claims in flight, the default), it shows what
   * overlapping claims cost and give.
   */
  static final String SUBSCRIBER_ONE_CLAIM = "subscriber-take-1claim";
  /** The default mode, the handler inserting one row per message into a table of its own in the held transaction. */
  static final String SUBSCRIBER_INSERT = "subscriber-tx-insert";
  /** Lease mode, the handler inserting one row per message in a transaction of its own, then the ack. */
  static final String SUBSCRIBER_LEASE_INSERT = "subscriber-lease-insert";
  /** The table the insert cells' handlers write: one row per handled message. */
  static final String HANDLED_TABLE = "benchHandled";
  static final Duration LEASE = Duration.ofSeconds(30);

  /** One cell: a consumer and its concurrency (threads for the loops, handler concurrency for the Subscriber). */
  record Cell(String consumer, int concurrency) { }

  static final List<Cell> CELLS = List.of(
      new Cell(FLOOR, 1), new Cell(FLOOR, 4),
      new Cell(PRODUCTION, 1), new Cell(PRODUCTION, 4),
      new Cell(PGMQ_SHAPE, 1), new Cell(PGMQ_SHAPE, 4),
      new Cell(HELD_SQL, 1), new Cell(HELD_SQL, 4),
      new Cell(HELD_SQL_COUNTED, 1), new Cell(HELD_SQL_COUNTED, 4),
      new Cell(LEASE_SQL, 1), new Cell(LEASE_SQL, 4),
      new Cell(REPOSITORY, 1), new Cell(REPOSITORY, 4),
      new Cell(SUBSCRIBER, 1), new Cell(SUBSCRIBER, 4), new Cell(SUBSCRIBER, 16),
      new Cell(SUBSCRIBER_AFTER_CRASH, 4),
      new Cell(SUBSCRIBER_TAKE, 1), new Cell(SUBSCRIBER_TAKE, 4), new Cell(SUBSCRIBER_TAKE, 16),
      new Cell(SUBSCRIBER_LEASE, 1), new Cell(SUBSCRIBER_LEASE, 4), new Cell(SUBSCRIBER_LEASE, 16),
      new Cell(SUBSCRIBER_ONE_CLAIM, 4),
      new Cell(SUBSCRIBER_INSERT, 1), new Cell(SUBSCRIBER_INSERT, 4),
      new Cell(SUBSCRIBER_LEASE_INSERT, 1), new Cell(SUBSCRIBER_LEASE_INSERT, 4));

  /**
   * The cells of the default run: what the consumption targets compare (each mode of the Subscriber against the plain
   * SQL of its statements and against the leading peer's shape, at one and four), in about five minutes;
   * {@code --drain-cells all} runs {@link #CELLS}.
   */
  static final List<Cell> DEFAULT_CELLS = List.of(
      new Cell(FLOOR, 1),
      new Cell(PGMQ_SHAPE, 1), new Cell(PGMQ_SHAPE, 4),
      new Cell(HELD_SQL, 1), new Cell(HELD_SQL, 4),
      new Cell(LEASE_SQL, 1), new Cell(LEASE_SQL, 4),
      new Cell(SUBSCRIBER, 1), new Cell(SUBSCRIBER, 4),
      new Cell(SUBSCRIBER_TAKE, 1), new Cell(SUBSCRIBER_TAKE, 4),
      new Cell(SUBSCRIBER_LEASE, 1), new Cell(SUBSCRIBER_LEASE, 4),
      new Cell(SUBSCRIBER_INSERT, 4), new Cell(SUBSCRIBER_LEASE_INSERT, 4));
  /** The {@code --drain-cells} value that runs every cell. */
  static final String ALL_CELLS = "all";

  // The two statements below are the reference points, run as plain SQL on purpose: they are what other consumers
  // of these tables run today (the production consumer) and the cheapest statement that drains a queue (the floor).
  static final String FLOOR_SQL = "DELETE FROM \"MessageQueueItem\" WHERE id IN (SELECT id FROM \"MessageQueueItem\""
      + " WHERE \"queueId\" = ? ORDER BY id LIMIT " + BATCH + " FOR UPDATE SKIP LOCKED) RETURNING payload";
  static final String PRODUCTION_CLAIM_SQL = "WITH messages AS (SELECT id FROM \"MessageQueueItem\""
      + " WHERE \"queueId\" = ? AND status = 'PENDING' AND \"readAfter\" <= timezone('UTC', now())"
      + " AND \"expiresAt\" > timezone('UTC', now()) ORDER BY id LIMIT " + BATCH + " FOR UPDATE SKIP LOCKED)"
      + " UPDATE \"MessageQueueItem\" m SET status = 'ASSIGNED' FROM messages WHERE m.id = messages.id"
      + " RETURNING m.id, m.payload";
  static final String PRODUCTION_ACK_SQL =
      "DELETE FROM \"MessageQueueItem\" WHERE id = ANY(?) AND status = 'ASSIGNED'";
  private static final String UTC_NOW = "date_trunc('milliseconds', timezone('UTC', now()))";
  /** The held-transaction mode's lock, as {@code docs/statements.sql} has it, without the timeouts and crash count. */
  static final String HELD_LOCK_SQL = "SELECT id, payload, (extract(epoch FROM \"expiresAt\") * 1000)::bigint"
      + " FROM \"MessageQueueItem\" WHERE \"queueId\" = ? AND status = 'PENDING' AND \"readAfter\" <= " + UTC_NOW
      + " AND \"expiresAt\" > " + UTC_NOW + " ORDER BY id LIMIT " + BATCH + " FOR UPDATE SKIP LOCKED";
  static final String HELD_DELETE_SQL = "DELETE FROM \"MessageQueueItem\" WHERE id = ANY(?)";
  /** {@link #HELD_LOCK_SQL} with the crash count's column: whether the row's last locker ended without commit. */
  static final String HELD_LOCK_COUNTED_SQL = HELD_LOCK_SQL.replace(" FROM \"MessageQueueItem\"",
      ", CASE WHEN xmax::text <> '0' AND ((n & 4294967295) - xmax::text::bigint + 4294967296) % 4294967296"
      + " BETWEEN 1 AND 2147483647 THEN pg_xact_status((n - ((n & 4294967295) - xmax::text::bigint + 4294967296)"
      + " % 4294967296)::text::xid8) = 'aborted' ELSE false END FROM \"MessageQueueItem\","
      + " (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS n) snapshot");
  /** The lease claim and the receipt-checked ack, as {@code docs/statements.sql} has them. */
  static final String LEASE_CLAIM_SQL = "UPDATE \"MessageQueueItem\" SET status = 'ASSIGNED', \"readAfter\" = "
      + UTC_NOW + " + interval '30 seconds' FROM (SELECT array_agg(id) AS ids, array_agg(id) FILTER"
      + " (WHERE status = 'ASSIGNED') AS redelivered FROM (SELECT id, status FROM \"MessageQueueItem\""
      + " WHERE \"queueId\" = ? AND \"readAfter\" <= " + UTC_NOW + " AND \"expiresAt\" > " + UTC_NOW
      + " ORDER BY id LIMIT " + BATCH + " FOR UPDATE SKIP LOCKED) locked) claimed WHERE id = ANY(claimed.ids)"
      + " RETURNING id, payload, (extract(epoch FROM \"readAfter\") * 1000)::bigint, id = ANY(claimed.redelivered)";
  static final String LEASE_ACK_SQL = "DELETE FROM \"MessageQueueItem\" USING (SELECT z.id, timestamp '1970-01-01'"
      + " + interval '1 millisecond' * z.millis AS deadline FROM unnest(?::bigint[], ?::bigint[]) AS z (id, millis))"
      + " r WHERE \"MessageQueueItem\".id = r.id AND \"readAfter\" = r.deadline AND status = 'ASSIGNED'";

  private static final ThreadMXBean CPU = ManagementFactory.getThreadMXBean();
  private static final CompilationMXBean JIT = ManagementFactory.getCompilationMXBean();

  /**
   * A warm-up drain counts as quiet when the JIT compiled for at most this share of its wall time. On two cores a
   * compiler thread takes the CPU the server's backends need.
   */
  // A library cell measured after one warm-up drain still had C2 compiling jOOQ's rendering and mapping code for
  // 0.5-0.7 of a core throughout (perf, 2026-12-04).
  static final double QUIET_JIT_SHARE = 0.02;
  /** At most this many warm-up drains per cell; the measured drain reports the JIT time it still saw. */
  static final int MAX_WARMUP_DRAINS = 8;

  private final int messages;
  private final int warmupMessages;
  private final Duration timeout;
  private final List<Cell> cells;

  DrainScenario(int messages) {
    this(messages, List.of());
  }

  /**
   * @param selected the cells to run, as {@code consumer:concurrency}; empty for {@link #DEFAULT_CELLS},
   *     {@value #ALL_CELLS} alone for all of {@link #CELLS}
   */
  DrainScenario(int messages, List<String> selected) {
    this.messages = messages;
    this.cells = selected.isEmpty() ? DEFAULT_CELLS : selected.equals(List.of(ALL_CELLS)) ? CELLS : CELLS.stream()
        .filter(cell -> selected.contains(cell.consumer() + ":" + cell.concurrency())).toList();
    if (cells.isEmpty()) {
      throw new IllegalArgumentException("no drain cell matches " + selected);
    }
    // As many as measured: a claim+ack pair per 100 messages, and the JIT compiles a statement's code only after
    // hundreds of runs.
    this.warmupMessages = messages;
    this.timeout = Duration.ofSeconds(Math.max(60, messages / 200));
  }

  @Override
  public String id() {
    return ID;
  }

  @Override
  public String title() {
    return "5. Drain: " + messages + " preloaded messages, batch " + BATCH + ", no-op handler, each cell after"
        + " unmeasured drains of its own until the JIT is quiet";
  }

  @Override
  public int steps() {
    return cells.size();
  }

  @Override
  public Duration estimate() {
    // About 0.04 ms per message preloaded and drained and three warm-up drains per cell until the JIT is quiet: the
    // default run of 2026-12-07 on PostgreSQL 15 drained 52 times 100,000 messages in 255 s on a 2-core machine shared
    // with other builds (load average 5-15).
    return Duration.ofMillis(cells.size() * (1_000 + (messages + 3L * warmupMessages) / 25L));
  }

  @Override
  public Result run(BenchContext context) throws Exception {
    BenchDatabase database = context.database();
    PgmqShape.create(database.control());
    // Every consumer is measured warm, as it runs in a service: each cell first drains unmeasured until the JIT is
    // quiet, so no cell pays for compiling code, its own or code the cells before it did not run.
    List<Row> rows = new ArrayList<>();
    for (Cell cell : cells) {
      context.step(String.format(Locale.ROOT, "drain: %s x%d, %d messages", cell.consumer(), cell.concurrency(),
          messages));
      int warmupDrains = warmUntilJitQuiet(database, cell, warmupMessages);
      preload(database, cell, messages);
      rows.add(drain(database, cell, messages).withWarmupDrains(warmupDrains));
    }
    double floor = rows.stream().filter(r -> r.consumer().equals(FLOOR))
        .mapToDouble(Row::messagesPerSecond).max().orElse(Double.NaN);
    List<Row> withRatios = new ArrayList<>();
    for (Row r : rows) {
      withRatios.add(r.withRatio(r.messagesPerSecond() / floor));
    }
    return new DrainResult(messages, BATCH, withRatios);
  }

  /** Milliseconds the JIT has spent compiling in this JVM so far, over all its compiler threads. */
  static long jitMillis() {
    return JIT.getTotalCompilationTime();
  }

  /**
   * Drains {@code cell} unmeasured, again and again, until one drain saw the JIT compile for at most
   * {@link #QUIET_JIT_SHARE} of its time, or {@link #MAX_WARMUP_DRAINS} drains ran. @return the drains run
   */
  int warmUntilJitQuiet(BenchDatabase database, Cell cell, int messages) throws Exception {
    for (int drains = 1; ; drains++) {
      preload(database, cell, messages);
      Row warm = drain(database, cell, messages);
      if (warm.jitMillis() <= QUIET_JIT_SHARE * warm.seconds() * 1_000 || drains == MAX_WARMUP_DRAINS) {
        return drains;
      }
    }
  }

  /** Resets the database and preloads {@code messages} into the table {@code cell} drains. */
  static void preload(BenchDatabase database, Cell cell, int messages) {
    database.reset();
    if (cell.consumer().equals(PGMQ_SHAPE)) {
      PgmqShape.preload(database.control(), messages);
    } else {
      preload(database.control(), messages);
    }
    if (cell.consumer().equals(SUBSCRIBER_AFTER_CRASH)) {
      // The rows a killed subscriber held, locked by a transaction that then rolls back: their xmax names an aborted
      // transaction, as a crash's.
      try {
        database.control().transaction(tx -> {
          tx.dsl().select(MESSAGE_QUEUE_ITEM.ID).from(MESSAGE_QUEUE_ITEM).orderBy(MESSAGE_QUEUE_ITEM.ID)
              .limit((cell.concurrency() + 1) * BATCH).forUpdate().fetch();
          throw new RolledBack();
        });
      } catch (RolledBack expected) {
        // rolled back, as it should
      }
    }
  }

  private static void preload(DSLContext control, int messages) {
    MsgQueueRepository.create(control, MsgQueueConfig.defaults()).bindQueue(QueueSpec.durable(QUEUE));
    // The insert cells' table, emptied with the queue: DDL, which jOOQ's typed API does not cover for an ad-hoc table.
    control.execute("CREATE TABLE IF NOT EXISTS \"" + HANDLED_TABLE + "\" (id bigint NOT NULL)");
    control.execute("TRUNCATE \"" + HANDLED_TABLE + "\"");
    var series = DSL.generateSeries(1, messages).as("n");
    control.insertInto(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.PAYLOAD, MESSAGE_QUEUE_ITEM.READ_AFTER,
            MESSAGE_QUEUE_ITEM.EXPIRES_AT, MESSAGE_QUEUE_ITEM.QUEUE_ID)
        .select(DSL.select(DSL.val(BenchContext.PAYLOAD), BenchSql.utcNowMinus(Duration.ofSeconds(1)),
            BenchSql.utcNowPlus(Duration.ofDays(1)), DSL.val(QUEUE)).from(series))
        .execute();
    control.execute("VACUUM ANALYZE \"MessageQueueItem\""); // plain SQL: jOOQ has no VACUUM
  }

  /** Drains the preloaded table with {@code cell}'s consumer, on a pool of its own. */
  Row drain(BenchDatabase database, Cell cell, int messages) throws Exception {
    return drain(database, cell, messages, List.of());
  }

  /**
   * {@link #drain(BenchDatabase, Cell, int)}, with {@code observers}: backends of this database that watch the drain
   * (a plan sampler, say) and whose CPU time is not the drain's.
   */
  Row drain(BenchDatabase database, Cell cell, int messages, List<Integer> observers) throws Exception {
    HikariConfig poolConfig = new HikariConfig();
    poolConfig.setJdbcUrl(database.url());
    // The held-transaction mode holds a connection per running handler and one batch locked ahead, and needs one spare.
    poolConfig.setMaximumPoolSize(cell.concurrency() + 3);
    poolConfig.setPoolName("drain");
    try (HikariDataSource pool = new HikariDataSource(poolConfig)) {
      AtomicLong statements = new AtomicLong();
      AtomicLong consumed = new AtomicLong();
      AtomicLong clientCpuNanos = new AtomicLong();
      long jitBefore = jitMillis();
      long started = System.nanoTime();
      boolean drained = switch (cell.consumer()) {
        case FLOOR, PRODUCTION, PGMQ_SHAPE, HELD_SQL, HELD_SQL_COUNTED, LEASE_SQL, REPOSITORY ->
            loops(pool, cell, statements, consumed, clientCpuNanos);
        default -> subscriber(pool, cell, messages, statements, consumed, clientCpuNanos);
      };
      double seconds = (System.nanoTime() - started) / 1e9;
      long jit = jitMillis() - jitBefore;
      // The pool's backends started with it, so their CPU time so far is the cell's (connection setup included).
      List<Integer> backends = new ArrayList<>(BenchSql.otherBackends(database.control()));
      backends.removeAll(observers);
      long serverCpuNanos = BenchSql.backendCpuNanos(backends);
      long left = cell.consumer().equals(PGMQ_SHAPE) ? PgmqShape.rowsLeft(database.control())
          : database.control().fetchCount(MESSAGE_QUEUE_ITEM);
      double cpuMicrosPerMessage = clientCpuNanos.get() / 1e3 / Math.max(1, consumed.get());
      double serverCpuMicrosPerMessage = serverCpuNanos < 0 ? Double.NaN
          : serverCpuNanos / 1e3 / Math.max(1, consumed.get());
      return new Row(cell.consumer(), cell.concurrency(), consumed.get(), seconds, consumed.get() / seconds,
          (double) statements.get() / Math.max(1, consumed.get()), cpuMicrosPerMessage, serverCpuMicrosPerMessage,
          Double.NaN, left, drained, jit, 0);
    }
  }

  /**
   * Runs {@code cell}'s loop on its threads; {@code clientCpuNanos} gets the CPU time those threads
   * spent, the JDBC driver and jOOQ included: the client's share of each message, which a noisy shared machine does
   * not distort the way it distorts the rate.
   */
  private boolean loops(HikariDataSource pool, Cell cell, AtomicLong statements, AtomicLong consumed,
      AtomicLong clientCpuNanos) throws Exception {
    MsgQueueRepository repository = MsgQueueRepository.create(pool, MsgQueueConfig.defaults());
    ExecutorService threads = Executors.newFixedThreadPool(cell.concurrency());
    try {
      List<Future<?>> running = new ArrayList<>();
      for (int i = 0; i < cell.concurrency(); i++) {
        running.add(threads.submit(() -> {
          long cpuStart = CPU.getCurrentThreadCpuTime();
          switch (cell.consumer()) {
            case FLOOR -> floorLoop(pool, statements, consumed);
            case PRODUCTION -> productionLoop(pool, statements, consumed);
            case PGMQ_SHAPE -> PgmqShape.drainLoop(pool, statements, consumed);
            case HELD_SQL -> heldLoop(pool, HELD_LOCK_SQL, statements, consumed);
            case HELD_SQL_COUNTED -> heldLoop(pool, HELD_LOCK_COUNTED_SQL, statements, consumed);
            case LEASE_SQL -> leaseLoop(pool, statements, consumed);
            default -> repositoryLoop(repository, statements, consumed);
          }
          clientCpuNanos.addAndGet(CPU.getCurrentThreadCpuTime() - cpuStart);
          return null;
        }));
      }
      for (Future<?> future : running) {
        future.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
      }
      return true;
    } finally {
      threads.shutdownNow();
    }
  }

  private static void floorLoop(HikariDataSource pool, AtomicLong statements, AtomicLong consumed)
      throws SQLException {
    try (Connection connection = pool.getConnection();
         PreparedStatement delete = connection.prepareStatement(FLOOR_SQL)) {
      delete.setString(1, QUEUE);
      while (true) {
        int got = 0;
        statements.incrementAndGet();
        try (ResultSet rows = delete.executeQuery()) {
          while (rows.next()) {
            rows.getString(1);
            got++;
          }
        }
        if (got == 0) {
          return;
        }
        consumed.addAndGet(got);
      }
    }
  }

  private static void productionLoop(HikariDataSource pool, AtomicLong statements, AtomicLong consumed)
      throws SQLException {
    readThenDeleteLoop(pool, PRODUCTION_CLAIM_SQL, 2, PRODUCTION_ACK_SQL, statements, consumed, QUEUE);
  }

  /**
   * Runs a consumer of two statements on one connection until its read finds nothing: {@code readSql} (with
   * {@code readParameters}) returns a batch's ids in column 1 and payloads in {@code payloadColumn}, then
   * {@code deleteSql} takes the ids as one {@code bigint} array.
   */
  static void readThenDeleteLoop(DataSource pool, String readSql, int payloadColumn, String deleteSql,
      AtomicLong statements, AtomicLong consumed, String... readParameters) throws SQLException {
    try (Connection connection = pool.getConnection();
         PreparedStatement read = connection.prepareStatement(readSql);
         PreparedStatement delete = connection.prepareStatement(deleteSql)) {
      for (int i = 0; i < readParameters.length; i++) {
        read.setString(i + 1, readParameters[i]);
      }
      while (true) {
        List<Long> ids = new ArrayList<>(BATCH);
        statements.incrementAndGet();
        try (ResultSet rows = read.executeQuery()) {
          while (rows.next()) {
            ids.add(rows.getLong(1));
            rows.getString(payloadColumn);
          }
        }
        if (ids.isEmpty()) {
          return;
        }
        delete.setArray(1, connection.createArrayOf("bigint", ids.toArray()));
        statements.incrementAndGet();
        delete.executeUpdate();
        consumed.addAndGet(ids.size());
      }
    }
  }

  /** The held-transaction mode's statements: lock a batch, delete it, commit; until a lock finds nothing. */
  private static void heldLoop(HikariDataSource pool, String lockSql, AtomicLong statements, AtomicLong consumed)
      throws SQLException {
    try (Connection connection = pool.getConnection();
         PreparedStatement lock = connection.prepareStatement(lockSql);
         PreparedStatement delete = connection.prepareStatement(HELD_DELETE_SQL)) {
      connection.setAutoCommit(false);
      lock.setString(1, QUEUE);
      try {
        while (true) {
          List<Long> ids = new ArrayList<>(BATCH);
          statements.incrementAndGet();
          try (ResultSet rows = lock.executeQuery()) {
            while (rows.next()) {
              ids.add(rows.getLong(1));
              rows.getString(2);
            }
          }
          if (ids.isEmpty()) {
            connection.commit();
            return;
          }
          delete.setArray(1, connection.createArrayOf("bigint", ids.toArray()));
          statements.incrementAndGet();
          delete.executeUpdate();
          statements.incrementAndGet();
          connection.commit();
          consumed.addAndGet(ids.size());
        }
      } finally {
        connection.setAutoCommit(true);
      }
    }
  }

  /** The lease mode's statements: the lease claim, then the ack of its receipts; until a claim finds nothing. */
  private static void leaseLoop(HikariDataSource pool, AtomicLong statements, AtomicLong consumed)
      throws SQLException {
    try (Connection connection = pool.getConnection();
         PreparedStatement claim = connection.prepareStatement(LEASE_CLAIM_SQL);
         PreparedStatement ack = connection.prepareStatement(LEASE_ACK_SQL)) {
      claim.setString(1, QUEUE);
      while (true) {
        List<Long> ids = new ArrayList<>(BATCH);
        List<Long> deadlines = new ArrayList<>(BATCH);
        statements.incrementAndGet();
        try (ResultSet rows = claim.executeQuery()) {
          while (rows.next()) {
            ids.add(rows.getLong(1));
            rows.getString(2);
            deadlines.add(rows.getLong(3));
            rows.getBoolean(4);
          }
        }
        if (ids.isEmpty()) {
          return;
        }
        ack.setArray(1, connection.createArrayOf("bigint", ids.toArray()));
        ack.setArray(2, connection.createArrayOf("bigint", deadlines.toArray()));
        statements.incrementAndGet();
        consumed.addAndGet(ack.executeUpdate());
      }
    }
  }

  private static void repositoryLoop(MsgQueueRepository repository, AtomicLong statements, AtomicLong consumed) {
    while (true) {
      statements.incrementAndGet();
      List<ClaimedMessage> claimed = repository.claim(QUEUE, BATCH);
      if (claimed.isEmpty()) {
        return;
      }
      for (ClaimedMessage message : claimed) {
        message.payload();
      }
      statements.incrementAndGet();
      consumed.addAndGet(repository.ack(claimed).size());
    }
  }

  /**
   * Runs {@code cell}'s Subscriber until it handled {@code messages}; {@code clientCpuNanos} gets the CPU time of the
   * library's threads (named {@code msgqueue-}) over the drain, read before the Subscriber closes and stops them: its
   * claims, handlers and acks, jOOQ and pgjdbc included, as the loops' figure is theirs.
   */
  private boolean subscriber(HikariDataSource pool, Cell cell, int messages, AtomicLong statements,
      AtomicLong consumed, AtomicLong clientCpuNanos) throws InterruptedException {
    DSLContext counted = DSL.using(new DefaultConfiguration().set(pool).set(SQLDialect.POSTGRES)
        .set(new CountingListener(statements)));
    MsgQueueRepository repository = MsgQueueRepository.create(counted, MsgQueueConfig.defaults());
    QueueSpec queue = QueueSpec.durable(QUEUE);
    Subscriber.Builder builder = switch (cell.consumer()) {
      case SUBSCRIBER_INSERT -> Subscriber.builder(repository, queue, (message, transaction) -> {
        // The handler's own write, in the transaction that holds its message.
        transaction.insertInto(DSL.table(DSL.name(HANDLED_TABLE)), DSL.field(DSL.name("id"), Long.class))
            .values(message.id()).execute();
        consumed.incrementAndGet();
      });
      case SUBSCRIBER_LEASE_INSERT -> Subscriber.builder(repository, queue, message -> {
        // The handler's own write, in a transaction of its own (autocommit), before the message's ack.
        counted.insertInto(DSL.table(DSL.name(HANDLED_TABLE)), DSL.field(DSL.name("id"), Long.class))
            .values(message.id()).execute();
        consumed.incrementAndGet();
      });
      default -> Subscriber.builder(repository, queue, message -> {
        message.payload();
        consumed.incrementAndGet();
      });
    };
    builder.concurrency(cell.concurrency()).batchSize(BATCH);
    switch (cell.consumer()) {
      case SUBSCRIBER_LEASE, SUBSCRIBER_LEASE_INSERT -> builder.mode(ConsumeMode.LEASE).lease(LEASE);
      case SUBSCRIBER_TAKE -> builder.mode(ConsumeMode.AT_MOST_ONCE);
      case SUBSCRIBER_ONE_CLAIM -> builder.mode(ConsumeMode.AT_MOST_ONCE).prefetch(BATCH);
      default -> builder.mode(ConsumeMode.TRANSACTION);
    }
    long giveUp = System.nanoTime() + timeout.toNanos();
    LibraryThreadsCpu libraryCpu = LibraryThreadsCpu.start();
    try (Subscriber subscriber = builder.start()) {
      while (consumed.get() < messages) {
        if (System.nanoTime() - giveUp > 0) {
          return false;
        }
        Thread.sleep(1);
      }
      clientCpuNanos.set(libraryCpu.nanosSinceStart());
    }
    return true;
  }

  /** Rolls the preload's locking transaction back. */
  private static final class RolledBack extends RuntimeException {
    private static final long serialVersionUID = 1L;
  }

  /** Counts the statements the library runs (claims, acks, keep-alives, the bind). */
  private static final class CountingListener implements ExecuteListener {
    private static final long serialVersionUID = 1L;
    private final transient AtomicLong statements;

    CountingListener(AtomicLong statements) {
      this.statements = statements;
    }

    @Override
    public void executeStart(ExecuteContext ctx) {
      statements.incrementAndGet();
    }
  }

  /**
   * @param clientCpuMicrosPerMessage CPU time of the consuming threads per message: the loops' threads, or the
   *     Subscriber's (the library's threads)
   * @param serverCpuMicrosPerMessage CPU time of the cell's server backends per message (NaN if the server is not
   *     on this machine)
   * @param ratioToFloor messages/s over the best floor cell's
   * @param left items still in the table after the cell (acked consumers leave none)
   * @param jitMillis milliseconds the JIT compiled while the cell drained (any thread of this JVM)
   * @param warmupDrains unmeasured drains of this cell right before it, until the JIT was quiet (0 where none ran)
   */
  record Row(String consumer, int concurrency, long messages, double seconds, double messagesPerSecond,
      double statementsPerMessage, double clientCpuMicrosPerMessage, double serverCpuMicrosPerMessage,
      double ratioToFloor, long left, boolean drained, long jitMillis, int warmupDrains) {
    Row withRatio(double ratio) {
      return new Row(consumer, concurrency, messages, seconds, messagesPerSecond, statementsPerMessage,
          clientCpuMicrosPerMessage, serverCpuMicrosPerMessage, ratio, left, drained, jitMillis, warmupDrains);
    }

    Row withWarmupDrains(int drains) {
      return new Row(consumer, concurrency, messages, seconds, messagesPerSecond, statementsPerMessage,
          clientCpuMicrosPerMessage, serverCpuMicrosPerMessage, ratioToFloor, left, drained, jitMillis, drains);
    }
  }

  /** A CPU figure for a table: {@code -} where not measured. */
  static String micros(double micros) {
    return Double.isNaN(micros) ? "-" : String.format(Locale.ROOT, "%.2f", micros);
  }

  /** A CPU figure for a CSV cell: empty where not measured. */
  static String csvMicros(double micros) {
    return Double.isNaN(micros) ? "" : String.format(Locale.ROOT, "%.3f", micros);
  }

  record DrainResult(int preloaded, int batch, List<Row> rows) implements Result {
    Row row(String consumer, int concurrency) {
      return rows.stream().filter(r -> r.consumer().equals(consumer) && r.concurrency() == concurrency)
          .findFirst().orElse(null);
    }

    @Override
    public void printTable(PrintStream out) {
      String header = String.format(Locale.ROOT, "%-24s %5s %9s %8s %10s %9s %8s %8s %6s %6s %6s %6s",
          "consumer", "conc", "messages", "seconds", "msg/s", "stmt/msg", "client", "server", "xfloor", "left",
          "jit", "warm");
      out.println(header);
      out.println("-".repeat(header.length()));
      for (Row r : rows) {
        out.printf(Locale.ROOT, "%-24s %5d %9d %8.2f %10.0f %9.4f %8s %8s %6s %6d %6d %6d%s%n", r.consumer(),
            r.concurrency(), r.messages(), r.seconds(), r.messagesPerSecond(), r.statementsPerMessage(),
            micros(r.clientCpuMicrosPerMessage()), micros(r.serverCpuMicrosPerMessage()), ratio(r.ratioToFloor()),
            r.left(),
            r.jitMillis(), r.warmupDrains(), r.drained() ? "" : "  (timed out)");
      }
      out.println("client / server: CPU microseconds per message of the consuming threads (the loops' threads, or"
          + " the Subscriber's: jOOQ, pgjdbc, mapping) and of the cell's server backends (- : the server is not on"
          + " this machine). jit: milliseconds the JVM's JIT compiled during the cell; warm: unmeasured drains of the"
          + " cell before it, until the JIT compiled for at most " + Math.round(QUIET_JIT_SHARE * 100)
          + "% of a drain's time. xfloor: msg/s over the best floor-sql cell's (- : no floor cell in this run).");
    }

    private static String ratio(double ratio) {
      return Double.isNaN(ratio) ? "-" : String.format(Locale.ROOT, "%.2f", ratio);
    }

    @Override
    public void writeCsv(Path file) throws IOException {
      List<String> lines = new ArrayList<>();
      lines.add("consumer,concurrency,messages,seconds,messages_per_second,statements_per_message,"
          + "client_cpu_us_per_message,server_cpu_us_per_message,ratio_to_floor,left,drained,jit_ms,warmup_drains");
      for (Row r : rows) {
        lines.add(String.format(Locale.ROOT, "%s,%d,%d,%.3f,%.1f,%.5f,%s,%s,%.4f,%d,%b,%d,%d", r.consumer(),
            r.concurrency(), r.messages(), r.seconds(), r.messagesPerSecond(), r.statementsPerMessage(),
            csvMicros(r.clientCpuMicrosPerMessage()), csvMicros(r.serverCpuMicrosPerMessage()), r.ratioToFloor(),
            r.left(), r.drained(), r.jitMillis(), r.warmupDrains()));
      }
      Files.write(file, lines);
    }
  }
}
