package dev.msgqueue.bench;

import java.util.Arrays;
import java.util.List;

/** Per-thread latency samples (nanoseconds), merged once a cell is over; exact percentiles, no bucketing. */
final class Latencies {
  private long[] samples = new long[4096];
  private int size;

  void record(long nanos) {
    if (size == samples.length) {
      samples = Arrays.copyOf(samples, size * 2);
    }
    samples[size++] = nanos;
  }

  int size() {
    return size;
  }

  /** All samples of {@code parts} in one. */
  static Latencies merge(List<Latencies> parts) {
    Latencies merged = new Latencies();
    merged.samples = new long[Math.max(1, parts.stream().mapToInt(Latencies::size).sum())];
    for (Latencies part : parts) {
      System.arraycopy(part.samples, 0, merged.samples, merged.size, part.size);
      merged.size += part.size;
    }
    return merged;
  }

  /** Percentiles of the samples, in microseconds. */
  Summary summary() {
    long[] sorted = Arrays.copyOf(samples, size);
    Arrays.sort(sorted);
    return new Summary(percentileMicros(sorted, 0.50), percentileMicros(sorted, 0.99));
  }

  /**
   * Nearest-rank percentiles of the samples for each of {@code quantiles}, in milliseconds (one sort for all); NaN
   * when there are no samples. Quantile 1.0 is the maximum.
   */
  double[] percentilesMillis(double... quantiles) {
    long[] sorted = Arrays.copyOf(samples, size);
    Arrays.sort(sorted);
    double[] millis = new double[quantiles.length];
    for (int i = 0; i < quantiles.length; i++) {
      millis[i] = percentileMicros(sorted, quantiles[i]) / 1_000.0;
    }
    return millis;
  }

  /** Nearest-rank percentile; NaN when there are no samples. */
  private static double percentileMicros(long[] sorted, double quantile) {
    if (sorted.length == 0) {
      return Double.NaN;
    }
    int rank = (int) Math.ceil(quantile * sorted.length);
    return sorted[Math.max(0, rank - 1)] / 1_000.0;
  }

  record Summary(double p50Micros, double p99Micros) { }
}
