package dev.msgqueue.bench;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.FontMetrics;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.Stroke;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import javax.imageio.ImageIO;

/**
 * The PNG chart of the scale scenario: one panel per curve (claim latency and statistics refresh against the backlog,
 * publish throughput against the number of queues, server transactions/s against idle subscribers), each against
 * its sizes as evenly spaced categories. Every axis has a title and round tick values; each line has a legend entry
 * with its colour, dash and marker. The statistics panel is logarithmic: the exact refresh takes seconds where the
 * housekeeper's read takes milliseconds, and on a linear axis the second lies flat on zero.
 */
final class ScaleChart {
  static final int PANEL_WIDTH = 560;
  static final int PANEL_HEIGHT = 380;
  private static final int HEADER = 34;
  private static final int LEFT = 84;
  private static final int RIGHT = 24;
  private static final int TOP = 72;
  private static final int BOTTOM = 62;
  private static final Color[] LINE_COLORS = {new Color(0x1F77B4), new Color(0xD62728)};
  private static final Stroke[] LINE_STROKES = {
      new BasicStroke(2.5f),
      new BasicStroke(2.5f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_ROUND, 10f, new float[] {9f, 5f}, 0f)};
  private static final Color GRID = new Color(0xE3E3E3);

  private ScaleChart() { }

  /** One line of a panel: its name and a value per category. */
  record Line(String name, double[] values) { }

  /**
   * One panel: a title, its axes' titles, the categories along x, its lines, and whether y is logarithmic.
   */
  record Panel(String title, String xTitle, String yTitle, List<String> categories, List<Line> lines,
      boolean logarithmic) { }

  static void write(Path file, ScaleScenario.ScaleResult result, String subtitle) throws IOException {
    List<ScaleScenario.BacklogRow> backlog = result.backlog();
    List<String> backlogLabels = backlog.stream().map(r -> ChartAxes.label(r.messages())).toList();
    String backlogAxis = "messages in the table (over " + ScaleScenario.BACKLOG_QUEUES + " queues)";
    List<ScaleScenario.QueuesRow> queues = result.queues().stream()
        .filter(r -> r.variant().equals(ScaleScenario.THROUGHPUT)).toList();
    List<ScaleScenario.SubscribersRow> subscribers = result.idleSubscribers();
    write(file, subtitle, List.of(
        new Panel("Claim of " + ScaleScenario.CLAIM_BATCH + " from one queue", backlogAxis, "claim latency, ms",
            backlogLabels, List.of(
                new Line("p50", backlog.stream().mapToDouble(ScaleScenario.BacklogRow::claimP50Millis).toArray()),
                new Line("p99", backlog.stream().mapToDouble(ScaleScenario.BacklogRow::claimP99Millis).toArray())),
            false),
        new Panel("Statistics of every queue", backlogAxis, "ms per refresh (log scale)", backlogLabels, List.of(
            new Line("exact count (a full scan)", backlog.stream()
                .mapToDouble(ScaleScenario.BacklogRow::statisticsExactMillis).toArray()),
            new Line("the housekeeper's read, per tick", backlog.stream()
                .mapToDouble(ScaleScenario.BacklogRow::housekeeperStatisticsMillis).toArray())),
            true),
        new Panel("Publish throughput, " + (queues.isEmpty() ? "" : queues.get(0).threads() + " threads, ")
            + "each to a random queue", "existing auto-deleted queues", "messages / s",
            queues.stream().map(r -> ChartAxes.label(r.queues())).toList(),
            List.of(new Line("messages / s", queues.stream()
                .mapToDouble(ScaleScenario.QueuesRow::messagesPerSecond).toArray())),
            false),
        new Panel("Server load of idle subscribers", "idle subscribers (one queue each, one pool)",
            "server transactions / s", subscribers.stream().map(r -> ChartAxes.label(r.subscribers())).toList(),
            List.of(new Line("transactions / s", subscribers.stream()
                .mapToDouble(ScaleScenario.SubscribersRow::serverTransactionsPerSecond).toArray())),
            false)));
  }

  /** Draws {@code panels} two per row under {@code subtitle}. */
  static void write(Path file, String subtitle, List<Panel> panels) throws IOException {
    int rows = (panels.size() + 1) / 2;
    BufferedImage image = new BufferedImage(2 * PANEL_WIDTH, HEADER + rows * PANEL_HEIGHT, BufferedImage.TYPE_INT_RGB);
    Graphics2D g = image.createGraphics();
    try {
      g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
      g.setRenderingHint(RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
      g.setColor(Color.WHITE);
      g.fillRect(0, 0, image.getWidth(), image.getHeight());
      g.setColor(Color.BLACK);
      g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
      g.drawString(subtitle, 20, 22);
      for (int i = 0; i < panels.size(); i++) {
        panel(g, (i % 2) * PANEL_WIDTH, HEADER + (i / 2) * PANEL_HEIGHT, panels.get(i));
      }
    } finally {
      g.dispose();
    }
    if (!ImageIO.write(image, "png", file.toFile())) {
      throw new IOException("no PNG writer in this JVM");
    }
  }

  private static void panel(Graphics2D g, int x0, int y0, Panel panel) {
    int plotLeft = x0 + LEFT;
    int plotWidth = PANEL_WIDTH - LEFT - RIGHT;
    int plotTop = y0 + TOP;
    int plotHeight = PANEL_HEIGHT - TOP - BOTTOM;
    double[] finite = panel.lines().stream().flatMapToDouble(line -> Arrays.stream(line.values()))
        .filter(Double::isFinite).filter(v -> !panel.logarithmic() || v > 0).toArray();
    double max = Arrays.stream(finite).max().orElse(1);
    double min = Arrays.stream(finite).min().orElse(1);
    List<Double> ticks = panel.logarithmic() ? ChartAxes.decades(min, max) : ChartAxes.linearTicks(max, 4);
    Scale scale = panel.logarithmic()
        ? new Scale(Math.log10(ticks.get(0)), Math.log10(ticks.get(ticks.size() - 1)), true)
        : new Scale(0, ticks.get(ticks.size() - 1), false);

    g.setColor(Color.BLACK);
    g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 14));
    g.drawString(panel.title(), plotLeft, y0 + 22);
    g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
    FontMetrics metrics = g.getFontMetrics();
    legend(g, plotLeft, y0 + 44, panel.lines(), metrics);

    for (double tick : ticks) {
      int y = plotTop + plotHeight - (int) Math.round(scale.fraction(tick) * plotHeight);
      g.setColor(GRID);
      g.drawLine(plotLeft, y, plotLeft + plotWidth, y);
      g.setColor(Color.BLACK);
      String label = ChartAxes.label(tick);
      g.drawString(label, plotLeft - 8 - metrics.stringWidth(label), y + metrics.getAscent() / 2 - 1);
    }
    g.drawLine(plotLeft, plotTop, plotLeft, plotTop + plotHeight);
    g.drawLine(plotLeft, plotTop + plotHeight, plotLeft + plotWidth, plotTop + plotHeight);
    List<String> categories = panel.categories();
    for (int i = 0; i < categories.size(); i++) {
      int x = xOf(plotLeft, i, categories.size(), plotWidth);
      g.drawLine(x, plotTop + plotHeight, x, plotTop + plotHeight + 5);
      g.drawString(categories.get(i), x - metrics.stringWidth(categories.get(i)) / 2, plotTop + plotHeight + 20);
    }
    g.drawString(panel.xTitle(), plotLeft + (plotWidth - metrics.stringWidth(panel.xTitle())) / 2,
        plotTop + plotHeight + 42);
    Graphics2D rotated = (Graphics2D) g.create();
    rotated.rotate(-Math.PI / 2);
    rotated.drawString(panel.yTitle(), -(plotTop + (plotHeight + metrics.stringWidth(panel.yTitle())) / 2), x0 + 22);
    rotated.dispose();

    for (int l = 0; l < panel.lines().size(); l++) {
      Line line = panel.lines().get(l);
      g.setColor(LINE_COLORS[l % LINE_COLORS.length]);
      int previousX = -1;
      int previousY = -1;
      for (int i = 0; i < line.values().length; i++) {
        double value = line.values()[i];
        if (!Double.isFinite(value) || (panel.logarithmic() && value <= 0)) {
          previousX = -1;
          continue;
        }
        int x = xOf(plotLeft, i, categories.size(), plotWidth);
        int y = plotTop + plotHeight - (int) Math.round(scale.fraction(value) * plotHeight);
        if (previousX >= 0) {
          g.setStroke(LINE_STROKES[l % LINE_STROKES.length]);
          g.drawLine(previousX, previousY, x, y);
        }
        marker(g, l, x, y);
        previousX = x;
        previousY = y;
      }
    }
    g.setStroke(new BasicStroke(1f));
  }

  /** One entry per line, side by side: a sample of the line (colour, dash, marker) and its name. */
  private static void legend(Graphics2D g, int x, int y, List<Line> lines, FontMetrics metrics) {
    int at = x;
    for (int l = 0; l < lines.size(); l++) {
      g.setColor(LINE_COLORS[l % LINE_COLORS.length]);
      g.setStroke(LINE_STROKES[l % LINE_STROKES.length]);
      g.drawLine(at, y - 4, at + 34, y - 4);
      marker(g, l, at + 17, y - 4);
      g.setStroke(new BasicStroke(1f));
      g.setColor(Color.BLACK);
      g.drawString(lines.get(l).name(), at + 42, y);
      at += 42 + metrics.stringWidth(lines.get(l).name()) + 24;
    }
  }

  /** A filled circle for the first line, a filled square for the second. */
  private static void marker(Graphics2D g, int line, int x, int y) {
    if (line % 2 == 0) {
      g.fillOval(x - 4, y - 4, 9, 9);
    } else {
      g.fillRect(x - 4, y - 4, 9, 9);
    }
  }

  private static int xOf(int plotLeft, int index, int count, int plotWidth) {
    return count == 1 ? plotLeft + plotWidth / 2 : plotLeft + 36 + index * (plotWidth - 72) / (count - 1);
  }

  /** Where a value falls between the axis's bottom and top (0 to 1), linear or logarithmic. */
  private record Scale(double bottom, double top, boolean logarithmic) {
    double fraction(double value) {
      double position = logarithmic ? Math.log10(value) : value;
      return (position - bottom) / (top - bottom);
    }
  }
}
