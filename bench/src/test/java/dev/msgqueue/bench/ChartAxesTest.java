package dev.msgqueue.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

class ChartAxesTest {

  @Test
  void linearTicksAreRoundStepsFromZeroPastTheLargestValue() {
    // The values of a scale run whose quartered axis read 0, 915, 1,372, 1,829.
    assertThat(ChartAxes.linearTicks(1_663, 4)).containsExactly(0.0, 500.0, 1_000.0, 1_500.0, 2_000.0);
    assertThat(ChartAxes.linearTicks(113.1, 4)).containsExactly(0.0, 50.0, 100.0, 150.0);
    assertThat(ChartAxes.linearTicks(4.0, 4)).containsExactly(0.0, 1.0, 2.0, 3.0, 4.0);
  }

  @Test
  void logarithmicTicksArePowersOfTenAroundTheValues() {
    assertThat(ChartAxes.decades(2.2, 14_146)).containsExactly(1.0, 10.0, 100.0, 1_000.0, 10_000.0, 100_000.0);
    assertThat(ChartAxes.decades(10, 100)).containsExactly(10.0, 100.0);
    assertThat(ChartAxes.decades(5, 5)).containsExactly(1.0, 10.0);
  }

  @Test
  void labelsAreShort() {
    assertThat(List.of(0.0, 0.5, 25.0, 1_000.0, 1_500.0, 10_000.0, 100_000.0, 1_000_000.0, 2_500_000.0).stream()
        .map(ChartAxes::label).toList())
        .containsExactly("0", "0.5", "25", "1k", "1.5k", "10k", "100k", "1M", "2.5M");
  }
}
