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

  /** Percentiles of all samples of {@code parts}, in microseconds. */
  static Summary summarize(List<Latencies> parts) {
    int total = parts.stream().mapToInt(Latencies::size).sum();
    long[] all = new long[total];
    int offset = 0;
    for (Latencies part : parts) {
      System.arraycopy(part.samples, 0, all, offset, part.size);
      offset += part.size;
    }
    Arrays.sort(all);
    return new Summary(percentileMicros(all, 0.50), percentileMicros(all, 0.99));
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
