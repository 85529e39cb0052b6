package dev.msgqueue.bench;

import dev.msgqueue.MsgQueueConfig;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The command line of the benchmark. {@code --quick} picks tiny sizes (the CI smoke test); the other options override
 * single values of whichever size is chosen.
 *
 * @param jdbcUrl an existing server to run on (the benchmark creates and drops its own database there); {@code null}
 *     starts an embedded PostgreSQL
 * @param resultsDir where results.json, the CSV files and the PNG chart go; {@code null} for the default
 * @param cellDuration how long each measured cell of scenarios 1 and 2 runs, after its warm-up
 * @param warmup how long each cell publishes before measuring starts
 * @param publisherCounts the concurrent publisher counts of scenario 1
 * @param batchSizes the batch sizes of scenario 2
 * @param reaperRace the time-compressed settings of scenario 3
 * @param endToEnd the rate and subscriber settings of scenario 4 (its stream runs for {@code cellDuration} after
 *     {@code warmup})
 * @param contentionKeepAlive the keep-alive interval of scenario 1's parent-writes check (reap threshold four times
 *     it); its throughput cells use the library's default
 * @param rounds how many slices each contention cell is measured in, the strategies in rotated order per round
 * @param scenarioIds the scenarios to run, by id, or {@link #ALL_SCENARIOS} alone; empty for the default run (all but
 *     {@link BenchMain#NOT_IN_DEFAULT_RUN})
 * @param keepDatabase whether to leave the benchmark database on the server when done (for inspection)
 * @param drainMessages how many messages the drain scenario preloads per cell
 * @param sustainedDuration how long each sustained run publishes and consumes
 * @param scale the sizes of the scale scenario
 * @param drainCells the drain scenario's cells to run, as {@code consumer:concurrency}; empty for the default ones,
 *     {@code all} for every one
 * @param console the sizes of the console scenario (run only when {@code --scenarios} names it)
 */
record BenchOptions(
    String jdbcUrl,
    Path resultsDir,
    Duration cellDuration,
    Duration warmup,
    List<Integer> publisherCounts,
    List<Integer> batchSizes,
    ReaperRaceSettings reaperRace,
    EndToEndSettings endToEnd,
    Duration contentionKeepAlive,
    int rounds,
    List<String> scenarioIds,
    boolean quick,
    boolean keepDatabase,
    int drainMessages,
    Duration sustainedDuration,
    ScaleSettings scale,
    List<String> drainCells,
    ConsoleScenario.ConsoleSettings console) {

  /** {@code --scenarios all}: every scenario, scale included. */
  static final String ALL_SCENARIOS = "all";

  static final String USAGE = String.join(System.lineSeparator(),
      "usage: java -jar bench/target/msgqueue-bench.jar [options]",
      "  (no options)            the default run (every scenario but drain-repeat and scale, about 10 minutes on",
      "                          2 cores) on an embedded PostgreSQL 17 started by the benchmark",
      "  --jdbc-url URL          run on an existing server instead, e.g.",
      "                          jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres",
      "                          (creates a database msgqueue_bench_* there and drops it at the end)",
      "  --results DIR           results folder (default: results/<timestamp> next to the jar)",
      "  --duration SECONDS      measured seconds per cell or end-to-end run (default 5; quick 0.4)",
      "  --warmup SECONDS        unmeasured seconds before each cell or slice (default 0.5; quick 0.15)",
      "  --rounds N              contention cells measured in N slices, strategies rotated (default 3; quick 1)",
      "  --publishers 1,8,32,64  concurrent publishers of the contention scenario",
      "  --keep-alive SECONDS    keep-alive of the contention scenario's parent-writes check (default 1; quick 0.25);",
      "                          its throughput cells use the library default (5 min)",
      "  --batch-sizes 1,10,100,1000  batch sizes of the batching scenario",
      "  --reaper-race SECONDS   length of each reaper-race run (default 12; quick 1.5)",
      "  --e2e-rate N            messages/s of the end-to-end runs' steady stream (default 200; quick 100)",
      "  --e2e-poll-interval SECONDS  the end-to-end subscriber's poll interval (default 1, the library's;",
      "                          quick 0.2)",
      "  --drain-messages N      messages preloaded per drain cell and drain-repeat run (default 100000;",
      "                          quick 2000)",
      "  --drain-cells LIST      only these drain cells, e.g. pgmq-shape-sql:1,repository-loop:1, or all (default:",
      "                          the cells the consumption targets compare, about 5 minutes at 100,000 messages)",
      "  --sustained SECONDS     length of each sustained run (default 20; quick 1)",
      "  --scale short|long|idle the scale scenario's sizes: short (default, backlogs up to 1M messages, a few",
      "                          minutes), long (adds the 10M-message backlog: about 15 GB of disk, longer) or",
      "                          idle (only the 1,000 idle subscribers' cell, with 200 deliveries)",
      "  --scale-cells CURVES    only these curves of the scale scenario: backlog,queues,housekeeping,subscribers",
      "  --maintenance-duty-cycles 1,0.5  one housekeeping cell per MsgQueueConfig.maintenanceDutyCycle, in this",
      "                          order (default 1,0.5: batches back to back, then the library's default)",
      "  --scenarios IDS         run only these: publish-contention,batching,reaper-race,end-to-end,drain,",
      "                          sustained,drain-repeat,scale; or all (the default run, drain-repeat and scale);",
      "                          console runs only when named",
      "  --console-queues N      queues the console scenario fills (default 100000; quick 2000)",
      "  --console-messages N    messages the console scenario fills (default 10000000, about 4 GB; quick 20000)",
      "  --console-requests N    requests per view of the console scenario (default 100; quick 5)",
      "  --console-database NAME measure this database on the same server as it is, instead of filling one",
      "  --quick                 tiny sizes (the CI smoke test; its figures mean nothing)",
      "  --keep-database         do not drop the benchmark database at the end",
      "  --help                  this text");

  /** Thrown for a command line that cannot be run; its message is meant for the user as is. */
  static final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
      super(message);
    }
  }

  static BenchOptions parse(String... args) throws UsageException {
    boolean quick = List.of(args).contains("--quick");
    String jdbcUrl = null;
    Path resultsDir = null;
    Duration cellDuration = quick ? Duration.ofMillis(400) : Duration.ofSeconds(5);
    Duration warmup = quick ? Duration.ofMillis(150) : Duration.ofMillis(500);
    int rounds = quick ? 1 : 3;
    List<Integer> publishers = quick ? List.of(1, 4) : List.of(1, 8, 32, 64);
    List<Integer> batchSizes = List.of(1, 10, 100, 1000);
    ReaperRaceSettings reaperRace = quick ? ReaperRaceSettings.QUICK : ReaperRaceSettings.FULL;
    int endToEndRate = quick ? EndToEndSettings.QUICK_RATE : EndToEndSettings.DEFAULT_RATE;
    Duration endToEndPoll = quick ? EndToEndSettings.QUICK_POLL_INTERVAL : EndToEndSettings.LIBRARY_POLL_INTERVAL;
    // The parent-writes check only: 1 s, far shorter than any service would use (the library's default is 5 min, which
    // the throughput cells use), so that the check spans several intervals under load.
    Duration contentionKeepAlive = quick ? Duration.ofMillis(250) : Duration.ofSeconds(1);
    boolean keepDatabase = false;
    int drainMessages = quick ? 2_000 : 100_000;
    Duration sustained = quick ? Duration.ofSeconds(1) : Duration.ofSeconds(20);
    List<String> scenarioIds = List.of();
    ScaleSettings scale = quick ? ScaleSettings.QUICK : ScaleSettings.SHORT;
    List<String> drainCells = List.of();
    List<String> scaleCells = List.of();
    List<Double> dutyCycles = List.of();
    ConsoleScenario.ConsoleSettings console = quick ? ConsoleScenario.ConsoleSettings.QUICK
        : ConsoleScenario.ConsoleSettings.FULL;
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      switch (arg) {
        case "--quick" -> { }
        case "--keep-database" -> keepDatabase = true;
        case "--help", "-h" -> throw new UsageException(USAGE);
        case "--jdbc-url" -> {
          jdbcUrl = value(args, ++i, arg);
          if (!jdbcUrl.startsWith("jdbc:postgresql://")) {
            throw new UsageException("--jdbc-url must be a jdbc:postgresql:// URL, was: " + jdbcUrl);
          }
        }
        case "--results" -> resultsDir = Path.of(value(args, ++i, arg));
        case "--duration" -> cellDuration = seconds(value(args, ++i, arg), arg);
        case "--warmup" -> warmup = seconds(value(args, ++i, arg), arg);
        case "--publishers" -> publishers = positiveInts(value(args, ++i, arg), arg, 512);
        case "--batch-sizes" -> batchSizes = positiveInts(value(args, ++i, arg), arg, 10_000);
        case "--rounds" -> rounds = positiveInts(value(args, ++i, arg), arg, 100).get(0);
        case "--keep-alive" -> contentionKeepAlive = seconds(value(args, ++i, arg), arg);
        case "--e2e-rate" -> endToEndRate = positiveInts(value(args, ++i, arg), arg, 10_000).get(0);
        case "--e2e-poll-interval" -> endToEndPoll = seconds(value(args, ++i, arg), arg);
        case "--drain-messages" -> drainMessages = positiveInts(value(args, ++i, arg), arg, 10_000_000).get(0);
        case "--sustained" -> sustained = seconds(value(args, ++i, arg), arg);
        case "--scale" -> {
          String form = value(args, ++i, arg);
          if (!form.equals("short") && !form.equals("long") && !form.equals("idle")) {
            throw new UsageException("--scale takes short, long or idle, was " + form);
          }
          scale = quick ? ScaleSettings.QUICK : ScaleSettings.named(form);
        }
        case "--scale-cells" -> scaleCells = List.of(value(args, ++i, arg).split(","));
        case "--maintenance-duty-cycles" -> dutyCycles = dutyCycles(value(args, ++i, arg), arg);
        case "--drain-cells" -> drainCells = List.of(value(args, ++i, arg).split(","));
        case "--scenarios" -> scenarioIds = List.of(value(args, ++i, arg).split(","));
        case "--console-queues" -> console = new ConsoleScenario.ConsoleSettings(
            positiveInts(value(args, ++i, arg), arg, 10_000_000).get(0), console.messages(), console.requests(),
            console.statisticsReads(), console.existingDatabase());
        case "--console-messages" -> console = new ConsoleScenario.ConsoleSettings(console.queues(),
            positiveInts(value(args, ++i, arg), arg, 100_000_000).get(0), console.requests(),
            console.statisticsReads(), console.existingDatabase());
        case "--console-requests" -> console = new ConsoleScenario.ConsoleSettings(console.queues(),
            console.messages(), positiveInts(value(args, ++i, arg), arg, 100_000).get(0), console.statisticsReads(),
            console.existingDatabase());
        case "--console-database" -> console = new ConsoleScenario.ConsoleSettings(console.queues(),
            console.messages(), console.requests(), console.statisticsReads(), value(args, ++i, arg));
        case "--reaper-race" -> reaperRace = reaperRace.withRunLength(seconds(value(args, ++i, arg), arg));
        default -> throw new UsageException("unknown option " + arg + System.lineSeparator() + USAGE);
      }
    }
    if (!scaleCells.isEmpty()) {
      if (!ScaleSettings.CELLS.containsAll(scaleCells)) {
        throw new UsageException("--scale-cells takes some of " + ScaleSettings.CELLS + ", was " + scaleCells);
      }
      scale = scale.withCells(java.util.Set.copyOf(scaleCells));
    }
    if (!dutyCycles.isEmpty()) {
      scale = scale.withMaintenanceDutyCycles(dutyCycles);
    }
    if (cellDuration.isZero()) {
      throw new UsageException("--duration must be positive");
    }
    if (endToEndPoll.compareTo(Duration.ofMillis(10)) < 0) {
      // Subscriber.Builder's own lower bound.
      throw new UsageException("--e2e-poll-interval must be at least 0.01 seconds");
    }
    return new BenchOptions(jdbcUrl, resultsDir, cellDuration, warmup, publishers, batchSizes, reaperRace,
        new EndToEndSettings(endToEndRate, cellDuration, warmup, endToEndPoll), contentionKeepAlive, rounds,
        scenarioIds, quick, keepDatabase, drainMessages, sustained, scale, drainCells, console);
  }

  int maxPublishers() {
    return publisherCounts.stream().mapToInt(Integer::intValue).max().orElse(1);
  }

  private static List<Double> dutyCycles(String text, String option) throws UsageException {
    List<Double> values = new ArrayList<>();
    for (String part : text.split(",")) {
      double value;
      try {
        value = Double.parseDouble(part.trim());
      } catch (NumberFormatException e) {
        throw new UsageException(option + " takes numbers in (0, 1], was " + text);
      }
      try {
        MsgQueueConfig.builder().maintenanceDutyCycle(value); // the library's own bounds
      } catch (IllegalArgumentException e) {
        throw new UsageException(option + ": " + e.getMessage());
      }
      values.add(value);
    }
    return values;
  }

  private static String value(String[] args, int index, String option) throws UsageException {
    if (index >= args.length || args[index].startsWith("--")) {
      throw new UsageException(option + " needs a value");
    }
    return args[index];
  }

  private static Duration seconds(String text, String option) throws UsageException {
    try {
      double seconds = Double.parseDouble(text);
      if (seconds < 0 || seconds > 3600) {
        throw new UsageException(option + " must be between 0 and 3600 seconds, was " + text);
      }
      return Duration.ofNanos(Math.round(seconds * 1e9));
    } catch (NumberFormatException e) {
      throw new UsageException(option + " takes a number of seconds, was " + text);
    }
  }

  private static List<Integer> positiveInts(String text, String option, int max) throws UsageException {
    List<Integer> values = new ArrayList<>();
    for (String part : text.split(",")) {
      try {
        int value = Integer.parseInt(part.strip());
        if (value < 1 || value > max) {
          throw new UsageException(option + " values must be between 1 and " + max + ", was " + value);
        }
        values.add(value);
      } catch (NumberFormatException e) {
        throw new UsageException(option + " takes a comma-separated list of integers, was " + text);
      }
    }
    return List.copyOf(values);
  }
}
