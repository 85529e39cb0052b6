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
import java.util.Locale;
import javax.imageio.ImageIO;

/**
 * The PNG chart of the scale scenario: one panel per curve (claim latency and statistics refresh against the backlog,
 * publish throughput against the number of queues, server transactions/s against idle subscribers), each against
 * its sizes as evenly spaced categories.
 */
final class ScaleChart {
  private static final int PANEL_WIDTH = 520;
  private static final int PANEL_HEIGHT = 320;
  private static final int LEFT = 80;
  private static final int RIGHT = 20;
  private static final int TOP = 70;
  private static final int BOTTOM = 50;
  private static final Color[] LINE_COLORS = {new Color(0x1F77B4), new Color(0xD62728)};

  private ScaleChart() { }

  /** One line of a panel: its name and a value per category. */
  record Line(String name, double[] values) { }

  static void write(Path file, ScaleScenario.ScaleResult result, String subtitle) throws IOException {
    BufferedImage image = new BufferedImage(2 * PANEL_WIDTH, 2 * PANEL_HEIGHT + 40, BufferedImage.TYPE_INT_RGB);
    Graphics2D g = image.createGraphics();
    try {
      g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
      g.setRenderingHint(RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
      g.setColor(Color.WHITE);
      g.fillRect(0, 0, image.getWidth(), image.getHeight());
      g.setColor(Color.BLACK);
      g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
      g.drawString(subtitle, 20, 20);

      List<ScaleScenario.BacklogRow> backlog = result.backlog();
      List<String> backlogLabels = backlog.stream().map(r -> count(r.messages())).toList();
      panel(g, 0, 30, "Claim of " + ScaleScenario.CLAIM_BATCH + " on one queue vs backlog", "ms", backlogLabels,
          List.of(new Line("p50", backlog.stream().mapToDouble(ScaleScenario.BacklogRow::claimP50Millis).toArray()),
              new Line("p99", backlog.stream().mapToDouble(ScaleScenario.BacklogRow::claimP99Millis).toArray())));
      panel(g, PANEL_WIDTH, 30, "All-queue statistics refresh vs backlog", "ms", backlogLabels,
          List.of(new Line("exact", backlog.stream().mapToDouble(ScaleScenario.BacklogRow::statisticsExactMillis)
              .toArray()), new Line("housekeeper tick", backlog.stream()
              .mapToDouble(ScaleScenario.BacklogRow::housekeeperStatisticsMillis).toArray())));
      List<ScaleScenario.QueuesRow> queues = result.queues().stream()
          .filter(r -> r.variant().equals(ScaleScenario.THROUGHPUT)).toList();
      panel(g, 0, 30 + PANEL_HEIGHT, "Publish throughput vs distinct queues", "messages / s",
          queues.stream().map(r -> count(r.queues())).toList(),
          List.of(new Line("msg/s", queues.stream().mapToDouble(ScaleScenario.QueuesRow::messagesPerSecond)
              .toArray())));
      List<ScaleScenario.SubscribersRow> subscribers = result.idleSubscribers();
      panel(g, PANEL_WIDTH, 30 + PANEL_HEIGHT, "Server transactions/s at idle vs subscribers", "transactions / s",
          subscribers.stream().map(r -> count(r.subscribers())).toList(),
          List.of(new Line("tx/s", subscribers.stream()
              .mapToDouble(ScaleScenario.SubscribersRow::serverTransactionsPerSecond).toArray())));
    } finally {
      g.dispose();
    }
    if (!ImageIO.write(image, "png", file.toFile())) {
      throw new IOException("no PNG writer in this JVM");
    }
  }

  private static void panel(Graphics2D g, int x0, int y0, String title, String unit, List<String> labels,
      List<Line> lines) {
    int plotWidth = PANEL_WIDTH - LEFT - RIGHT;
    int plotHeight = PANEL_HEIGHT - TOP - BOTTOM + 20;
    int top = y0 + TOP - 20;
    double max = lines.stream().flatMapToDouble(line -> java.util.Arrays.stream(line.values()))
        .filter(Double::isFinite).max().orElse(1);
    double ceiling = max > 0 ? max * 1.1 : 1;
    g.setColor(Color.BLACK);
    g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 13));
    g.drawString(title, x0 + LEFT, y0 + 25);
    g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
    FontMetrics metrics = g.getFontMetrics();
    for (int i = 0; i <= 4; i++) {
      double value = ceiling * i / 4;
      int y = top + plotHeight - (int) Math.round(value / ceiling * plotHeight);
      g.setColor(new Color(0xE0E0E0));
      g.drawLine(x0 + LEFT, y, x0 + LEFT + plotWidth, y);
      g.setColor(Color.BLACK);
      String label = value >= 100 ? String.format(Locale.ROOT, "%,.0f", value)
          : String.format(Locale.ROOT, "%.1f", value);
      g.drawString(label, x0 + LEFT - 6 - metrics.stringWidth(label), y + metrics.getAscent() / 2 - 1);
    }
    g.drawLine(x0 + LEFT, top, x0 + LEFT, top + plotHeight);
    g.drawLine(x0 + LEFT, top + plotHeight, x0 + LEFT + plotWidth, top + plotHeight);
    for (int i = 0; i < labels.size(); i++) {
      int x = xOf(x0, i, labels.size(), plotWidth);
      g.drawString(labels.get(i), x - metrics.stringWidth(labels.get(i)) / 2, top + plotHeight + 16);
    }
    Graphics2D rotated = (Graphics2D) g.create();
    rotated.rotate(-Math.PI / 2);
    rotated.drawString(unit, -(top + (plotHeight + metrics.stringWidth(unit)) / 2), x0 + 20);
    rotated.dispose();
    for (int l = 0; l < lines.size(); l++) {
      Line line = lines.get(l);
      g.setColor(LINE_COLORS[l % LINE_COLORS.length]);
      g.setStroke(new BasicStroke(2.5f));
      int previousX = -1;
      int previousY = -1;
      for (int i = 0; i < line.values().length; i++) {
        double value = line.values()[i];
        if (!Double.isFinite(value)) {
          previousX = -1;
          continue;
        }
        int x = xOf(x0, i, labels.size(), plotWidth);
        int y = top + plotHeight - (int) Math.round(value / ceiling * plotHeight);
        if (previousX >= 0) {
          g.drawLine(previousX, previousY, x, y);
        }
        g.fillOval(x - 4, y - 4, 8, 8);
        previousX = x;
        previousY = y;
      }
      g.drawString(line.name(), x0 + LEFT + plotWidth - 130, top + 14 + l * 16);
    }
    g.setStroke(new BasicStroke(1f));
  }

  private static int xOf(int x0, int index, int count, int plotWidth) {
    return count == 1 ? x0 + LEFT + plotWidth / 2 : x0 + LEFT + 30 + index * (plotWidth - 60) / (count - 1);
  }

  private static String count(int value) {
    if (value >= 1_000_000 && value % 1_000_000 == 0) {
      return value / 1_000_000 + "M";
    }
    if (value >= 1_000 && value % 1_000 == 0) {
      return value / 1_000 + "k";
    }
    return Integer.toString(value);
  }
}
