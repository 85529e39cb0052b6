package dev.msgqueue.bench;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Scenario 7: whether consumption speed stays in a long-lived JVM. The same preloaded count is drained {@value #RUNS}
 * times in a row in this one JVM, alternating the Subscriber (default mode, concurrency 4) and the repository's
 * claim+ack loop on one thread, each drain on a fresh table and a pool of its own, after one unmeasured warm-up drain
 * of each. Reports every run and, per consumer, the slowest run over the fastest (target at least
 * {@value #TARGET_SLOWEST_OVER_FASTEST}).
 */
final class DrainRepeatScenario implements Scenario {
  static final String ID = "drain-repeat";
  static final int RUNS = 10;
  static final double TARGET_SLOWEST_OVER_FASTEST = 0.85;
  static final List<DrainScenario.Cell> CELLS = List.of(
      new DrainScenario.Cell(DrainScenario.SUBSCRIBER, 4), new DrainScenario.Cell(DrainScenario.REPOSITORY, 1));

  private final int messages;
  private final DrainScenario drains;

  DrainRepeatScenario(int messages) {
    this.messages = messages;
    this.drains = new DrainScenario(messages);
  }

  @Override
  public String id() {
    return ID;
  }

  @Override
  public String title() {
    return "7. Drain repeated: " + messages + " preloaded messages drained " + RUNS + " times in one JVM per consumer,"
        + " consumers alternating, after one unmeasured warm-up drain of each";
  }

  @Override
  public int steps() {
    return CELLS.size() * RUNS;
  }

  @Override
  public Duration estimate() {
    return Duration.ofMillis(CELLS.size() * (RUNS + 1) * (1_000 + messages / 10L));
  }

  @Override
  public Result run(BenchContext context) throws Exception {
    BenchDatabase database = context.database();
    for (DrainScenario.Cell cell : CELLS) {
      DrainScenario.preload(database, cell, messages);
      drains.drain(database, cell, messages);
    }
    List<Run> runs = new ArrayList<>();
    for (int run = 1; run <= RUNS; run++) {
      for (DrainScenario.Cell cell : CELLS) {
        context.step(String.format(Locale.ROOT, "drain-repeat: %s x%d, run %d of %d", cell.consumer(),
            cell.concurrency(), run, RUNS));
        DrainScenario.preload(database, cell, messages);
        DrainScenario.Row row = drains.drain(database, cell, messages);
        runs.add(new Run(cell.consumer(), cell.concurrency(), run, row.messages(), row.seconds(),
            row.messagesPerSecond(), row.clientCpuMicrosPerMessage(), row.serverCpuMicrosPerMessage(), row.left(),
            row.drained()));
      }
    }
    List<Spread> spreads = new ArrayList<>();
    for (DrainScenario.Cell cell : CELLS) {
      List<Run> own = runs.stream()
          .filter(r -> r.consumer().equals(cell.consumer()) && r.concurrency() == cell.concurrency()).toList();
      double fastest = own.stream().mapToDouble(Run::messagesPerSecond).max().orElse(Double.NaN);
      double slowest = own.stream().mapToDouble(Run::messagesPerSecond).min().orElse(Double.NaN);
      spreads.add(new Spread(cell.consumer(), cell.concurrency(), fastest, slowest, slowest / fastest,
          slowest / fastest >= TARGET_SLOWEST_OVER_FASTEST));
    }
    return new DrainRepeatResult(messages, RUNS, TARGET_SLOWEST_OVER_FASTEST, runs, spreads);
  }

  /** One measured drain, with its CPU per message on the client (loops only) and on the server. */
  record Run(String consumer, int concurrency, int run, long messages, double seconds, double messagesPerSecond,
      double clientCpuMicrosPerMessage, double serverCpuMicrosPerMessage, long left, boolean drained) { }

  /** A consumer's fastest and slowest run, and whether the slowest is within the target of the fastest. */
  record Spread(String consumer, int concurrency, double fastestMessagesPerSecond, double slowestMessagesPerSecond,
      double slowestOverFastest, boolean met) { }

  record DrainRepeatResult(int preloaded, int runsPerConsumer, double target, List<Run> runs, List<Spread> spreads)
      implements Result {
    @Override
    public void printTable(PrintStream out) {
      StringBuilder header = new StringBuilder(String.format(Locale.ROOT, "%-4s", "run"));
      for (DrainScenario.Cell cell : CELLS) {
        header.append(String.format(Locale.ROOT, " %24s", cell.consumer() + " x" + cell.concurrency() + " msg/s"));
        header.append(String.format(Locale.ROOT, " %14s", "cpu us/msg"));
      }
      out.println(header);
      out.println("-".repeat(header.length()));
      for (int run = 1; run <= runsPerConsumer; run++) {
        StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "%-4d", run));
        for (DrainScenario.Cell cell : CELLS) {
          int number = run;
          Run r = runs.stream().filter(x -> x.run() == number && x.consumer().equals(cell.consumer())
              && x.concurrency() == cell.concurrency()).findFirst().orElseThrow();
          String note = r.drained() && r.left() == 0 ? "" : " (not drained)";
          line.append(String.format(Locale.ROOT, " %24s",
              String.format(Locale.ROOT, "%.0f%s", r.messagesPerSecond(), note)));
          line.append(String.format(Locale.ROOT, " %14s", String.format(Locale.ROOT, "%.1f/%.1f",
              r.clientCpuMicrosPerMessage(), r.serverCpuMicrosPerMessage())));
        }
        out.println(line);
      }
      out.println("cpu us/msg: client (consuming threads; loops only) / server (the drain's backends) per message.");
      for (Spread spread : spreads) {
        out.printf(Locale.ROOT, "%s x%d: fastest %.0f, slowest %.0f msg/s, slowest/fastest %.2f (target >= %.2f: %s)%n",
            spread.consumer(), spread.concurrency(), spread.fastestMessagesPerSecond(),
            spread.slowestMessagesPerSecond(), spread.slowestOverFastest(), target, spread.met() ? "met" : "NOT met");
      }
    }

    @Override
    public void writeCsv(Path file) throws IOException {
      List<String> lines = new ArrayList<>();
      lines.add("consumer,concurrency,run,messages,seconds,messages_per_second,client_cpu_us_per_message,"
          + "server_cpu_us_per_message,left,drained");
      for (Run r : runs) {
        lines.add(String.format(Locale.ROOT, "%s,%d,%d,%d,%.3f,%.1f,%s,%s,%d,%b", r.consumer(), r.concurrency(),
            r.run(), r.messages(), r.seconds(), r.messagesPerSecond(),
            DrainScenario.csvMicros(r.clientCpuMicrosPerMessage()),
            DrainScenario.csvMicros(r.serverCpuMicrosPerMessage()), r.left(), r.drained()));
      }
      Files.write(file, lines);
    }
  }
}
