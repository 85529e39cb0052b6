package dev.msgqueue.bench;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Scenario 7: whether consumption speed stays in a long-lived JVM. The same preloaded count is drained {@value #RUNS}
 * times in a row in this one JVM, alternating the Subscriber (default mode, concurrency 4) and the repository's
 * claim+ack loop on one thread, each drain on a fresh table and a pool of its own, after unmeasured warm-up drains of
 * each until the JIT is quiet. Reports every run with the time the JIT compiled during it and, per consumer, the slowest
 * run over the fastest (target at least {@value #TARGET_SLOWEST_OVER_FASTEST}).
 */
final class DrainRepeatScenario implements Scenario {
  static final String ID = "drain-repeat";
  static final int RUNS = 10;
  static final double TARGET_SLOWEST_OVER_FASTEST = 0.85;
  /** A run's probe at most this factor of the fastest probe counts as the machine at full speed. */
  static final double STEADY_PROBE_MARGIN = 1.10;
  static final List<DrainScenario.Cell> CELLS = List.of(
      new DrainScenario.Cell(DrainScenario.SUBSCRIBER, 4), new DrainScenario.Cell(DrainScenario.SUBSCRIBER_TAKE, 4), new DrainScenario.Cell(DrainScenario.REPOSITORY, 1));

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
        + " consumers alternating, after unmeasured warm-up drains of each until the JIT is quiet";
  }

  @Override
  public int steps() {
    return CELLS.size() * RUNS;
  }

  @Override
  public Duration estimate() {
    // 220 s for 100,000 messages on PostgreSQL 15 on a shared 2-core machine (2026-12-07, load average 5-15).
    return Duration.ofMillis(CELLS.size() * (RUNS + 3) * (1_000 + messages / 13L));
  }

  @Override
  public Result run(BenchContext context) throws Exception {
    BenchDatabase database = context.database();
    for (DrainScenario.Cell cell : CELLS) {
      drains.warmUntilJitQuiet(database, cell, messages);
    }
    List<Run> runs = new ArrayList<>();
    for (int run = 1; run <= RUNS; run++) {
      for (DrainScenario.Cell cell : CELLS) {
        context.step(String.format(Locale.ROOT, "drain-repeat: %s x%d, run %d of %d", cell.consumer(),
            cell.concurrency(), run, RUNS));
        DrainScenario.preload(database, cell, messages);
        double probeBeforeMillis = BenchSql.serverSpeedProbeMillis(database.control());
        DrainDiagnostics.Counters before = DrainDiagnostics.read(database.control(), database.serverVersionNum());
        DrainScenario.Row row;
        ClaimPlanSampler.Sample early;
        ClaimPlanSampler.Sample late;
        Map<String, Double> backendStates;
        try (ClaimPlanSampler sampler = new ClaimPlanSampler(database, messages);
             DrainWaitSampler waits = new DrainWaitSampler(database,
                 List.of(sampler.pid(), BenchSql.backendPid(database.control())))) {
          sampler.start();
          waits.start();
          row = drains.drain(database, cell, messages, List.of(sampler.pid(), waits.pid()));
          early = sampler.early();
          late = sampler.late();
          backendStates = waits.averageBackends();
        }
        awaitOnlyControlSession(database);
        double probeAfterMillis = BenchSql.serverSpeedProbeMillis(database.control());
        DrainDiagnostics.Counters during =
            DrainDiagnostics.read(database.control(), database.serverVersionNum()).minus(before);
        runs.add(new Run(cell.consumer(), cell.concurrency(), run, row.messages(), row.seconds(),
            row.messagesPerSecond(), row.clientCpuMicrosPerMessage(), row.serverCpuMicrosPerMessage(), row.left(),
            row.drained(), before, during, early, late, backendStates, row.jitMillis(),
            Math.max(probeBeforeMillis, probeAfterMillis)));
      }
    }
    List<Spread> spreads = new ArrayList<>();
    for (DrainScenario.Cell cell : CELLS) {
      List<Run> own = runs.stream()
          .filter(r -> r.consumer().equals(cell.consumer()) && r.concurrency() == cell.concurrency()).toList();
      double fastest = own.stream().mapToDouble(Run::messagesPerSecond).max().orElse(Double.NaN);
      double slowest = own.stream().mapToDouble(Run::messagesPerSecond).min().orElse(Double.NaN);
      double fastestProbe = own.stream().mapToDouble(Run::probeMillis).min().orElse(Double.NaN);
      List<Run> steady = own.stream().filter(r -> r.probeMillis() <= fastestProbe * STEADY_PROBE_MARGIN).toList();
      double steadyFastest = steady.stream().mapToDouble(Run::messagesPerSecond).max().orElse(Double.NaN);
      double steadySlowest = steady.stream().mapToDouble(Run::messagesPerSecond).min().orElse(Double.NaN);
      spreads.add(new Spread(cell.consumer(), cell.concurrency(), fastest, slowest, slowest / fastest,
          slowest / fastest >= TARGET_SLOWEST_OVER_FASTEST, steady.size(), steadySlowest / steadyFastest));
    }
    return new DrainRepeatResult(messages, RUNS, TARGET_SLOWEST_OVER_FASTEST, runs, spreads);
  }

  /**
   * Waits until the drain's backends have exited: a backend reports its block counters when it exits, so only then
   * do the counters read next include the whole drain.
   */
  private static void awaitOnlyControlSession(BenchDatabase database) throws InterruptedException {
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (!BenchSql.otherBackends(database.control()).isEmpty()) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the drain's backends did not exit within 10 s");
      }
      Thread.sleep(5);
    }
  }

  /**
   * One measured drain, with its CPU per message on the client and on the server, the server's counters
   * after the preload ({@code before}: the sizes) and their change during the drain ({@code during}), and one
   * claim's search explained early and late in the drain; {@code probeMillis} is the server's speed around it (the
   * slower of {@link BenchSql#serverSpeedProbeMillis} right before and right after).
   */
  record Run(String consumer, int concurrency, int run, long messages, double seconds, double messagesPerSecond,
      double clientCpuMicrosPerMessage, double serverCpuMicrosPerMessage, long left, boolean drained,
      DrainDiagnostics.Counters before, DrainDiagnostics.Counters during, ClaimPlanSampler.Sample early,
      ClaimPlanSampler.Sample late, Map<String, Double> backendStates, long jitMillis, double probeMillis) {

    /** The average number of the drain's backends whose state starts with {@code prefix}. */
    double backends(String prefix) {
      return backendStates.entrySet().stream().filter(e -> e.getKey().startsWith(prefix))
          .mapToDouble(Map.Entry::getValue).sum();
    }

    double walBytesPerMessage() {
      return (double) during.walBytes() / Math.max(1, messages);
    }

    double blocksPerMessage() {
      return (double) during.blocks() / Math.max(1, messages);
    }
  }

  /**
   * A consumer's fastest and slowest run, and whether the slowest is within the target of the fastest (the target is
   * on every run). Beside it the same ratio over the runs the machine was at its fastest for ({@code steadyRuns}: both
   * probes within {@link #STEADY_PROBE_MARGIN} of the consumer's fastest probe), which tells a machine that slowed
   * down apart from a consumer that did.
   */
  record Spread(String consumer, int concurrency, double fastestMessagesPerSecond, double slowestMessagesPerSecond,
      double slowestOverFastest, boolean met, int steadyRuns, double steadySlowestOverFastest) { }

  record DrainRepeatResult(int preloaded, int runsPerConsumer, double target, List<Run> runs, List<Spread> spreads)
      implements Result {
    @Override
    public void printTable(PrintStream out) {
      StringBuilder header = new StringBuilder(String.format(Locale.ROOT, "%-4s", "run"));
      for (DrainScenario.Cell cell : CELLS) {
        header.append(String.format(Locale.ROOT, " %24s", cell.consumer() + " x" + cell.concurrency() + " msg/s"));
        header.append(String.format(Locale.ROOT, " %14s", "cpu us/msg"));
        header.append(String.format(Locale.ROOT, " %7s", "jit ms"));
        header.append(String.format(Locale.ROOT, " %8s", "probe ms"));
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
          line.append(String.format(Locale.ROOT, " %14s", DrainScenario.micros(r.clientCpuMicrosPerMessage()) + "/"
              + DrainScenario.micros(r.serverCpuMicrosPerMessage())));
          line.append(String.format(Locale.ROOT, " %7d", r.jitMillis()));
          line.append(String.format(Locale.ROOT, " %8.1f", r.probeMillis()));
        }
        out.println(line);
      }
      out.println("cpu us/msg: client (the consuming threads: the loop's, or the Subscriber's) / server (the drain's"
          + " backends; - : the server is not on this machine) per message;"
          + " jit ms: milliseconds the JVM's JIT compiled during the run; probe ms: the server's speed around"
          + " the run (one backend counting a fixed series, median of 3, the slower of before and after; higher is"
          + " slower).");
      printDiagnostics(out);
      for (Spread spread : spreads) {
        out.printf(Locale.ROOT, "%s x%d: fastest %.0f, slowest %.0f msg/s, slowest/fastest %.2f (target >= %.2f: %s)%n",
            spread.consumer(), spread.concurrency(), spread.fastestMessagesPerSecond(),
            spread.slowestMessagesPerSecond(), spread.slowestOverFastest(), target, spread.met() ? "met" : "NOT met");
        out.printf(Locale.ROOT, "%s x%d: slowest/fastest %.2f over the %d runs with the server at full speed (probe"
            + " within %.0f%% of its fastest)%n", spread.consumer(), spread.concurrency(),
            spread.steadySlowestOverFastest(), spread.steadyRuns(), (STEADY_PROBE_MARGIN - 1) * 100);
      }
    }

    /**
     * Per run, what the server did for it: WAL bytes, full-page images and WAL segment files; checkpoints and writes
     * by backends; buffer accesses of the item table; index size after the drain; one claim search early and late.
     */
    private void printDiagnostics(PrintStream out) {
      String header = String.format(Locale.ROOT, "%-17s %3s %7s %7s %8s %7s %5s %5s %6s %8s %8s %7s %7s %13s %17s %23s",
          "consumer", "run", "msg/s", "srv us", "WAL B/m", "FPI", "wfull", "segs", "ckpt", "heap b/m", "idx b/m",
          "tbl MB", "idx MB", "early bufs/ms", "late at bufs/ms",
          "run/client/walsync/lwl");
      out.println();
      out.println(header);
      out.println("-".repeat(header.length()));
      for (Run r : runs) {
        DrainDiagnostics.Counters d = r.during();
        out.printf(Locale.ROOT, "%-17s %3d %7.0f %7.1f %8.0f %7d %5d %5d %6d %8.2f %8.2f %7.1f %7.1f %13s %17s %23s%n",
            r.consumer() + " x" + r.concurrency(), r.run(), r.messagesPerSecond(), r.serverCpuMicrosPerMessage(),
            r.walBytesPerMessage(), d.walFullPageImages(), d.walBuffersFull(), d.walFiles(), d.checkpoints(),
            (double) (d.heapBlocksHit() + d.heapBlocksRead()) / Math.max(1, r.messages()),
            (double) (d.indexBlocksHit() + d.indexBlocksRead()) / Math.max(1, r.messages()),
            d.tableBytes() / 1048576.0, d.indexBytes() / 1048576.0, sample(r.early(), false), sample(r.late(), true),
            String.format(Locale.ROOT, "%.2f/%.2f/%.2f/%.2f", r.backends(DrainWaitSampler.RUNNING),
                r.backends("Client:"), r.backends("IO:WAL"), r.backends("LWLock:")));
      }
      out.println("srv us: server CPU us/msg; WAL B/m: WAL bytes per message (server-wide); FPI: full-page images;"
          + " wfull: waits for a full WAL buffer; segs: change in pg_wal's file count; ckpt: checkpoints during the"
          + " drain; heap/idx b/m: item table and index buffer accesses (hit + read) per message; tbl/idx MB: the item"
          + " table and its indexes after the drain; early/late: one claim search (EXPLAIN ANALYZE), buffers and ms, late"
          + " at the share of the preload already deleted;"
          + " run/client/walsync/lwl: the drain's backends on average running, waiting for their client (or idle in"
          + " the pool), waiting for WAL I/O (commit flushes), waiting for a lightweight lock (sampled every 20 ms).");
    }

    /** A count for a CSV cell: empty where not measured (negative). */
    private static String csvCount(long count) {
      return count < 0 ? "" : Long.toString(count);
    }

    private static String sample(ClaimPlanSampler.Sample sample, boolean withShare) {
      if (sample.sharedBuffers() < 0) {
        return "-";
      }
      String buffersAndMillis = String.format(Locale.ROOT, "%d/%.2f", sample.sharedBuffers(), sample.milliseconds());
      return withShare ? String.format(Locale.ROOT, "%.0f%% %s", sample.deletedShare() * 100, buffersAndMillis)
          : buffersAndMillis;
    }

    @Override
    public void writeCsv(Path file) throws IOException {
      List<String> lines = new ArrayList<>();
      lines.add("consumer,concurrency,run,messages,seconds,messages_per_second,client_cpu_us_per_message,"
          + "server_cpu_us_per_message,left,drained,wal_bytes,wal_records,wal_fpi,wal_buffers_full,wal_files_change,"
          + "checkpoints,backend_buffer_writes,heap_blocks_hit,heap_blocks_read,index_blocks_hit,index_blocks_read,"
          + "table_bytes_before,index_bytes_before,table_bytes_after,index_bytes_after,early_claim_buffers,"
          + "early_claim_ms,late_claim_deleted_share,late_claim_buffers,late_claim_ms,backends_running,"
          + "backends_client,backends_wal_io,backends_lwlock,jit_ms,probe_ms");
      List<String> plans = new ArrayList<>();
      for (Run r : runs) {
        DrainDiagnostics.Counters d = r.during();
        lines.add(String.format(Locale.ROOT,
            "%s,%d,%d,%d,%.3f,%.1f,%s,%s,%d,%b,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%s,%s,%s,%s,%s,"
                + "%.3f,%.3f,%.3f,%.3f,%d,%.1f",
            r.consumer(), r.concurrency(), r.run(), r.messages(), r.seconds(), r.messagesPerSecond(),
            DrainScenario.csvMicros(r.clientCpuMicrosPerMessage()),
            DrainScenario.csvMicros(r.serverCpuMicrosPerMessage()), r.left(), r.drained(), d.walBytes(),
            d.walRecords(), d.walFullPageImages(), d.walBuffersFull(), d.walFiles(), d.checkpoints(),
            d.backendBufferWrites(), d.heapBlocksHit(), d.heapBlocksRead(), d.indexBlocksHit(),
            d.indexBlocksRead(), r.before().tableBytes(), r.before().indexBytes(), d.tableBytes(), d.indexBytes(),
            csvCount(r.early().sharedBuffers()), DrainScenario.csvMicros(r.early().milliseconds()),
            DrainScenario.csvMicros(r.late().deletedShare()), csvCount(r.late().sharedBuffers()),
            DrainScenario.csvMicros(r.late().milliseconds()), r.backends(DrainWaitSampler.RUNNING),
            r.backends("Client:"), r.backends("IO:WAL"), r.backends("LWLock:"), r.jitMillis(), r.probeMillis()));
        plans.add("-- " + r.consumer() + " x" + r.concurrency() + ", run " + r.run() + ", early\n" + r.early().plan());
        plans.add("-- " + r.consumer() + " x" + r.concurrency() + ", run " + r.run() + ", late\n" + r.late().plan());
      }
      Files.write(file, lines);
      Files.write(file.resolveSibling("drain-repeat-claim-plans.txt"), plans);
    }
  }
}
