package dev.msgqueue.it;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A PostgreSQL server a test owns and may restart: a fresh data directory under {@code target/}, the machine's
 * PostgreSQL binaries ({@code /usr/lib/postgresql/<version>/bin}, the newest), run with {@code pg_ctl} (as the
 * {@code postgres} user when the test runs as root), on an OS-picked port of 127.0.0.1. Never the machine's shared
 * server. {@link #close()} stops it and deletes the data directory.
 */
public final class RestartablePostgres implements AutoCloseable {
  /** How {@link #restart} stops the server: {@code pg_ctl stop -m fast} or {@code -m immediate} (crash recovery). */
  public enum Shutdown { FAST, IMMEDIATE }

  private final Path bin;
  private final Path data;
  private final int port;
  private final boolean asPostgresUser;

  private RestartablePostgres(Path bin, Path data, int port, boolean asPostgresUser) {
    this.bin = bin;
    this.data = data;
    this.port = port;
    this.asPostgresUser = asPostgresUser;
  }

  /** Creates a cluster (initdb) and starts it, with {@code settings} (postgresql.conf lines) added. */
  public static RestartablePostgres start(String... settings) {
    Path bin = binaries();
    boolean root = "root".equals(System.getProperty("user.name"));
    try {
      Path data = Path.of("target", "restartable-pg-" + UUID.randomUUID().toString().substring(0, 8))
          .toAbsolutePath();
      Files.createDirectories(data);
      int port;
      try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
        port = socket.getLocalPort();
      }
      RestartablePostgres server = new RestartablePostgres(bin, data, port, root);
      if (root) {
        run(List.of("chown", "postgres:postgres", data.toString()), 30);
      }
      server.pgRun(120, "initdb", "-D", data.toString(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync");
      Files.writeString(data.resolve("postgresql.conf"), String.join("\n", "",
          "port = " + port,
          "listen_addresses = '127.0.0.1'",
          "unix_socket_directories = '" + data + "'",
          "max_connections = 100",
          "fsync = on",
          "synchronous_commit = on",
          String.join("\n", settings),
          ""), StandardCharsets.UTF_8, java.nio.file.StandardOpenOption.APPEND);
      server.startServer();
      return server;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The server as a {@link PostgresServer}, for {@link TestDatabase#createMigrated(PostgresServer, String)}. */
  public PostgresServer server() {
    return PostgresServer.existing("jdbc:postgresql://127.0.0.1:" + port + "/postgres?user=postgres");
  }

  public int port() {
    return port;
  }

  /**
   * Stops the server with {@code mode}, waits {@code downMillis}, starts it again and returns once it accepts
   * connections; every connection to it is broken.
   */
  public void restart(Shutdown mode, long downMillis) {
    pgRun(120, "pg_ctl", "-D", data.toString(), "-m", mode.name().toLowerCase(Locale.ROOT), "-w", "-t", "60", "stop");
    if (downMillis > 0) {
      try {
        Thread.sleep(downMillis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    startServer();
  }

  private void startServer() {
    pgRun(120, "pg_ctl", "-D", data.toString(), "-l", data.resolve("server.log").toString(), "-w", "-t", "60",
        "start");
  }

  @Override
  public void close() {
    try {
      pgRun(120, "pg_ctl", "-D", data.toString(), "-m", "immediate", "-w", "stop");
    } catch (RuntimeException e) {
      // already stopped
    }
    try (Stream<Path> files = Files.walk(data)) {
      files.sorted(Comparator.reverseOrder()).forEach(file -> file.toFile().delete());
    } catch (IOException ignored) {
      // under target/: removed by the next clean
    }
  }

  private void pgRun(long timeoutSeconds, String program, String... args) {
    List<String> command = new ArrayList<>();
    if (asPostgresUser) {
      command.addAll(List.of("runuser", "-u", "postgres", "--"));
    }
    command.add(bin.resolve(program).toString());
    command.addAll(List.of(args));
    run(command, timeoutSeconds);
  }

  private static void run(List<String> command, long timeoutSeconds) {
    try {
      Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
      byte[] output = process.getInputStream().readAllBytes();
      if (!process.waitFor(timeoutSeconds, TimeUnit.SECONDS) || process.exitValue() != 0) {
        process.destroyForcibly();
        throw new IllegalStateException(String.join(" ", command) + " failed: "
            + new String(output, StandardCharsets.UTF_8));
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private static Path binaries() {
    Path root = Path.of("/usr/lib/postgresql");
    try (Stream<Path> versions = Files.list(root)) {
      return versions.map(version -> version.resolve("bin"))
          .filter(dir -> Files.isExecutable(dir.resolve("pg_ctl")) && Files.isExecutable(dir.resolve("initdb")))
          .max(Comparator.comparingInt(dir -> Integer.parseInt(dir.getParent().getFileName().toString()
              .replaceAll("\\D", "0"))))
          .orElseThrow(() -> new IllegalStateException("no PostgreSQL binaries under " + root));
    } catch (IOException e) {
      throw new IllegalStateException("the server-restart tests need PostgreSQL's server binaries under " + root
          + " (Debian: apt-get install postgresql)", e);
    }
  }
}
