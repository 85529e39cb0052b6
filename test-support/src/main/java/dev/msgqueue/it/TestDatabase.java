package dev.msgqueue.it;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * One freshly created database on the test {@link PostgresServer}, private to one test class, so test classes can run
 * in parallel without seeing each other's rows. Dropped when the class is done.
 */
public final class TestDatabase implements AutoCloseable {
  private final PostgresServer server;
  private final String name;
  private final String jdbcUrl;
  private final PGSimpleDataSource unpooled;
  private final HikariDataSource pool;

  private TestDatabase(PostgresServer server, String name) {
    this.server = server;
    this.name = name;
    this.jdbcUrl = server.urlFor(name).value();
    this.unpooled = new PGSimpleDataSource();
    this.unpooled.setUrl(jdbcUrl);
    HikariConfig poolConfig = new HikariConfig();
    poolConfig.setDataSource(unpooled);
    poolConfig.setPoolName(name);
    poolConfig.setMaximumPoolSize(24);
    poolConfig.setMinimumIdle(0);
    this.pool = new HikariDataSource(poolConfig);
  }

  /** Creates an empty database; {@link #migrated()} for one with the msgqueue schema. */
  public static TestDatabase createEmpty(String label) {
    return createEmpty(PostgresServer.get(), label);
  }

  /** Creates an empty database on {@code server} (one a test started itself, say). */
  public static TestDatabase createEmpty(PostgresServer server, String label) {
    String sanitized = label.replaceAll("[^A-Za-z0-9]", "").toLowerCase(Locale.ROOT);
    String name = "mq_" + sanitized.substring(0, Math.min(40, sanitized.length())) + "_"
        + UUID.randomUUID().toString().substring(0, 8);
    try {
      server.createDatabase(name);
    } catch (SQLException e) {
      throw new IllegalStateException(e.getMessage(), e);
    }
    return new TestDatabase(server, name);
  }

  /** Creates a database and applies the msgqueue changelog to it. */
  public static TestDatabase createMigrated(String label) {
    return createMigrated(PostgresServer.get(), label);
  }

  /** Creates a database on {@code server} and applies the msgqueue changelog to it. */
  public static TestDatabase createMigrated(PostgresServer server, String label) {
    TestDatabase database = createEmpty(server, label);
    try (Connection connection = database.connect()) {
      Migrations.update(connection);
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
    return database;
  }

  public String name() {
    return name;
  }

  public String jdbcUrl() {
    return jdbcUrl;
  }

  /** A connection pool over this database, as a service would use (up to 24 connections). */
  public DataSource dataSource() {
    return pool;
  }

  /**
   * A data source whose sessions start with the given server settings, e.g. {@code "-c lock_timeout=500"}: a test
   * that claims "never waits" runs the code under a lock timeout, so a wait fails it instead of passing slowly.
   */
  public DataSource dataSourceWithOptions(String serverOptions) {
    PGSimpleDataSource withOptions = new PGSimpleDataSource();
    withOptions.setUrl(jdbcUrl);
    withOptions.setOptions(serverOptions);
    return withOptions;
  }

  /** A jOOQ context that takes a connection from {@link #dataSource()} per statement or transaction. */
  public DSLContext dsl() {
    return DSL.using(pool, SQLDialect.POSTGRES);
  }

  /**
   * A connection pool of at most {@code maxSize} connections to this database, for tests whose many short statements
   * would otherwise pay a new connection each; the caller closes it.
   */
  public HikariDataSource pool(int maxSize) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(jdbcUrl);
    config.setMaximumPoolSize(maxSize);
    config.setMinimumIdle(0);
    config.setPoolName("test-" + name);
    return new HikariDataSource(config);
  }

  /**
   * Waits until some backend of this database waits for a lock (as {@code pg_stat_activity} shows it), for tests that
   * hold a lock and need the statement they started on another thread to be blocked on it before they go on.
   */
  public void awaitSomeBackendWaitingOnLock() throws InterruptedException {
    Table<?> activity = DSL.table(DSL.name("pg_catalog", "pg_stat_activity"));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (System.nanoTime() < deadline) {
      if (dsl().fetchCount(activity, DSL.field(DSL.name("datname")).eq(name)
          .and(DSL.field(DSL.name("wait_event_type")).eq("Lock"))) > 0) {
        return;
      }
      Thread.sleep(10);
    }
    throw new AssertionError("no backend of " + name + " ever waited on a lock");
  }

  /** A new, unpooled connection (autocommit on); the caller closes it. */
  public Connection connect() throws SQLException {
    return unpooled.getConnection();
  }

  @Override
  public void close() {
    pool.close();
    try {
      server.dropDatabase(name);
    } catch (SQLException e) {
      throw new IllegalStateException("could not drop test database " + name, e);
    }
  }
}
