package dev.msgqueue.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.awt.Color;
import java.util.List;
import org.junit.jupiter.api.Test;

class ThroughputChartTest {

  @Test
  void everyStrategyHasAColourOfItsOwn() {
    List<Color> colours = Strategies.CONTENTION_ORDER.stream().map(ThroughputChart::colorOf).toList();

    assertThat(colours).doesNotHaveDuplicates().hasSize(Strategies.CONTENTION_ORDER.size());
  }

  @Test
  void aStrategyWithoutAColourIsRefused() {
    assertThatThrownBy(() -> ThroughputChart.colorOf("new-strategy"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("new-strategy");
  }

  @Test
  void theXAxisNamesTheSharedPool() {
    assertThat(ThroughputChart.X_AXIS_TITLE)
        .contains("own connection", "shared pool of up to " + PublishContentionScenario.MSGQUEUE_POOL_SIZE);
  }
}
