package dev.msgqueue.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;

/**
 * The CI smoke test of the benchmark: a {@code --quick} run (tiny sizes) on the test database server
 * ({@code MSGQUEUE_TEST_JDBC_URL}, else the embedded PostgreSQL), checking that it runs and that its output is well
 * formed and complete. It checks no performance figure: quick cells are far too short to mean anything.
 */
class BenchSmokeTest {
  private static final String URL_VARIABLE = "MSGQUEUE_TEST_JDBC_URL";
  private static final List<Integer> QUICK_PUBLISHERS = List.of(1, 4);

  @Test
  void quickRunWritesEveryCellInWellFormedResults() throws Exception {
    Path results = Path.of(System.getProperty("msgqueue.bench.smokeResults", "target/smoke-results"));
    // Every scenario, scale included (the default run leaves scale out).
    List<String> args = new ArrayList<>(List.of("--quick", "--drain-cells", DrainScenario.ALL_CELLS, "--scenarios",
        BenchOptions.ALL_SCENARIOS, "--results",
        results.toString()));
    String url = System.getProperty(URL_VARIABLE, System.getenv(URL_VARIABLE));
    if (url != null && !url.isBlank()) {
      args.addAll(List.of("--jdbc-url", url));
    }
    ByteArrayOutputStream stdout = new ByteArrayOutputStream();
    ByteArrayOutputStream stderr = new ByteArrayOutputStream();

    int exit = BenchMain.run(args.toArray(String[]::new), new PrintStream(stdout, true, StandardCharsets.UTF_8),
        new PrintStream(stderr, true, StandardCharsets.UTF_8));

    String out = stdout.toString(StandardCharsets.UTF_8);
    assertThat(exit).as("exit code; stderr:%n%s", stderr.toString(StandardCharsets.UTF_8)).isZero();
    assertThat(out).contains("1. Publish contention", "2. Batching", "3. Reaper race", "4. End to end", "5. Drain", "6. Sustained",
        "7. Drain repeated", "8. Scale", "Targets");

    JsonNode report = new ObjectMapper().readTree(results.resolve(BenchMain.RESULTS_JSON).toFile());
    assertThat(report.path("quick").asBoolean()).isTrue();
    assertThat(report.path("server").path("settings").path("version").asText()).startsWith("PostgreSQL");

    JsonNode cells = report.path("scenarios").path("publish-contention").path("cells");
    Set<String> seen = new HashSet<>();
    for (JsonNode cell : cells) {
      seen.add(cell.path("strategy").asText() + "x" + cell.path("publishers").asInt());
      assertThat(cell.path("messages").asLong()).as("messages of %s", cell).isPositive();
      assertThat(cell.path("messagesPerSecond").isNumber()).as("messagesPerSecond of %s", cell).isTrue();
      assertThat(cell.path("walBytesPerMessage").isNumber()).isTrue();
      assertThat(cell.path("lockWaitShare").asDouble()).isBetween(0.0, 1.0);
      assertThat(cell.path("failures").asLong()).as("failures of %s", cell).isZero();
    }
    Set<String> expected = new HashSet<>();
    for (String strategy : Strategies.CONTENTION_ORDER) {
      for (int publishers : QUICK_PUBLISHERS) {
        expected.add(strategy + "x" + publishers);
      }
    }
    assertThat(seen).isEqualTo(expected);
    assertThat(cells).hasSize(expected.size());

    JsonNode batching = report.path("scenarios").path("batching").path("rows");
    assertThat(batching).hasSize(4);
    batching.forEach(row -> assertThat(row.path("messages").asLong()).isPositive());
    JsonNode inserted = report.path("scenarios").path("batching").path("insertRows");
    assertThat(inserted).hasSize(4);
    inserted.forEach(row -> assertThat(row.path("messages").asLong()).isPositive());
    JsonNode copied = report.path("scenarios").path("batching").path("copyRows");
    assertThat(copied).hasSize(4);
    copied.forEach(row -> assertThat(row.path("messages").asLong()).isPositive());
    JsonNode pgmqSent = report.path("scenarios").path("batching").path("pgmqRows");
    assertThat(pgmqSent).hasSize(4);
    pgmqSent.forEach(row -> assertThat(row.path("messages").asLong()).isPositive());

    JsonNode race = report.path("scenarios").path("reaper-race").path("rows");
    assertThat(race).hasSize(ReaperRaceScenario.RUNS.size());
    race.forEach(row -> assertThat(row.path("published").asLong()).isPositive());

    JsonNode endToEnd = report.path("scenarios").path(EndToEndScenario.ID);
    // The quick mode's shorter poll interval is stated with the results, never silently passed off as the default.
    assertThat(endToEnd.path("pollIntervalSeconds").asDouble())
        .isEqualTo(EndToEndSettings.QUICK_POLL_INTERVAL.toMillis() / 1000.0);
    assertThat(endToEnd.path("libraryDefaultPollInterval").asBoolean()).isFalse();
    JsonNode endToEndRows = endToEnd.path("rows");
    assertThat(endToEndRows).hasSize(EndToEndScenario.RUNS.size());
    List<String> runs = new ArrayList<>();
    for (JsonNode row : endToEndRows) {
      runs.add(row.path("run").asText());
      assertThat(row.path("wakeups").asBoolean())
          .isEqualTo(row.path("run").asText().equals(EndToEndScenario.WAKEUPS_ON));
      assertThat(row.path("published").asLong()).as("published of %s", row).isPositive()
          .isEqualTo(row.path("due").asLong());
      // Every published message handled, exactly once, and acked (nothing left in the table).
      assertThat(row.path("handled").asLong()).as("handled of %s", row).isEqualTo(row.path("published").asLong());
      assertThat(row.path("notHandled").asLong()).isZero();
      assertThat(row.path("duplicates").asLong()).isZero();
      assertThat(row.path("publishFailures").asLong()).isZero();
      assertThat(row.path("drained").asBoolean()).as("drained within the timeout: %s", row).isTrue();
      assertThat(row.path("itemsLeft").asLong()).as("items left of %s", row).isZero();
      double p50 = row.path("p50Millis").asDouble();
      assertThat(p50).as("p50 of %s", row).isPositive();
      assertThat(row.path("p95Millis").asDouble()).isGreaterThanOrEqualTo(p50);
      assertThat(row.path("p99Millis").asDouble()).isGreaterThanOrEqualTo(row.path("p95Millis").asDouble());
      assertThat(row.path("maxMillis").asDouble()).isGreaterThanOrEqualTo(row.path("p99Millis").asDouble());
      assertThat(row.path("publishedPerSecond").asDouble()).isPositive();
      assertThat(row.path("handledPerSecond").asDouble()).isPositive();
    }
    assertThat(runs).containsExactly(EndToEndScenario.WAKEUPS_ON, EndToEndScenario.WAKEUPS_OFF);

    JsonNode drain = report.path("scenarios").path(DrainScenario.ID).path("rows");
    assertThat(drain).hasSize(DrainScenario.CELLS.size());
    for (JsonNode row : drain) {
      // Every consumer drains the whole preload, and the acked ones leave nothing behind.
      assertThat(row.path("drained").asBoolean()).as("drained: %s", row).isTrue();
      assertThat(row.path("messages").asLong()).as("messages of %s", row).isEqualTo(2_000);
      assertThat(row.path("left").asLong()).as("left of %s", row).isZero();
      assertThat(row.path("statementsPerMessage").asDouble()).isPositive();
      // Each cell was warmed right before it was measured, and the JIT's time during it is reported.
      assertThat(row.path("warmupDrains").asInt()).as("warm-up drains of %s", row)
          .isBetween(1, DrainScenario.MAX_WARMUP_DRAINS);
      assertThat(row.path("jitMillis").isIntegralNumber()).as("jitMillis of %s", row).isTrue();
      assertThat(row.path("jitMillis").asLong()).isNotNegative();
      // The consuming threads' CPU: the loops' own threads, the Subscriber's library threads.
      assertThat(row.path("clientCpuMicrosPerMessage").isNumber()).as("client CPU of %s", row).isTrue();
      assertThat(row.path("clientCpuMicrosPerMessage").asDouble()).as("client CPU of %s", row).isPositive();
    }
    // Every figure of the drain tables is a number or "-" (not measured), never NaN.
    assertThat(section(out, "5. Drain", "6. Sustained")).contains(DrainScenario.SUBSCRIBER + " ").doesNotContain("NaN");
    assertThat(section(out, "7. Drain repeated", "8. Scale")).contains("subscriber").doesNotContain("NaN");
    JsonNode sustained = report.path("scenarios").path(SustainedScenario.ID).path("rows");
    assertThat(sustained).hasSize(SustainedScenario.CELLS.size());
    sustained.forEach(row -> {
      assertThat(row.path("published").asLong()).isPositive();
      assertThat(row.path("handled").asLong()).isPositive();
      assertThat(row.path("publishFailures").asLong()).isZero();
      // Held transactions and takes delete what they handle and write no ack; lease mode's acks stay within a batch.
      if (row.path("mode").asText().equals("lease")) {
        assertThat(row.path("largestAck").asInt()).as("largest ack of %s", row)
            .isBetween(1, dev.msgqueue.Subscriber.DEFAULT_BATCH_SIZE);
      } else {
        assertThat(row.path("mode").asText()).isIn("transaction", "take");
        assertThat(row.path("largestAck").asInt()).as("largest ack of %s", row).isZero();
      }
    });
    List<String> drainCells = new ArrayList<>();
    drain.forEach(row -> drainCells.add(row.path("consumer").asText() + "x" + row.path("concurrency").asInt()));
    assertThat(drainCells).contains(DrainScenario.PGMQ_SHAPE + "x1", DrainScenario.PGMQ_SHAPE + "x4");
    JsonNode repeated = report.path("scenarios").path(DrainRepeatScenario.ID);
    JsonNode repeatedRuns = repeated.path("runs");
    assertThat(repeatedRuns).hasSize(DrainRepeatScenario.CELLS.size() * DrainRepeatScenario.RUNS);
    for (JsonNode run : repeatedRuns) {
      assertThat(run.path("drained").asBoolean()).as("drained: %s", run).isTrue();
      assertThat(run.path("messages").asLong()).as("messages of %s", run).isEqualTo(2_000);
      assertThat(run.path("jitMillis").isIntegralNumber()).as("jitMillis of %s", run).isTrue();
      assertThat(run.path("probeMillis").asDouble()).as("speed probe of %s", run).isPositive();
      assertThat(run.path("left").asLong()).as("left of %s", run).isZero();
      // The diagnostics saw the drain: its WAL, the item table's buffer accesses, a claim search as it started and
      // the drain's backends.
      assertThat(run.path("during").path("walBytes").asLong()).as("WAL of %s", run).isPositive();
      assertThat(run.path("during").path("heapBlocksHit").asLong()).as("heap blocks of %s", run).isPositive();
      assertThat(run.path("early").path("sharedBuffers").asLong()).as("early claim of %s", run).isPositive();
      assertThat(run.path("backendStates").size()).as("backend states of %s", run).isPositive();
    }
    JsonNode spreads = repeated.path("spreads");
    assertThat(spreads).hasSize(DrainRepeatScenario.CELLS.size());
    spreads.forEach(spread -> {
      assertThat(spread.path("slowestOverFastest").asDouble()).isGreaterThan(0).isLessThanOrEqualTo(1);
      assertThat(spread.path("steadyRuns").asInt()).isBetween(1, DrainRepeatScenario.RUNS);
      assertThat(spread.path("steadySlowestOverFastest").asDouble()).isGreaterThan(0).isLessThanOrEqualTo(1);
    });
    assertWellFormedCsv(results.resolve(DrainScenario.ID + ".csv"), DrainScenario.CELLS.size());
    assertWellFormedCsv(results.resolve(DrainRepeatScenario.ID + ".csv"),
        DrainRepeatScenario.CELLS.size() * DrainRepeatScenario.RUNS);
    assertWellFormedCsv(results.resolve(SustainedScenario.ID + ".csv"), SustainedScenario.CELLS.size());

    JsonNode durations = report.path("durations");
    List<String> timed = new ArrayList<>();
    durations.forEach(duration -> timed.add(duration.path("scenario").asText()));
    assertThat(timed).containsExactly(PublishContentionScenario.ID, BatchingScenario.ID, ReaperRaceScenario.ID,
        EndToEndScenario.ID, DrainScenario.ID, SustainedScenario.ID, DrainRepeatScenario.ID, ScaleScenario.ID);
    durations.forEach(duration -> {
      assertThat(duration.path("estimatedSeconds").asLong()).as("estimate of %s", duration).isPositive();
      assertThat(duration.path("seconds").isNumber()).as("seconds of %s", duration).isTrue();
    });

    assertThat(report.path("checks").size()).isGreaterThanOrEqualTo(6);
    assertThat(report.path("notRun").isArray()).isTrue();
    assertThat(report.path("notRun")).isEmpty();

    assertWellFormedCsv(results.resolve("publish-contention.csv"), expected.size());
    assertWellFormedCsv(results.resolve("batching.csv"), 16); // publishBatch, insert, COPY and pgmq-shape at 4 sizes
    assertWellFormedCsv(results.resolve("reaper-race.csv"), ReaperRaceScenario.RUNS.size());
    assertWellFormedCsv(results.resolve(EndToEndScenario.ID + ".csv"), EndToEndScenario.RUNS.size());

    BufferedImage chart = ImageIO.read(results.resolve(BenchMain.CHART_PNG).toFile());
    assertThat(chart).isNotNull();
    assertThat(chart.getWidth()).isGreaterThan(100);

    assertScaleResults(report.path("scenarios").path(ScaleScenario.ID), results);
  }

  /** The quick form of the scale scenario: every cell ran, every message was accounted for, and it drew its chart. */
  private static void assertScaleResults(JsonNode scale, Path results) throws Exception {
    ScaleSettings quick = ScaleSettings.QUICK;
    JsonNode backlog = scale.path("backlog");
    assertThat(backlog).hasSize(quick.backlogs().size());
    for (JsonNode row : backlog) {
      assertThat(row.path("claims").asInt()).as("claims of %s", row).isEqualTo(quick.claimSamples());
      // The hot queue's ready messages (8 in 10) all left through the timed claims and the drain.
      assertThat(row.path("drained").asLong() + quick.claimSamples() * (long) ScaleScenario.CLAIM_BATCH)
          .as("claimed of %s", row).isEqualTo(quick.hotQueueMessages() * 8L / 10);
      assertThat(row.path("statisticsQueues").asInt()).isEqualTo(ScaleScenario.BACKLOG_QUEUES + 1);
      assertThat(row.path("tableBytes").asLong()).isPositive();
      assertThat(row.path("housekeeperStatisticsMillis").asDouble()).isPositive();
      // Below the exact bound the gauges are the exact counts.
      assertThat(row.path("housekeeperStatisticsTotalError").asDouble()).isZero();
    }
    JsonNode queues = scale.path("queues");
    assertThat(queues).hasSize(2 * quick.queueCounts().size());
    for (JsonNode row : queues) {
      assertThat(row.path("messages").asLong()).as("messages of %s", row).isPositive();
      assertThat(row.path("failures").asLong()).as("failures of %s", row).isZero();
      if (row.path("variant").asText().equals(ScaleScenario.WRITES)) {
        // At most one write per queue per interval: never more writes of one queue than intervals begun.
        assertThat((double) row.path("maxWritesOfOneQueue").asLong()).as("writes of %s", row)
            .isPositive().isLessThanOrEqualTo(Math.ceil(row.path("intervals").asDouble()) + 1);
      } else {
        // Every row written just before: a keep-alive finds nothing to write.
        assertThat(row.path("serverQueueRowUpdates").asLong()).as("writes of %s", row).isZero();
      }
    }
    JsonNode housekeepingCells = scale.path("housekeeping");
    assertThat(housekeepingCells).hasSize(quick.maintenanceDutyCycles().size());
    for (JsonNode housekeeping : housekeepingCells) {
      assertThat(housekeeping.path("outcome").asText()).isEqualTo("COMPLETED");
      assertThat(housekeeping.path("reapedQueues").asInt()).isEqualTo(quick.idleQueues());
      assertThat(housekeeping.path("publishesDuring").asInt()).isPositive();
    }
    assertThat(housekeepingCells.get(0).path("dutyCycle").asDouble())
        .isEqualTo(quick.maintenanceDutyCycles().get(0));
    JsonNode subscribers = scale.path("idleSubscribers");
    assertThat(subscribers).hasSize(quick.subscriberCounts().size());
    for (JsonNode row : subscribers) {
      assertThat(row.path("delivered").asInt()).as("delivered of %s", row).isEqualTo(quick.deliveries());
      assertThat(row.path("libraryThreads").asInt()).isPositive();
    }
    List<String> lines = Files.readAllLines(results.resolve(ScaleScenario.ID + ".csv"));
    assertThat(lines.get(0)).isEqualTo("curve,x,metric,value");
    lines.forEach(line -> assertThat(line.split(",", -1)).as(line).hasSize(4));
    BufferedImage chart = ImageIO.read(results.resolve(ScaleScenario.CHART_PNG).toFile());
    assertThat(chart).isNotNull();
    assertThat(chart.getWidth()).isGreaterThan(100);
  }

  /** The part of {@code out} from the line starting with {@code from} up to the one starting with {@code to}. */
  private static String section(String out, String from, String to) {
    int start = out.indexOf(System.lineSeparator() + from);
    int end = out.indexOf(System.lineSeparator() + to, start + 1);
    assertThat(start).as("%s in the output", from).isNotNegative();
    assertThat(end).as("%s in the output", to).isGreaterThan(start);
    return out.substring(start, end);
  }

  private static void assertWellFormedCsv(Path file, int rows) throws Exception {
    List<String> lines = Files.readAllLines(file);
    assertThat(lines).as(file.toString()).hasSize(rows + 1);
    int columns = lines.get(0).split(",", -1).length;
    for (String line : lines) {
      assertThat(line.split(",", -1)).as("%s: %s", file, line).hasSize(columns);
      assertThat(line).doesNotContain("NaN");
    }
  }
}
