package dev.msgqueue.it;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A PgBouncer process owned by one test, in transaction pooling mode, in front of the test {@link PostgresServer}:
 * configuration and log in a temporary directory, an OS-picked port on 127.0.0.1, stopped by {@link #close()}.
 * PgBouncer comes from the machine's packages ({@code .ci/run} installs it); if it is missing the test fails.
 */
public final class PgBouncer implements AutoCloseable {
  private static final List<String> BINARIES = List.of("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer",
      "/usr/local/bin/pgbouncer");

  private final Process process;
  private final Path directory;
  private final int port;
  private final String user;
  private final String password;

  private PgBouncer(Process process, Path directory, int port, String user, String password) {
    this.process = process;
    this.directory = directory;
    this.port = port;
    this.user = user;
    this.password = password;
  }

  /**
   * Starts PgBouncer in transaction pooling mode with two pooled databases for {@code db}: {@code db.name()} with up
   * to {@code poolSize} server connections, and {@code db.name() + "_single"} with exactly one, so that every client
   * of it shares one server connection and sees any session state another client left behind.
   */
  public static PgBouncer inFrontOf(TestDatabase db, int poolSize) {
    PostgresServer.JdbcUrl backend = PostgresServer.JdbcUrl.parse(db.jdbcUrl());
    Map<String, String> query = parameters(backend.query());
    String user = query.getOrDefault("user", "postgres");
    String password = query.getOrDefault("password", "");
    String hostAndPort = backend.hostAndPort();
    int colon = hostAndPort.lastIndexOf(':');
    String host = colon < 0 ? hostAndPort : hostAndPort.substring(0, colon);
    String backendPort = colon < 0 ? "5432" : hostAndPort.substring(colon + 1);
    try {
      Path directory = Files.createTempDirectory("msgqueue-pgbouncer-",
          PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwxr-xr-x")));
      int port = freePort();
      Path users = directory.resolve("users.txt");
      Files.writeString(users, "\"" + user + "\" \"" + password + "\"\n");
      String target = "host=" + host + " port=" + backendPort + " dbname=" + db.name();
      Path ini = directory.resolve("pgbouncer.ini");
      Files.writeString(ini, String.join("\n",
          "[databases]",
          db.name() + " = " + target + " pool_size=" + poolSize,
          db.name() + "_single = " + target + " pool_size=1",
          "[pgbouncer]",
          "listen_addr = 127.0.0.1",
          "listen_port = " + port,
          "unix_socket_dir =",
          "auth_type = trust",
          "auth_file = " + users,
          "pool_mode = transaction",
          "max_client_conn = 500",
          "default_pool_size = " + poolSize,
          // pgjdbc sends extra_float_digits at startup; PgBouncer would refuse the connection otherwise
          "ignore_startup_parameters = extra_float_digits",
          "server_reset_query =",
          "server_check_delay = 1",
          ""), StandardCharsets.UTF_8);
      Path log = directory.resolve("pgbouncer.log");
      List<String> command = new java.util.ArrayList<>(List.of(binary()));
      if ("root".equals(System.getProperty("user.name"))) {
        command.addAll(List.of("-u", "postgres")); // PgBouncer refuses to run as root
      }
      command.add(ini.toString());
      Process process = new ProcessBuilder(command)
          .redirectErrorStream(true)
          .redirectOutput(log.toFile())
          .start();
      PgBouncer bouncer = new PgBouncer(process, directory, port, user, password);
      bouncer.awaitListening(log);
      return bouncer;
    } catch (IOException e) {
      throw new UncheckedIOException("could not start pgbouncer", e);
    }
  }

  private static String binary() {
    for (String candidate : BINARIES) {
      if (Files.isExecutable(Path.of(candidate))) {
        return candidate;
      }
    }
    String path = System.getenv().getOrDefault("PATH", "");
    for (String dir : path.split(":")) {
      if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, "pgbouncer"))) {
        return Path.of(dir, "pgbouncer").toString();
      }
    }
    throw new IllegalStateException("pgbouncer is not installed (looked in " + BINARIES + " and PATH): the PgBouncer"
        + " tests need it; install it with `apt-get install -y pgbouncer` (.ci/run does)");
  }

  private void awaitListening(Path log) throws IOException {
    long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    while (System.nanoTime() - giveUp < 0) {
      if (!process.isAlive()) {
        throw new IllegalStateException("pgbouncer exited with " + process.exitValue() + ": " + Files.readString(log));
      }
      try (Socket socket = new Socket()) {
        socket.connect(new InetSocketAddress("127.0.0.1", port), 200);
        return;
      } catch (IOException notYet) {
        sleep(50);
      }
    }
    close();
    throw new IllegalStateException("pgbouncer did not listen on port " + port + " within 15 s: " + Files.readString(log));
  }

  /** A JDBC URL for {@code alias} through PgBouncer, with the settings transaction pooling needs. */
  public String jdbcUrl(String alias) {
    // prepareThreshold=0: pgjdbc never names a server-side prepared statement, since the next transaction may run
    // on another server connection that does not have it (PgBouncer before 1.21 does not track them).
    return "jdbc:postgresql://127.0.0.1:" + port + "/" + alias + "?user=" + user
        + (password.isEmpty() ? "" : "&password=" + password) + "&prepareThreshold=0";
  }

  public int port() {
    return port;
  }

  public String log() {
    try {
      return Files.readString(directory.resolve("pgbouncer.log"));
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  @Override
  public void close() {
    process.destroy();
    try {
      if (!process.waitFor(5, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try (Stream<Path> files = Files.walk(directory)) {
      files.sorted(Comparator.reverseOrder()).forEach(file -> file.toFile().delete());
    } catch (IOException ignored) {
      // a temporary directory: the OS cleans it up eventually
    }
  }

  private static Map<String, String> parameters(String query) {
    Map<String, String> parameters = new LinkedHashMap<>();
    for (String pair : query.split("&")) {
      int equals = pair.indexOf('=');
      if (equals > 0) {
        parameters.put(pair.substring(0, equals), pair.substring(equals + 1));
      }
    }
    return parameters;
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
