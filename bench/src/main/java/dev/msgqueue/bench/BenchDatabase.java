package dev.msgqueue.bench;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.jooq.impl.DSL.count;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.table;

import dev.msgqueue.it.Migrations;
import dev.msgqueue.it.PostgresServer;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.Collection;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * The benchmark's own database on the {@link PostgresServer}: created fresh, migrated with the msgqueue changelog, plus
 * the foreign-key-free copy of the item table for the {@code no-fk-ceiling} strategy; dropped at the end. A database
 * of its own means the benchmark never touches a user's msgqueue tables on {@code --jdbc-url}.
 */
final class BenchDatabase implements AutoCloseable {
  /** The item table without its foreign key: what an insert costs with no parent row at all. */
  static final MessageQueueItem ITEM_WITHOUT_FK = MESSAGE_QUEUE_ITEM.rename("MessageQueueItemNoFk");

  private final PostgresServer server;
  private final String name;
  private final String url;
  private final Connection controlConnection;
  private final DSLContext control;
  private final int serverVersionNum;
  private final Map<String, String> settings;
  private final boolean keep;
  private final boolean checkpointBeforeCells;
  private final AtomicBoolean closed = new AtomicBoolean();

  private BenchDatabase(PostgresServer server, String name, boolean keep, boolean checkpointBeforeCells)
      throws SQLException {
    this.server = server;
    this.name = name;
    this.url = server.adminUrl().withDatabase(name).value();
    this.keep = keep;
    this.checkpointBeforeCells = checkpointBeforeCells;
    this.controlConnection = DriverManager.getConnection(url);
    this.control = DSL.using(controlConnection, SQLDialect.POSTGRES);
    this.serverVersionNum = BenchSql.serverVersionNum(control);
    this.settings = BenchSql.relevantSettings(control);
  }

  /**
   * Creates and migrates a new database {@code msgqueue_bench_<time>_<random>} on {@code server}.
   *
   * @param keep leave the database on the server when closed
   * @param checkpointBeforeCells issue a CHECKPOINT in every {@link #reset()} (the quick mode skips it: its figures
   *     mean nothing and each checkpoint costs a fraction of a second on a busy server)
   */
  static BenchDatabase create(PostgresServer server, boolean keep, boolean checkpointBeforeCells) throws SQLException {
    String name = "msgqueue_bench_" + LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd_HHmmss"))
        + "_" + UUID.randomUUID().toString().substring(0, 6);
    try {
      server.createDatabase(name);
    } catch (SQLException e) {
      throw new SQLException(e.getMessage() + " (the benchmark's user needs CREATEDB)", e);
    }
    BenchDatabase database = new BenchDatabase(server, name, keep, checkpointBeforeCells);
    try (Connection migration = database.connect()) {
      // A connection of its own: Liquibase turns autocommit off, and the control session must stay in autocommit.
      Migrations.update(migration);
      database.createTableWithoutForeignKey();
    } catch (SQLException | RuntimeException e) {
      database.close();
      throw e;
    }
    return database;
  }

  private void createTableWithoutForeignKey() {
    // jOOQ cannot render CREATE TABLE ... (LIKE ... INCLUDING ALL), which copies columns, types, defaults, the
    // identity and every index, but by definition never a foreign key: exactly the copy the ceiling needs.
    control.execute("CREATE TABLE " + control.render(ITEM_WITHOUT_FK) + " (LIKE "
        + control.render(MESSAGE_QUEUE_ITEM) + " INCLUDING ALL)");
    // Check the claim rather than trust it: same indexes, no foreign key.
    int indexesWithFk = indexCount(MESSAGE_QUEUE_ITEM.getName());
    int indexesWithoutFk = indexCount(ITEM_WITHOUT_FK.getName());
    int foreignKeysOfCopy = foreignKeyCount(ITEM_WITHOUT_FK.getName());
    if (indexesWithFk != indexesWithoutFk || foreignKeysOfCopy != 0 || foreignKeyCount(MESSAGE_QUEUE_ITEM.getName()) != 1) {
      throw new IllegalStateException("the no-FK copy of the item table differs from the original beyond the FK: "
          + indexesWithFk + " vs " + indexesWithoutFk + " indexes, " + foreignKeysOfCopy + " foreign keys");
    }
  }

  private int indexCount(String tableName) {
    return control.select(count()).from(table(DSL.name("pg_catalog", "pg_indexes")))
        .where(field(DSL.name("tablename"), String.class).eq(tableName))
        .and(field(DSL.name("schemaname"), String.class).eq(DSL.currentSchema()))
        .fetchOne(0, Integer.class);
  }

  private int foreignKeyCount(String tableName) {
    return control.select(count()).from(table(DSL.name("information_schema", "table_constraints")))
        .where(field(DSL.name("table_name"), String.class).eq(tableName))
        .and(field(DSL.name("table_schema"), String.class).eq(DSL.currentSchema()))
        .and(field(DSL.name("constraint_type"), String.class).eq("FOREIGN KEY"))
        .fetchOne(0, Integer.class);
  }

  /** A new connection to the benchmark database, autocommit on; the caller closes it. */
  Connection connect() throws SQLException {
    return DriverManager.getConnection(url);
  }

  /** The JDBC URL of the benchmark database, for a connection pool of a scenario's own. */
  String url() {
    return url;
  }

  /** The JDBC URL of another database on the same server, as the benchmark's user. */
  String urlOf(String database) {
    return server.adminUrl().withDatabase(database).value();
  }

  /** The long-lived session that sets cells up and reads the server's counters. */
  DSLContext control() {
    return control;
  }

  String name() {
    return name;
  }

  int serverVersionNum() {
    return serverVersionNum;
  }

  Map<String, String> settings() {
    return settings;
  }

  /**
   * Empties every table, so each cell starts from the same physical state (fresh relations: no dead tuples or index
   * bloat left by the previous cell), then checkpoints where permitted, so that full-page images in the WAL start
   * afresh in every cell rather than wherever a timed checkpoint happens to fall.
   */
  void reset() {
    // The failure rows too: item ids start again at 1, and a failure row names its item by id.
    control.truncate(MESSAGE_QUEUE_ITEM, ITEM_WITHOUT_FK, MESSAGE_QUEUE, MESSAGE_QUEUE_ITEM_FAILURE).restartIdentity()
        .execute();
    if (checkpointBeforeCells) {
      checkpoint();
    }
  }

  /**
   * A CHECKPOINT after a cell has loaded its data (as {@link #reset()} does before it), so that the checkpoint the
   * load's WAL set off is not running through the cell's measured windows.
   */
  void checkpointAfterLoad() {
    if (checkpointBeforeCells) {
      checkpoint();
    }
  }

  private void checkpoint() {
    try {
      // jOOQ has no CHECKPOINT statement.
      control.execute("CHECKPOINT");
    } catch (RuntimeException e) {
      // Needs superuser or pg_checkpoint; without it cells are only somewhat noisier in WAL bytes.
    }
  }

  /** Makes this session's table statistics visible to the counters read next (see {@link BenchSql}). */
  void flushStatistics() {
    BenchSql.flushStatistics(control, serverVersionNum);
  }

  /**
   * Waits until the given backends have exited. A backend flushes its table statistics when it exits, before it
   * leaves pg_stat_activity, so after this the counters include everything those sessions wrote.
   */
  void awaitBackendsGone(Collection<Integer> pids) throws InterruptedException {
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (!pids.isEmpty() && BenchSql.liveBackends(control, pids) > 0) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("publisher backends did not exit within 10 s: " + pids);
      }
      Thread.sleep(5);
    }
  }

  long unexpiredOrphans() {
    return new QueueRows(control).unexpiredOrphans();
  }

  long items() {
    return control.fetchCount(MESSAGE_QUEUE_ITEM);
  }

  boolean queueExists(String queueName) {
    return new QueueRows(control).exists(queueName);
  }

  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    try {
      controlConnection.close();
    } catch (SQLException e) {
      // Closing is best effort; the drop below is what matters.
    }
    if (keep) {
      return;
    }
    try {
      // Ends sessions still connected, e.g. publishers of a run interrupted by Ctrl-C.
      server.dropDatabase(name);
    } catch (SQLException | RuntimeException e) {
      System.err.println("msgqueue-bench: could not drop the benchmark database " + name + ": " + e.getMessage());
    }
  }
}
