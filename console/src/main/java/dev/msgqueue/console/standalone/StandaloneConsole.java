package dev.msgqueue.console.standalone;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.console.Console;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * The console on its own, for an operator with a JDBC URL and no service at hand:
 * {@code java -jar msgqueue-console.jar --jdbc-url 'jdbc:postgresql://HOST:5432/DB?user=USER' [--port 8080]
 * [--bind 127.0.0.1] [--actions]}. The password comes from the environment ({@value #PASSWORD_VARIABLE}), a file
 * ({@code --password-file}), or pgjdbc's own {@code .pgpass}, never from the command line, where every user of the
 * machine could read it. The console prints its address, never the URL.
 */
public final class StandaloneConsole {
  /** The environment variable the database password is read from. */
  public static final String PASSWORD_VARIABLE = "MSGQUEUE_CONSOLE_PASSWORD";
  static final int EXIT_USAGE = 64;
  static final int EXIT_UNAVAILABLE = 69;

  static final String USAGE = String.join("\n",
      "usage: java -jar msgqueue-console.jar --jdbc-url URL [options]",
      "",
      "  --jdbc-url URL             the database holding the msgqueue tables, e.g.",
      "                             'jdbc:postgresql://HOST:5432/DB?user=USER' (a currentSchema=... parameter if they",
      "                             are not in the search path)",
      "  --port N                   the port to serve on (default 8080; 0 for any free port)",
      "  --bind ADDRESS             the address to serve on (default 127.0.0.1; anyone who can reach it can read",
      "                             every payload, and with --actions republish and purge)",
      "  --actions                  allow republishing and purging dead letters (default: read only)",
      "  --password-file FILE       read the database password from the first line of FILE",
      "  --reap-idle-threshold D    the services' msgqueue.reap-idle-threshold, for the reap column (default PT1H)",
      "  --message-ttl D            the services' default message TTL, given to republished dead letters",
      "                             (default PT5M)",
      "  --statistics-max-age D     how old the queue counts may get before they are read again (default PT1M)",
      "",
      "The password: " + PASSWORD_VARIABLE + " in the environment, --password-file, or pgjdbc's .pgpass;",
      "never on the command line. Durations are ISO-8601, e.g. PT30M.");

  private StandaloneConsole() { }

  /** The parsed command line. */
  record Options(String jdbcUrl, int port, String bind, boolean actions, Path passwordFile,
      Duration reapIdleThreshold, Duration messageTtl, Duration statisticsMaxAge) {
  }

  /** A command line the console refuses. */
  static final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
      super(message);
    }
  }

  public static void main(String[] args) {
    defaultProperty("org.slf4j.simpleLogger.showDateTime", "true");
    defaultProperty("org.slf4j.simpleLogger.dateTimeFormat", "yyyy-MM-dd HH:mm:ss.SSSZ");
    defaultProperty("org.slf4j.simpleLogger.showThreadName", "false");
    defaultProperty("org.slf4j.simpleLogger.showShortLogName", "true");
    defaultProperty("org.slf4j.simpleLogger.log.com.zaxxer.hikari", "warn");
    defaultProperty("org.jooq.no-logo", "true");
    defaultProperty("org.jooq.no-tips", "true");
    int exit = run(args, System.getenv(PASSWORD_VARIABLE), System.out, System.err, null);
    if (exit != 0) {
      System.exit(exit);
    }
  }

  private static void defaultProperty(String name, String value) {
    if (System.getProperty(name) == null) {
      System.setProperty(name, value);
    }
  }

  static Options parse(String[] args) throws UsageException {
    String jdbcUrl = null;
    int port = 8080;
    String bind = "127.0.0.1";
    boolean actions = false;
    Path passwordFile = null;
    Duration reap = Duration.ofHours(1);
    Duration ttl = Duration.ofMinutes(5);
    Duration maxAge = Console.DEFAULT_STATISTICS_MAX_AGE;
    List<String> rest = new ArrayList<>(List.of(args));
    while (!rest.isEmpty()) {
      String option = rest.remove(0);
      switch (option) {
        case "--jdbc-url" -> jdbcUrl = value(option, rest);
        case "--port" -> port = port(value(option, rest));
        case "--bind" -> bind = value(option, rest);
        case "--actions" -> actions = true;
        case "--password-file" -> passwordFile = Path.of(value(option, rest));
        case "--reap-idle-threshold" -> reap = duration(option, value(option, rest));
        case "--message-ttl" -> ttl = duration(option, value(option, rest));
        case "--statistics-max-age" -> maxAge = duration(option, value(option, rest));
        case "--help", "-h" -> throw new UsageException(USAGE);
        default -> throw new UsageException("unknown option " + option + "\n\n" + USAGE);
      }
    }
    if (jdbcUrl == null) {
      throw new UsageException("--jdbc-url is required\n\n" + USAGE);
    }
    if (!jdbcUrl.startsWith("jdbc:postgresql:")) {
      throw new UsageException("--jdbc-url must be a PostgreSQL JDBC URL (jdbc:postgresql://HOST:PORT/DATABASE)");
    }
    return new Options(jdbcUrl, port, bind, actions, passwordFile, reap, ttl, maxAge);
  }

  private static String value(String option, List<String> rest) throws UsageException {
    if (rest.isEmpty()) {
      throw new UsageException(option + " needs a value");
    }
    return rest.remove(0);
  }

  private static int port(String text) throws UsageException {
    try {
      int port = Integer.parseInt(text);
      if (port < 0 || port > 65_535) {
        throw new UsageException("--port must be in [0, 65535]");
      }
      return port;
    } catch (NumberFormatException e) {
      throw new UsageException("--port must be a number");
    }
  }

  private static Duration duration(String option, String text) throws UsageException {
    try {
      return Duration.parse(text);
    } catch (DateTimeParseException e) {
      throw new UsageException(option + " must be an ISO-8601 duration such as PT30M, was " + text);
    }
  }

  /**
   * Runs the console until the JVM stops (or, for tests, until {@code stop} counts down).
   *
   * @return the exit code: 0 after a normal stop, {@link #EXIT_USAGE} for a bad command line,
   *     {@link #EXIT_UNAVAILABLE} if the database or the address cannot be used
   */
  static int run(String[] args, String passwordFromEnvironment, PrintStream out, PrintStream err,
      CountDownLatch stop) {
    Options options;
    try {
      options = parse(args);
    } catch (UsageException e) {
      boolean help = List.of(args).contains("--help") || List.of(args).contains("-h");
      (help ? out : err).println(e.getMessage());
      return help ? 0 : EXIT_USAGE;
    }
    MsgQueueConfig config;
    try {
      config = MsgQueueConfig.builder()
          .reapIdleThreshold(options.reapIdleThreshold())
          .keepAliveInterval(min(MsgQueueConfig.defaults().keepAliveInterval(),
              options.reapIdleThreshold().dividedBy(4)))
          .defaultMessageTtl(options.messageTtl())
          .build();
    } catch (IllegalArgumentException e) {
      err.println("msgqueue-console: " + e.getMessage());
      return EXIT_USAGE;
    }
    if (options.jdbcUrl().toLowerCase(Locale.ROOT).contains("password=")) {
      err.println("msgqueue-console: warning: the JDBC URL holds a password, which every user of this machine can"
          + " read in its process list; use " + PASSWORD_VARIABLE + " or --password-file instead");
    }
    String password = passwordFromEnvironment;
    if (options.passwordFile() != null) {
      try {
        List<String> lines = Files.readAllLines(options.passwordFile(), StandardCharsets.UTF_8);
        password = lines.isEmpty() ? "" : lines.get(0);
      } catch (IOException e) {
        err.println("msgqueue-console: cannot read the password file: " + e.getMessage());
        return EXIT_USAGE;
      }
    }

    HikariConfig poolConfig = new HikariConfig();
    poolConfig.setJdbcUrl(options.jdbcUrl());
    if (password != null && !password.isEmpty()) {
      poolConfig.setPassword(password);
    }
    poolConfig.setPoolName("msgqueue-console");
    poolConfig.setMaximumPoolSize(4);
    poolConfig.setMinimumIdle(0);
    poolConfig.setConnectionTimeout(10_000);
    poolConfig.setInitializationFailTimeout(-1);
    poolConfig.addDataSourceProperty("ApplicationName", "msgqueue-console");
    try (HikariDataSource pool = new HikariDataSource(poolConfig)) {
      var ctx = DSL.using(pool, SQLDialect.POSTGRES);
      try {
        // A regclass has no jOOQ type: the lookup by name is a plain SQL template over the rendered generated table.
        if (!Boolean.TRUE.equals(ctx.select(DSL.field("to_regclass({0}) is not null", Boolean.class,
            DSL.val(ctx.render(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE)))).fetchOne(0, Boolean.class))) {
          err.println("msgqueue-console: the database has no msgqueue tables where the connection looks for them:"
              + " apply the msgqueue changelog, or add currentSchema=SCHEMA to the URL");
          return EXIT_UNAVAILABLE;
        }
      } catch (RuntimeException e) {
        // The cause's own text may hold the host and the user; the operator has the URL and pgjdbc's message.
        err.println("msgqueue-console: cannot read the database: " + rootMessage(e));
        return EXIT_UNAVAILABLE;
      }
      MsgQueueRepository repository = MsgQueueRepository.create(pool, config);
      CountDownLatch stopped = new CountDownLatch(1);
      try (Console console = Console.builder(repository, ctx)
          .actionsEnabled(options.actions())
          .statisticsMaxAge(options.statisticsMaxAge())
          .build()) {
        ConsoleServer server;
        try {
          server = ConsoleServer.start(console, new InetSocketAddress(InetAddress.getByName(options.bind()),
              options.port()));
        } catch (IOException e) {
          err.println("msgqueue-console: cannot serve on " + options.bind() + ":" + options.port() + ": "
              + e.getMessage());
          return EXIT_UNAVAILABLE;
        }
        try (server) {
          String host = options.bind().contains(":") ? "[" + options.bind() + "]" : options.bind();
          out.println("msgqueue-console: serving http://" + host + ":" + server.port() + "/ ("
              + (options.actions() ? "actions enabled" : "read only") + "); Ctrl-C stops it");
          if (!InetAddress.getByName(options.bind()).isLoopbackAddress()) {
            err.println("msgqueue-console: warning: serving on " + options.bind() + ", not a loopback address, with no"
                + " login: anyone who can reach it reads every payload" + (options.actions()
                    ? " and can republish and purge dead letters" : ""));
          }
          out.flush();
          awaitStop(stop, stopped);
        }
      } finally {
        stopped.countDown();
      }
    } catch (IOException e) {
      err.println("msgqueue-console: " + e.getMessage());
      return EXIT_UNAVAILABLE;
    }
    return 0;
  }

  private static Duration min(Duration a, Duration b) {
    return a.compareTo(b) <= 0 ? a : b;
  }

  private static void awaitStop(CountDownLatch stop, CountDownLatch stopped) {
    CountDownLatch latch = stop != null ? stop : new CountDownLatch(1);
    if (stop == null) {
      // Ctrl-C: let main close the server, the console and the pool before the JVM goes.
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        latch.countDown();
        try {
          stopped.await(10, java.util.concurrent.TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }, "msgqueue-console-stop"));
    }
    try {
      latch.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static String rootMessage(Throwable e) {
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    return root.getMessage() == null ? root.getClass().getSimpleName() : root.getMessage();
  }
}
