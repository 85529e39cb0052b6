package dev.msgqueue.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class ScenarioSelectionTest {

  @Test
  void theDefaultRunLeavesTheLongDiagnosticScenariosOut() throws Exception {
    List<String> ids = BenchMain.scenarios(BenchOptions.parse()).stream().map(Scenario::id).toList();

    assertThat(ids).containsExactly(PublishContentionScenario.ID, BatchingScenario.ID, ReaperRaceScenario.ID,
        EndToEndScenario.ID, DrainScenario.ID, SustainedScenario.ID);
    assertThat(BenchMain.scenarios(BenchOptions.parse("--scenarios", "drain-repeat,scale")).stream()
        .map(Scenario::id)).containsExactly(DrainRepeatScenario.ID, ScaleScenario.ID);
  }

  @Test
  void allAddsScaleAndAnIdRunsAlone() throws Exception {
    assertThat(BenchMain.scenarios(BenchOptions.parse("--scenarios", "all")).stream().map(Scenario::id))
        .hasSize(8).endsWith(ScaleScenario.ID);
    assertThat(BenchMain.scenarios(BenchOptions.parse("--scenarios", "scale")).stream().map(Scenario::id))
        .containsExactly(ScaleScenario.ID);
    assertThatThrownBy(() -> BenchMain.scenarios(BenchOptions.parse("--scenarios", "all,scale")))
        .isInstanceOf(BenchOptions.UsageException.class).hasMessageContaining("all");
  }

  @Test
  void theDefaultRunIsEstimatedAtAboutTenMinutes() throws Exception {
    Duration estimate = BenchMain.scenarios(BenchOptions.parse()).stream().map(Scenario::estimate)
        .reduce(Duration.ZERO, Duration::plus);

    assertThat(estimate).isBetween(Duration.ofMinutes(9), Duration.ofMinutes(13));
  }

  @Test
  void durationsReadInMinutes() {
    assertThat(BenchMain.minutes(Duration.ofSeconds(40))).isEqualTo("40 s");
    assertThat(BenchMain.minutes(Duration.ofSeconds(580))).isEqualTo("9 min 40 s");
  }
}
