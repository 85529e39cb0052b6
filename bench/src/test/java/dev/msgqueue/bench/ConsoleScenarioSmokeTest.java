package dev.msgqueue.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The console scenario at tiny sizes: it is left out of the default run, runs when named, and reports every view with
 * its percentiles and slowest statement. No figure is checked: quick sizes mean nothing.
 */
class ConsoleScenarioSmokeTest {
  private static final String URL_VARIABLE = "MSGQUEUE_TEST_JDBC_URL";

  @Test
  void notInTheDefaultRun() throws Exception {
    BenchOptions options = BenchOptions.parse("--quick");
    assertThat(BenchMain.scenarios(options)).extracting(Scenario::id).doesNotContain(ConsoleScenario.ID);
    assertThat(BenchMain.scenarios(BenchOptions.parse("--quick", "--scenarios", "console")))
        .extracting(Scenario::id).containsExactly(ConsoleScenario.ID);
  }

  @Test
  void aQuickRunReportsEveryView() throws Exception {
    Path results = Path.of(System.getProperty("msgqueue.bench.smokeResults", "target/smoke-results"))
        .resolveSibling("console-smoke-results");
    List<String> args = new ArrayList<>(List.of("--quick", "--scenarios", "console", "--results",
        results.toString()));
    String url = System.getProperty(URL_VARIABLE, System.getenv(URL_VARIABLE));
    if (url != null && !url.isBlank()) {
      args.addAll(List.of("--jdbc-url", url));
    }
    ByteArrayOutputStream stdout = new ByteArrayOutputStream();
    ByteArrayOutputStream stderr = new ByteArrayOutputStream();

    int exit = BenchMain.run(args.toArray(String[]::new), new PrintStream(stdout, true, StandardCharsets.UTF_8),
        new PrintStream(stderr, true, StandardCharsets.UTF_8));

    assertThat(exit).as("exit code; stderr:%n%s", stderr.toString(StandardCharsets.UTF_8)).isZero();
    assertThat(stdout.toString(StandardCharsets.UTF_8)).contains("Console: server-side time per view",
        "queues by depth, first page", "slowest statement per view");
    JsonNode rows = new ObjectMapper().readTree(results.resolve(BenchMain.RESULTS_JSON).toFile())
        .path("scenarios").path(ConsoleScenario.ID).path("rows");
    // The statistics read, every view, and the background reads meanwhile.
    assertThat(rows).hasSize(ConsoleScenario.views(ConsoleScenario.ConsoleSettings.QUICK,
        new ConsoleScenario.Fixtures("", "", "", 0, 0, "", 0)).size() + 2);
    for (JsonNode row : rows) {
      if (row.path("requests").asInt() > 0) {
        assertThat(row.path("p95Millis").asDouble()).as("p95 of %s", row.path("view")).isPositive();
      }
    }
    JsonNode depth = rows.get(5);
    assertThat(depth.path("view").asText()).isEqualTo("queues by depth, first page");
    // The clock and the page's queue rows: the counts come from the snapshot, not from a statement of this view.
    assertThat(depth.path("statementsPerRequest").asDouble()).isEqualTo(2.0);
    assertThat(depth.path("slowestStatement").asText()).isNotEmpty();
  }
}
