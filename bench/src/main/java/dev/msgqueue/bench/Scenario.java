package dev.msgqueue.bench;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Duration;

/**
 * One scenario of the benchmark. {@link BenchMain#allScenarios} lists them in the order they run; a new scenario is
 * one more implementation added there.
 */
interface Scenario {
  /** The key of its results in results.json and the stem of its CSV file, e.g. {@code publish-contention}. */
  String id();

  String title();

  /** How many progress steps (cells) it reports. */
  int steps();

  /** A rough duration, for the up-front estimate on stderr. */
  Duration estimate();

  Result run(BenchContext context) throws Exception;

  /** A scenario's results: serialized into results.json as they are, plus a table and a CSV file. */
  interface Result {
    void printTable(PrintStream out);

    void writeCsv(Path file) throws IOException;
  }
}
