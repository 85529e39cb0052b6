package dev.msgqueue.bench;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;

/**
 * The PostgreSQL server the benchmark runs on: the one named by {@code --jdbc-url}, or an embedded PostgreSQL 17 that
 * this process starts (binaries from the io.zonky.test.postgres Maven Central artifact) and stops.
 */
final class BenchServer implements AutoCloseable {
  /** Enough for 64 publishers, the lock sampler, the control connection and a reaper, with room to spare. */
  static final int EMBEDDED_MAX_CONNECTIONS = 300;

  private final String description;
  private final JdbcUrl adminUrl;
  private final AutoCloseable owned;

  private BenchServer(String description, JdbcUrl adminUrl, AutoCloseable owned) {
    this.description = description;
    this.adminUrl = adminUrl;
    this.owned = owned;
  }

  /** Thrown when the embedded server cannot start here; its message is one line for the user. */
  static final class EmbeddedUnavailableException extends Exception {
    private static final long serialVersionUID = 1L;

    EmbeddedUnavailableException(String message, Throwable cause) {
      super(message, cause);
    }
  }

  static BenchServer existing(String jdbcUrl) {
    JdbcUrl url = JdbcUrl.parse(jdbcUrl);
    return new BenchServer("the server at " + url.redacted(), url, () -> { });
  }

  static BenchServer embedded(Path workingDirectory) throws EmbeddedUnavailableException {
    // zonky extracts the PostgreSQL binaries under ot.epg.working-dir (default: the shared temp folder).
    if (System.getProperty("ot.epg.working-dir") == null && workingDirectory != null) {
      System.setProperty("ot.epg.working-dir", workingDirectory.toString());
    }
    try {
      EmbeddedPostgres embedded = EmbeddedPostgres.builder()
          .setServerConfig("max_connections", Integer.toString(EMBEDDED_MAX_CONNECTIONS))
          // A start that hangs would hang the benchmark: give up after this and say so.
          .setPGStartupWait(Duration.ofSeconds(60))
          .start();
      JdbcUrl url = JdbcUrl.parse(embedded.getJdbcUrl("postgres", "postgres"));
      return new BenchServer("an embedded PostgreSQL on port " + embedded.getPort() + " (started by the benchmark)",
          url, embedded::close);
    } catch (IOException | RuntimeException | LinkageError e) {
      throw new EmbeddedUnavailableException(rootMessage(e), e);
    }
  }

  String description() {
    return description;
  }

  /** The URL the user gave (or the embedded server's maintenance database), for CREATE/DROP DATABASE. */
  JdbcUrl adminUrl() {
    return adminUrl;
  }

  @Override
  public void close() throws Exception {
    owned.close();
  }

  private static String rootMessage(Throwable e) {
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    String message = root.getMessage() == null ? root.getClass().getSimpleName() : root.getMessage();
    return message.replaceAll("\\s+", " ").strip();
  }

  /** A PostgreSQL JDBC URL split into the parts the benchmark rewrites (the database). */
  record JdbcUrl(String hostAndPort, String database, String query) {
    static JdbcUrl parse(String jdbcUrl) {
      if (!jdbcUrl.startsWith("jdbc:postgresql://")) {
        throw new IllegalArgumentException("not a jdbc:postgresql:// URL: " + jdbcUrl);
      }
      URI uri = URI.create(jdbcUrl.substring("jdbc:".length()));
      String path = uri.getRawPath() == null || uri.getRawPath().length() <= 1
          ? "postgres" : uri.getRawPath().substring(1);
      return new JdbcUrl(uri.getRawAuthority(), path, uri.getRawQuery() == null ? "" : uri.getRawQuery());
    }

    JdbcUrl withDatabase(String name) {
      return new JdbcUrl(hostAndPort, name, query);
    }

    String value() {
      return "jdbc:postgresql://" + hostAndPort + "/" + database + (query.isEmpty() ? "" : "?" + query);
    }

    String redacted() {
      return value().replaceAll("(?i)(password=)[^&]*", "$1***");
    }
  }
}
