package dev.msgqueue.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.msgqueue.it.PostgresServer;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The benchmark's entry point: {@code java -jar bench/target/msgqueue-bench.jar [--jdbc-url URL] [--quick] ...}.
 * Prints a table per scenario on stdout (progress goes to stderr) and writes results.json, one CSV per scenario and
 * a PNG chart into the results folder.
 */
public final class BenchMain {
  static final int EXIT_OK = 0;
  static final int EXIT_FAILED = 1;
  static final int EXIT_NO_SERVER = 2;
  static final int EXIT_USAGE = 64;
  static final int EMBEDDED_MAX_CONNECTIONS = 300;

  static final String RESULTS_JSON = "results.json";
  static final String CHART_PNG = "publish-throughput.png";

  /**
   * Scenarios not run by this version, with the reason, reported in results.json and on stdout so that a reader
   * never mistakes a missing scenario for a measured one. Empty: every scenario runs.
   */
  static final List<Map<String, String>> NOT_RUN = List.of();

  // Held so the logging configuration is not garbage collected with a weakly referenced logger.
  private static final Logger LIQUIBASE_LOG = Logger.getLogger("liquibase");

  private BenchMain() { }

  public static void main(String[] args) {
    System.exit(run(args, System.out, System.err));
  }

  /** The scenarios in the order they run. */
  static List<Scenario> allScenarios(BenchOptions options) {
    PublishContentionScenario contention = new PublishContentionScenario(options);
    return List.of(
        contention,
        new BatchingScenario(options, contention.config()),
        new ReaperRaceScenario(options.reaperRace()),
        new EndToEndScenario(options.endToEnd()),
        new DrainScenario(options.drainMessages(), options.drainCells()),
        new SustainedScenario(options.sustainedDuration()),
        new DrainRepeatScenario(options.drainMessages()),
        new ScaleScenario(options.scale()));
  }

  /**
   * The scenarios a run without {@code --scenarios} leaves out: the long diagnostic ones. Scale loads a million
   * messages and waits out idle windows; drain-repeat drains the same preload twenty times. Each takes about four to
   * eight minutes on two cores, so the default run fits in about ten minutes.
   */
  static final List<String> NOT_IN_DEFAULT_RUN = List.of(DrainRepeatScenario.ID, ScaleScenario.ID);

  /** The scenarios that run only when {@code --scenarios} names them, never in the default run. */
  static List<Scenario> optInScenarios(BenchOptions options) {
    return List.of(new ConsoleScenario(options.console()));
  }

  /**
   * The scenarios {@code --scenarios} selects: by id, or {@code all} (every one but the opt-in ones); without it the
   * default run, which leaves out {@link #NOT_IN_DEFAULT_RUN} too.
   */
  static List<Scenario> scenarios(BenchOptions options) throws BenchOptions.UsageException {
    List<Scenario> all = new java.util.ArrayList<>(allScenarios(options));
    if (options.scenarioIds().isEmpty()) {
      return all.stream().filter(scenario -> !NOT_IN_DEFAULT_RUN.contains(scenario.id())).toList();
    }
    if (options.scenarioIds().equals(List.of(BenchOptions.ALL_SCENARIOS))) {
      return all;
    }
    all.addAll(optInScenarios(options));
    List<String> known = all.stream().map(Scenario::id).toList();
    for (String id : options.scenarioIds()) {
      if (!known.contains(id)) {
        throw new BenchOptions.UsageException("unknown scenario " + id + "; known: " + String.join(",", known)
            + " (or " + BenchOptions.ALL_SCENARIOS + " alone)");
      }
    }
    return all.stream().filter(scenario -> options.scenarioIds().contains(scenario.id())).toList();
  }

  /** Runs the benchmark; returns the process exit code. */
  static int run(String[] args, PrintStream out, PrintStream err) {
    quietLibraries();
    BenchOptions options;
    try {
      options = BenchOptions.parse(args);
    } catch (BenchOptions.UsageException e) {
      boolean help = List.of(args).contains("--help") || List.of(args).contains("-h");
      (help ? out : err).println(e.getMessage());
      return help ? EXIT_OK : EXIT_USAGE;
    }
    List<Scenario> scenarios;
    try {
      scenarios = scenarios(options);
    } catch (BenchOptions.UsageException e) {
      err.println(e.getMessage());
      return EXIT_USAGE;
    }
    Path resultsDir = options.resultsDir() != null ? options.resultsDir()
        : jarDirectory().resolve("results")
            .resolve(LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")));

    PostgresServer server;
    if (options.jdbcUrl() == null) {
      err.println("msgqueue-bench: starting an embedded PostgreSQL (pass --jdbc-url to use an existing server) ...");
      try {
        server = startEmbedded(jarDirectory().resolve("embedded-pg"));
      } catch (IOException e) {
        err.println("msgqueue-bench: the embedded PostgreSQL cannot start on this platform (" + rootMessage(e)
            + "); run against an existing server instead: --jdbc-url jdbc:postgresql://HOST:5432/postgres?user=USER");
        return EXIT_NO_SERVER;
      }
    } else {
      server = PostgresServer.existing(options.jdbcUrl());
    }

    Instant startedAt = Instant.now();
    double loadAtStart = ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
    try (PostgresServer ownedServer = server; BenchDatabase database = BenchDatabase.create(ownedServer, options.keepDatabase(),
        !options.quick())) {
      // Ctrl-C: drop the benchmark database anyway (the embedded server is stopped by its own hook).
      Thread dropOnInterrupt = new Thread(database::close, "msgqueue-bench-cleanup");
      Runtime.getRuntime().addShutdownHook(dropOnInterrupt);
      try {
        requireConnections(database, options);
        int steps = scenarios.stream().mapToInt(Scenario::steps).sum();
        Duration estimate = scenarios.stream().map(Scenario::estimate).reduce(Duration.ZERO, Duration::plus);
        err.printf(Locale.ROOT, "msgqueue-bench: %d cells in %s, about %s on a busy 2-core machine (less on a quiet"
            + " one); results go to %s%n", steps, scenarios.stream().map(Scenario::id)
                .collect(java.util.stream.Collectors.joining(",")), minutes(estimate), resultsDir.toAbsolutePath());
        if (options.scenarioIds().isEmpty()) {
          err.println("msgqueue-bench: the default run; " + String.join(" and ", NOT_IN_DEFAULT_RUN)
              + " run with --scenarios " + String.join(",", NOT_IN_DEFAULT_RUN) + ", or everything with --scenarios all");
        }

        Map<String, Object> machine = machine(loadAtStart);
        printHeader(out, server, database, machine, options);
        BenchContext context = new BenchContext(database, options, err, steps);
        Map<String, Scenario.Result> results = new LinkedHashMap<>();
        // Estimated against measured seconds per scenario, in results.json: what keeps the estimate honest.
        List<Map<String, Object>> durations = new java.util.ArrayList<>();
        double estimatedSoFar = 0;
        double tookSoFar = 0;
        double estimatedLeft = estimate.toSeconds();
        for (Scenario scenario : scenarios) {
          long scenarioStart = System.nanoTime();
          Scenario.Result result = scenario.run(context);
          double seconds = (System.nanoTime() - scenarioStart) / 1e9;
          long estimated = scenario.estimate().toSeconds();
          durations.add(Map.of("scenario", scenario.id(), "estimatedSeconds", estimated,
              "seconds", Math.round(seconds)));
          estimatedSoFar += estimated;
          tookSoFar += seconds;
          estimatedLeft -= estimated;
          // The rest scaled by how this machine has done against the estimate so far (a loaded machine runs slower).
          err.printf(Locale.ROOT, "msgqueue-bench: %s took %.0f s (estimated %d s)%s%n", scenario.id(), seconds,
              estimated, estimatedLeft <= 0 ? "" : String.format(Locale.ROOT, "; about %.0f s left",
                  estimatedLeft * tookSoFar / Math.max(1, estimatedSoFar)));
          results.put(scenario.id(), result);
          out.println();
          out.println(scenario.title());
          result.printTable(out);
          out.flush();
        }
        for (Map<String, String> notRun : NOT_RUN) {
          out.println();
          out.println(notRun.get("title"));
          out.println("not run: " + notRun.get("reason"));
        }

        List<TargetChecks.Check> checks = TargetChecks.evaluate(
            (PublishContentionScenario.ContentionResult) results.get(PublishContentionScenario.ID),
            (BatchingScenario.BatchingResult) results.get(BatchingScenario.ID),
            (ReaperRaceScenario.ReaperRaceResult) results.get(ReaperRaceScenario.ID));
        checks = new java.util.ArrayList<>(checks);
        checks.addAll(TargetChecks.consumption((DrainScenario.DrainResult) results.get(DrainScenario.ID),
            (SustainedScenario.SustainedResult) results.get(SustainedScenario.ID)));
        out.println();
        out.println("Targets (ratios within this run)");
        TargetChecks.print(checks, out);

        machine.put("loadAverageAtEnd", ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
        Files.createDirectories(resultsDir);
        Map<String, Object> report = new LinkedHashMap<>();
        report.put("benchmark", "msgqueue-bench");
        report.put("formatVersion", 1);
        report.put("startedAt", startedAt.toString());
        report.put("finishedAt", Instant.now().toString());
        report.put("arguments", List.of(args));
        report.put("quick", options.quick());
        report.put("machine", machine);
        report.put("server", Map.of("description", server.description(), "database", database.name(),
            "settings", database.settings()));
        report.put("payloadBytes", BenchContext.PAYLOAD.data().getBytes(StandardCharsets.UTF_8).length);
        report.put("scenarios", results);
        report.put("durations", durations);
        report.put("notRun", NOT_RUN);
        report.put("checks", checks);
        new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT)
            .writeValue(resultsDir.resolve(RESULTS_JSON).toFile(), report);
        for (Map.Entry<String, Scenario.Result> entry : results.entrySet()) {
          entry.getValue().writeCsv(resultsDir.resolve(entry.getKey() + ".csv"));
        }
        PublishContentionScenario.ContentionResult contention =
            (PublishContentionScenario.ContentionResult) results.get(PublishContentionScenario.ID);
        if (contention != null) {
          ThroughputChart.write(resultsDir.resolve(CHART_PNG), contention, String.format(Locale.ROOT,
              "%s, %s cores, %s; %.1f s per cell after %.1f s warm-up; %s", machine.get("cpuModel"),
              machine.get("availableProcessors"), shortVersion(database.settings().get("version")),
              contention.cellSeconds(), contention.warmupSeconds(), startedAt.toString().substring(0, 10)));
        }
        ScaleScenario.ScaleResult scale = (ScaleScenario.ScaleResult) results.get(ScaleScenario.ID);
        // The chart wants every curve but the housekeeping tick; --scale-cells may have left some out.
        if (scale != null && !scale.backlog().isEmpty() && !scale.queues().isEmpty()
            && !scale.idleSubscribers().isEmpty()) {
          ScaleChart.write(resultsDir.resolve(ScaleScenario.CHART_PNG), scale, String.format(Locale.ROOT,
              "%s, %s cores, %s; scale %s; load average %.2f at start; %s", machine.get("cpuModel"),
              machine.get("availableProcessors"), shortVersion(database.settings().get("version")), scale.form(),
              loadAtStart, startedAt.toString().substring(0, 10)));
        }
        out.println();
        out.println("results: " + resultsDir.toAbsolutePath());
        err.printf(Locale.ROOT, "msgqueue-bench: done in %s (estimated %s)%n",
            minutes(Duration.between(startedAt, Instant.now())), minutes(estimate));
        return EXIT_OK;
      } finally {
        removeShutdownHook(dropOnInterrupt);
      }
    } catch (Exception e) {
      err.println("msgqueue-bench failed: " + e);
      e.printStackTrace(err);
      return EXIT_FAILED;
    }
  }

  /** "9 min 40 s", or "40 s" below a minute. */
  static String minutes(Duration duration) {
    long seconds = Math.max(0, duration.toSeconds());
    return seconds < 60 ? seconds + " s" : String.format(Locale.ROOT, "%d min %d s", seconds / 60, seconds % 60);
  }

  private static void removeShutdownHook(Thread hook) {
    try {
      Runtime.getRuntime().removeShutdownHook(hook);
    } catch (IllegalStateException e) {
      // The JVM is already shutting down: the hook runs, and closing twice is harmless.
    }
  }

  /** The embedded server, with room for 64 publishers, the lock sampler, the control session and a reaper. */
  private static PostgresServer startEmbedded(Path workingDirectory) throws IOException {
    // zonky extracts the PostgreSQL binaries under ot.epg.working-dir (default: the shared temp folder).
    if (System.getProperty("ot.epg.working-dir") == null) {
      System.setProperty("ot.epg.working-dir", workingDirectory.toString());
    }
    // A start that hangs would hang the benchmark: give up after a minute and say so.
    return PostgresServer.embedded(Map.of("max_connections", Integer.toString(EMBEDDED_MAX_CONNECTIONS)),
        Duration.ofSeconds(60));
  }

  private static String rootMessage(Throwable e) {
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    String message = root.getMessage() == null ? root.getClass().getSimpleName() : root.getMessage();
    return message.replaceAll("\\s+", " ").strip();
  }

  private static void requireConnections(BenchDatabase database, BenchOptions options) {
    int available = Integer.parseInt(database.settings().get("max_connections"));
    // Publishers plus the control session, the lock sampler, the reaper, and a few for whoever else is connected.
    int needed = options.maxPublishers() + 8;
    if (available < needed) {
      throw new IllegalStateException("the server allows max_connections = " + available + ", the benchmark needs"
          + " about " + needed + " for " + options.maxPublishers() + " publishers; lower --publishers or raise it");
    }
  }

  private static void printHeader(PrintStream out, PostgresServer server, BenchDatabase database,
      Map<String, Object> machine, BenchOptions options) {
    out.println("msgqueue-bench" + (options.quick() ? " (quick: tiny sizes, figures not meaningful)" : ""));
    out.printf(Locale.ROOT, "machine: %s, %s cores, %s; %s %s; load average %.2f at start%n", machine.get("cpuModel"),
        machine.get("availableProcessors"), machine.get("memory"), machine.get("os"), machine.get("java"),
        (Double) machine.get("loadAverageAtStart"));
    out.println("server:  " + server.description() + ", database " + database.name());
    StringBuilder settings = new StringBuilder();
    database.settings().forEach((name, value) -> {
      if (!name.equals("version")) {
        settings.append(settings.length() == 0 ? "" : ", ").append(name).append('=').append(value);
      }
    });
    out.println("         " + shortVersion(database.settings().get("version")) + "; " + settings);
    out.println("note:    WAL bytes are server-wide; on a shared server other databases' writes count too.");
  }

  /** "PostgreSQL 17.2" out of version()'s "PostgreSQL 17.2 (Debian ...) on x86_64-pc-linux-gnu, compiled by ...". */
  private static String shortVersion(String version) {
    String[] words = version.split(" ");
    return words.length >= 2 ? words[0] + " " + words[1] : version;
  }

  private static Map<String, Object> machine(double loadAtStart) {
    Map<String, Object> machine = new LinkedHashMap<>();
    machine.put("cpuModel", procValue("/proc/cpuinfo", "model name").orElse(System.getProperty("os.arch")));
    machine.put("availableProcessors", Runtime.getRuntime().availableProcessors());
    machine.put("memory", procValue("/proc/meminfo", "MemTotal").orElse("unknown memory"));
    machine.put("os", System.getProperty("os.name") + " " + System.getProperty("os.version") + " "
        + System.getProperty("os.arch"));
    machine.put("java", System.getProperty("java.vm.name") + " " + System.getProperty("java.version"));
    machine.put("loadAverageAtStart", loadAtStart);
    return machine;
  }

  private static java.util.Optional<String> procValue(String file, String key) {
    try {
      return Files.readAllLines(Path.of(file)).stream()
          .filter(line -> line.startsWith(key))
          .map(line -> line.substring(line.indexOf(':') + 1).strip())
          .findFirst();
    } catch (IOException | RuntimeException e) {
      return java.util.Optional.empty();
    }
  }

  /** The folder of the jar (bench/target), or of the classes folder when run from an IDE or a test. */
  static Path jarDirectory() {
    try {
      Path location = Path.of(BenchMain.class.getProtectionDomain().getCodeSource().getLocation().toURI());
      return location.getParent();
    } catch (URISyntaxException | RuntimeException e) {
      return Path.of("target");
    }
  }

  private static void quietLibraries() {
    setIfAbsent("java.awt.headless", "true");
    setIfAbsent("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    setIfAbsent("org.jooq.no-logo", "true");
    setIfAbsent("org.jooq.no-tips", "true");
    setIfAbsent("liquibase.analytics.enabled", "false");
    setIfAbsent("liquibase.showBanner", "false");
    LIQUIBASE_LOG.setLevel(Level.WARNING);
  }

  private static void setIfAbsent(String key, String value) {
    if (System.getProperty(key) == null) {
      System.setProperty(key, value);
    }
  }
}
