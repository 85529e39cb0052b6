package dev.msgqueue.bench;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.FontMetrics;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import javax.imageio.ImageIO;

/**
 * The PNG chart of scenario 1: messages/s against the number of publishers, one line per strategy. Drawn with
 * java.awt (headless) rather than a chart library: five lines and two axes do not need one.
 */
final class ThroughputChart {
  private static final int WIDTH = 900;
  private static final int HEIGHT = 560;
  private static final int LEFT = 90;
  private static final int RIGHT = 210;
  private static final int TOP = 60;
  private static final int BOTTOM = 70;
  /** One colour per strategy, so the legend names each line unambiguously; grey for the ceiling, which is no design. */
  private static final Map<String, Color> COLORS = Map.of(
      Strategies.UPSERT_PER_PUBLISH, new Color(0xD62728),
      Strategies.OPTIMISTIC_HEAL, new Color(0xFF7F0E),
      Strategies.MSGQUEUE_UNCOALESCED, new Color(0x2CA02C),
      Strategies.MSGQUEUE, new Color(0x1F77B4),
      Strategies.NO_FK_CEILING, new Color(0x7F7F7F));
  /** The x-axis title: msgqueue's coalesced publishes run on a shared pool, every other strategy on its own connections. */
  static final String X_AXIS_TITLE = "concurrent publisher threads (each on its own connection; msgqueue: a shared"
      + " pool of up to " + PublishContentionScenario.MSGQUEUE_POOL_SIZE + ")";

  private ThroughputChart() { }

  static void write(Path file, PublishContentionScenario.ContentionResult result, String subtitle) throws IOException {
    List<Integer> publisherCounts = result.cells().stream().map(PublishContentionScenario.Cell::publishers)
        .distinct().sorted().toList();
    List<String> strategies = Strategies.CONTENTION_ORDER;
    double max = result.cells().stream().mapToDouble(PublishContentionScenario.Cell::messagesPerSecond)
        .filter(Double::isFinite).max().orElse(1);
    double step = ChartAxes.niceStep(max / 5);
    double top = Math.max(step, Math.ceil(max / step) * step);

    BufferedImage image = new BufferedImage(WIDTH, HEIGHT, BufferedImage.TYPE_INT_RGB);
    Graphics2D g = image.createGraphics();
    try {
      g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
      g.setRenderingHint(RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
      g.setColor(Color.WHITE);
      g.fillRect(0, 0, WIDTH, HEIGHT);
      int plotWidth = WIDTH - LEFT - RIGHT;
      int plotHeight = HEIGHT - TOP - BOTTOM;

      g.setColor(Color.BLACK);
      g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 16));
      g.drawString("Publish throughput to one auto-deleted queue", LEFT, 28);
      g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
      g.drawString(subtitle, LEFT, 46);

      // Horizontal grid and y labels.
      g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
      FontMetrics metrics = g.getFontMetrics();
      for (double value = 0; value <= top + step / 2; value += step) {
        int y = TOP + plotHeight - (int) Math.round(value / top * plotHeight);
        g.setColor(new Color(0xE0E0E0));
        g.drawLine(LEFT, y, LEFT + plotWidth, y);
        g.setColor(Color.BLACK);
        String label = ChartAxes.label(value);
        g.drawString(label, LEFT - 8 - metrics.stringWidth(label), y + metrics.getAscent() / 2 - 1);
      }
      // Publisher counts are evenly spaced categories: 1, 8, 32, 64 on a linear axis would crowd the left.
      for (int i = 0; i < publisherCounts.size(); i++) {
        int x = xOf(i, publisherCounts.size(), plotWidth);
        String label = Integer.toString(publisherCounts.get(i));
        g.drawLine(x, TOP + plotHeight, x, TOP + plotHeight + 5);
        g.drawString(label, x - metrics.stringWidth(label) / 2, TOP + plotHeight + 20);
      }
      g.drawLine(LEFT, TOP, LEFT, TOP + plotHeight);
      g.drawLine(LEFT, TOP + plotHeight, LEFT + plotWidth, TOP + plotHeight);
      String xTitle = X_AXIS_TITLE;
      g.drawString(xTitle, LEFT + (plotWidth - metrics.stringWidth(xTitle)) / 2, HEIGHT - 22);
      Graphics2D rotated = (Graphics2D) g.create();
      rotated.rotate(-Math.PI / 2);
      String yTitle = "messages / s";
      rotated.drawString(yTitle, -(TOP + (plotHeight + metrics.stringWidth(yTitle)) / 2), 20);
      rotated.dispose();

      for (int s = 0; s < strategies.size(); s++) {
        String strategy = strategies.get(s);
        Color color = colorOf(strategy);
        g.setColor(color);
        g.setStroke(new BasicStroke(2.5f));
        int previousX = -1;
        int previousY = -1;
        for (int i = 0; i < publisherCounts.size(); i++) {
          PublishContentionScenario.Cell cell = result.cell(strategy, publisherCounts.get(i));
          if (cell == null || !Double.isFinite(cell.messagesPerSecond())) {
            previousX = -1;
            continue;
          }
          int x = xOf(i, publisherCounts.size(), plotWidth);
          int y = TOP + plotHeight - (int) Math.round(cell.messagesPerSecond() / top * plotHeight);
          if (previousX >= 0) {
            g.drawLine(previousX, previousY, x, y);
          }
          g.fillOval(x - 4, y - 4, 8, 8);
          previousX = x;
          previousY = y;
        }
        int legendY = TOP + 10 + s * 24;
        g.drawLine(LEFT + plotWidth + 20, legendY, LEFT + plotWidth + 48, legendY);
        g.fillOval(LEFT + plotWidth + 30, legendY - 4, 8, 8);
        g.setColor(Color.BLACK);
        g.drawString(strategy, LEFT + plotWidth + 56, legendY + 5);
      }
    } finally {
      g.dispose();
    }
    if (!ImageIO.write(image, "png", file.toFile())) {
      throw new IOException("no PNG writer in this JVM");
    }
  }

  /** The line colour of a strategy of {@link Strategies#CONTENTION_ORDER}. */
  static Color colorOf(String strategy) {
    Color color = COLORS.get(strategy);
    if (color == null) {
      throw new IllegalArgumentException("no chart colour for strategy " + strategy);
    }
    return color;
  }

  private static int xOf(int index, int count, int plotWidth) {
    return count == 1 ? LEFT + plotWidth / 2 : LEFT + 30 + index * (plotWidth - 60) / (count - 1);
  }
}
