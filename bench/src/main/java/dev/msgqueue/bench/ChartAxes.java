package dev.msgqueue.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Tick values and their labels for the benchmark's charts: round steps (1, 2 or 5 times a power of ten) on a linear
 * axis, powers of ten on a logarithmic one, and labels short enough to read at a glance (1.5k, 10k, 1M).
 */
final class ChartAxes {
  private ChartAxes() { }

  /** 1, 2 or 5 times a power of ten, at least {@code rough}. */
  static double niceStep(double rough) {
    if (!(rough > 0) || !Double.isFinite(rough)) {
      return 1;
    }
    double magnitude = Math.pow(10, Math.floor(Math.log10(rough)));
    for (double factor : new double[] {1, 2, 5, 10}) {
      if (factor * magnitude >= rough * (1 - 1e-9)) {
        return factor * magnitude;
      }
    }
    return 10 * magnitude;
  }

  /**
   * Ticks of a linear axis from 0 to at least {@code max}, about {@code count} of them, at a round step: the last
   * one is the axis's top.
   */
  static List<Double> linearTicks(double max, int count) {
    double step = niceStep((max > 0 && Double.isFinite(max) ? max : 1) / count);
    List<Double> ticks = new ArrayList<>();
    for (int i = 0; ; i++) {
      double value = i * step;
      ticks.add(value);
      if (value >= max * (1 - 1e-9)) {
        return ticks;
      }
    }
  }

  /** The powers of ten around {@code min} and {@code max} (both positive): the ticks of a logarithmic axis. */
  static List<Double> decades(double min, double max) {
    double low = Math.floor(Math.log10(min > 0 && Double.isFinite(min) ? min : 1));
    double high = Math.ceil(Math.log10(max > 0 && Double.isFinite(max) ? max : 1));
    if (high <= low) {
      high = low + 1;
    }
    List<Double> ticks = new ArrayList<>();
    for (double exponent = low; exponent <= high; exponent++) {
      ticks.add(Math.pow(10, exponent));
    }
    return ticks;
  }

  /** A tick label: 0.5, 25, 1.5k, 10k, 2.5M; no more decimals than the value has, up to two. */
  static String label(double value) {
    double magnitude = Math.abs(value);
    if (magnitude >= 1_000_000) {
      return trimmed(value / 1_000_000) + "M";
    }
    if (magnitude >= 1_000) {
      return trimmed(value / 1_000) + "k";
    }
    return trimmed(value);
  }

  private static String trimmed(double value) {
    String text = String.format(Locale.ROOT, "%.2f", value);
    text = text.replaceAll("0+$", "");
    return text.endsWith(".") ? text.substring(0, text.length() - 1) : text;
  }
}
