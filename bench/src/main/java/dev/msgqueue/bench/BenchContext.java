package dev.msgqueue.bench;

import java.io.PrintStream;
import org.jooq.JSONB;

/** What every scenario runs with: the database, the options, and the progress line on stderr. */
final class BenchContext {
  /** The same payload for every strategy and scenario: a typical small event. */
  static final JSONB PAYLOAD = JSONB.valueOf(
      "{\"event\": \"order.created\", \"tenant\": \"tenant-0042\", \"orderId\": 1234567, "
      + "\"items\": [{\"sku\": \"A-100\", \"qty\": 2}], \"source\": \"bench\"}");

  private final BenchDatabase database;
  private final BenchOptions options;
  private final PrintStream progress;
  private final int totalSteps;
  private final long startNanos = System.nanoTime();
  private int step;

  BenchContext(BenchDatabase database, BenchOptions options, PrintStream progress, int totalSteps) {
    this.database = database;
    this.options = options;
    this.progress = progress;
    this.totalSteps = totalSteps;
  }

  BenchDatabase database() {
    return database;
  }

  BenchOptions options() {
    return options;
  }

  /** Announces the next cell on stderr (stdout carries only the report). */
  void step(String description) {
    step++;
    progress.printf("[%3d/%d %5.0fs] %s%n", step, totalSteps, (System.nanoTime() - startNanos) / 1e9, description);
    progress.flush();
  }
}
