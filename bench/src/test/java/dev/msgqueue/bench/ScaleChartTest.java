package dev.msgqueue.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.awt.image.BufferedImage;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;

class ScaleChartTest {

  @Test
  void drawsOnePanelPerCurveWithALogarithmicOneBesideLinearOnes() throws Exception {
    Path file = Files.createDirectories(Path.of("target")).resolve("scale-chart-test.png");
    ScaleChart.Line exact = new ScaleChart.Line("exact", new double[] {322, 3_308, 14_146});
    ScaleChart.Line read = new ScaleChart.Line("read", new double[] {25.7, 13.1, 2.2});

    ScaleChart.write(file, "test", List.of(
        new ScaleChart.Panel("linear", "x", "y", List.of("10k", "1M", "10M"), List.of(exact, read), false),
        new ScaleChart.Panel("log", "x", "y", List.of("10k", "1M", "10M"), List.of(exact, read), true),
        new ScaleChart.Panel("one point", "x", "y", List.of("1"), List.of(new ScaleChart.Line("a",
            new double[] {Double.NaN})), false)));

    BufferedImage image = ImageIO.read(file.toFile());
    assertThat(image.getWidth()).isEqualTo(2 * ScaleChart.PANEL_WIDTH);
    assertThat(image.getHeight()).isGreaterThan(2 * ScaleChart.PANEL_HEIGHT);
  }
}
