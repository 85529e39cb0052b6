package dev.msgqueue.bench;

import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.QueueSpec;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Scenario 1: N concurrent publishers to ONE auto-deleted queue, one message per publish, per strategy. For each
 * publisher count the four strategies run back to back on the same server, each cell on freshly truncated tables.
 */
final class PublishContentionScenario implements Scenario {
  static final String ID = "publish-contention";
  static final QueueSpec HOT_QUEUE = QueueSpec.autoDeleted("bench-hot-queue");
  /** Longer than any run, so no message expires during the benchmark. */
  static final Duration MESSAGE_TTL = Duration.ofMinutes(5);

  /** The most connections of the pool the coalesced {@code msgqueue} strategy publishes through. */
  static final int MSGQUEUE_POOL_SIZE = 16;

  /**
   * What a cell takes beyond its warm-up and measured window: truncating the tables, {@code CHECKPOINT}, opening its
   * connections and pool, and waiting for their backends to exit. Measured on a 2-core machine under heavy load (load
   * average 13-28): about 1.1 s per slice on the embedded server, 3.4 s on PostgreSQL 15 with fsync on.
   */
  private static final Duration CELL_SETUP = Duration.ofMillis(1_500);

  private final BenchOptions options;

  PublishContentionScenario(BenchOptions options) {
    this.options = options;
  }

  @Override
  public String id() {
    return ID;
  }

  @Override
  public String title() {
    return "1. Publish contention: concurrent publishers to one auto-deleted queue";
  }

  @Override
  public int steps() {
    return 2 + options.publisherCounts().size() * Strategies.CONTENTION_ORDER.size() * options.rounds();
  }

  @Override
  public Duration estimate() {
    // Each slice, and the parent-writes check, pays the cell's setup on top of its warm-up and window.
    Duration slices = slice().plus(options.warmup()).plus(CELL_SETUP).multipliedBy(steps() - 2);
    Duration check = options.cellDuration().plus(options.warmup()).plus(CELL_SETUP);
    return slices.plus(check).plus(jvmWarmup().multipliedBy(Strategies.CONTENTION_ORDER.size()));
  }

  /** Each cell's measured time is split into one slice per round. */
  private Duration slice() {
    return options.cellDuration().dividedBy(options.rounds());
  }

  /**
   * How long each strategy runs, unmeasured, before the first cell: the JIT compiles the jOOQ rendering and pgjdbc
   * paths of every strategy, so the first cells do not pay for compilation the later ones do not. Measured here: a
   * strategy with a larger statement (msgqueue's) needs several thousand calls before its cost per call settles, so
   * 2 s was not enough on a busy machine.
   */
  private Duration jvmWarmup() {
    return options.quick() ? Duration.ofMillis(300) : Duration.ofSeconds(5);
  }

  /** The throughput cells' configuration: the library's defaults, as a service runs it (keep-alive 5 min). */
  MsgQueueConfig config() {
    return MsgQueueConfig.defaults();
  }

  /**
   * The parent-writes check's configuration: a short keep-alive, so that "at most one parent-row write per interval"
   * is visible within one cell. The reaper does not run here.
   */
  MsgQueueConfig keepAliveCheckConfig() {
    return MsgQueueConfig.builder()
        .keepAliveInterval(options.contentionKeepAlive())
        .reapIdleThreshold(options.contentionKeepAlive().multipliedBy(4))
        .build();
  }

  @Override
  public Result run(BenchContext context) throws Exception {
    BenchDatabase database = context.database();
    Strategies.Message message = new Strategies.Message(HOT_QUEUE, BenchContext.PAYLOAD, MESSAGE_TTL);
    MsgQueueConfig config = config();
    List<Cell> cells = new ArrayList<>();
    context.step("JVM warm-up: every strategy, 2 publishers, " + jvmWarmup().toMillis() + " ms each, unmeasured");
    for (String strategyId : Strategies.CONTENTION_ORDER) {
      try (PreparedCell cell = prepareCell(database, config, 2)) {
        ClosedLoopCell.run(database, cell.strategy(strategyId, message), 2, Duration.ZERO, jvmWarmup());
      }
    }
    for (int publishers : options.publisherCounts()) {
      // Rounds with the strategies in rotated order: background load that drifts during the run (a shared machine)
      // then spreads over all strategies instead of favouring whichever happens to run in a quiet moment.
      Map<String, ClosedLoopCell.Measurement> measured = new LinkedHashMap<>();
      for (int round = 0; round < options.rounds(); round++) {
        List<String> order = new ArrayList<>(Strategies.CONTENTION_ORDER);
        Collections.rotate(order, -round);
        for (String strategyId : order) {
          context.step(String.format(Locale.ROOT, "publish contention: %-18s %3d publisher(s), round %d/%d",
              strategyId, publishers, round + 1, options.rounds()));
          try (PreparedCell cell = prepareCell(database, config, publishers)) {
            ClosedLoopCell.Measurement slice = ClosedLoopCell.run(database, cell.strategy(strategyId, message),
                publishers, options.warmup(), slice());
            measured.merge(strategyId, slice, ClosedLoopCell.Measurement::plus);
          }
        }
      }
      List<ClosedLoopCell.Measurement> row = Strategies.CONTENTION_ORDER.stream().map(measured::get).toList();
      double ceiling = row.stream().filter(m -> m.strategy().equals(Strategies.NO_FK_CEILING))
          .mapToDouble(ClosedLoopCell.Measurement::messagesPerSecond).findFirst().orElse(Double.NaN);
      for (ClosedLoopCell.Measurement m : row) {
        cells.add(Cell.of(m, ceiling, config.keepAliveInterval()));
      }
    }
    // The parent-writes check: coalesced msgqueue at the largest publisher count, with a short keep-alive.
    MsgQueueConfig checkConfig = keepAliveCheckConfig();
    int most = options.publisherCounts().stream().mapToInt(Integer::intValue).max().orElse(1);
    context.step(String.format(Locale.ROOT, "publish contention: parent-writes check, msgqueue, %d publisher(s),"
        + " keep-alive %d ms", most, checkConfig.keepAliveInterval().toMillis()));
    Cell keepAliveCheck;
    try (PreparedCell cell = prepareCell(database, checkConfig, most)) {
      ClosedLoopCell.Measurement m = ClosedLoopCell.run(database, cell.strategy(Strategies.MSGQUEUE, message), most,
          options.warmup(), options.cellDuration());
      keepAliveCheck = Cell.of(m, Double.NaN, checkConfig.keepAliveInterval());
    }
    return new ContentionResult(config.keepAliveInterval().toMillis() / 1000.0,
        config.reapIdleThreshold().toMillis() / 1000.0, options.warmup().toMillis() / 1000.0,
        options.cellDuration().toMillis() / 1000.0, options.rounds(), cells,
        checkConfig.keepAliveInterval().toMillis() / 1000.0, keepAliveCheck);
  }

  /**
   * Empty tables, the hot queue freshly bound, and fresh repositories (their keep-alive throttles start now): one
   * over the control connection for the per-connection views, one over a pool of up to {@code publishers}
   * connections for the coalesced path.
   */
  private static PreparedCell prepareCell(BenchDatabase database, MsgQueueConfig config, int publishers) {
    database.reset();
    MsgQueueRepository repository = MsgQueueRepository.create(database.control(), config);
    repository.bindQueue(HOT_QUEUE);
    HikariConfig poolConfig = new HikariConfig();
    poolConfig.setJdbcUrl(database.url());
    poolConfig.setMaximumPoolSize(Math.max(2, Math.min(publishers, MSGQUEUE_POOL_SIZE)));
    poolConfig.setMinimumIdle(0);
    HikariDataSource pool = new HikariDataSource(poolConfig);
    MsgQueueRepository pooled = MsgQueueRepository.create(pool, config);
    database.flushStatistics();
    return new PreparedCell(repository, pooled, pool);
  }

  private record PreparedCell(MsgQueueRepository repository, MsgQueueRepository pooled,
      HikariDataSource pool) implements AutoCloseable {
    PublishStrategy strategy(String strategyId, Strategies.Message message) {
      return switch (strategyId) {
        case Strategies.UPSERT_PER_PUBLISH -> Strategies.upsertPerPublish(message);
        case Strategies.OPTIMISTIC_HEAL -> Strategies.optimisticHeal(message, new AtomicLong());
        case Strategies.MSGQUEUE_UNCOALESCED -> Strategies.msgqueueUncoalesced(message, repository);
        case Strategies.MSGQUEUE -> Strategies.msgqueue(message, pooled);
        case Strategies.NO_FK_CEILING -> Strategies.noFkCeiling(message);
        default -> throw new IllegalStateException(strategyId);
      };
    }

    @Override
    public void close() {
      pool.close();
    }
  }

  /**
   * One strategy at one publisher count.
   *
   * @param windowSeconds measured seconds, all rounds together
   * @param parentRowWrites {@code n_tup_upd} of {@code "MessageQueue"} over the whole cell (from the bind of the queue
   *     until the publishers stopped, warm-ups included)
   * @param lockWaitByEvent waiting-session-seconds per {@code wait_event}: {@code tuple}/{@code transactionid} are
   *     row-lock queues, {@code extend} is relation extension (inserting sessions growing the same table)
   * @param keepAliveIntervals how many keep-alive intervals that span covers
   * @param ratioToNoFkCeiling messages/s relative to {@code no-fk-ceiling} at the same publisher count
   */
  record Cell(
      String strategy,
      int publishers,
      double windowSeconds,
      long messages,
      double messagesPerSecond,
      double p50Millis,
      double p99Millis,
      double lockWaitSessionSeconds,
      double lockWaitShare,
      Map<String, Double> lockWaitByEvent,
      long lockWaitSamples,
      long parentRowWrites,
      double keepAliveIntervals,
      double walBytesPerMessage,
      double ratioToNoFkCeiling,
      long failures,
      String firstFailure) {

    static Cell of(ClosedLoopCell.Measurement m, double ceilingMessagesPerSecond, Duration keepAlive) {
      return new Cell(m.strategy(), m.publishers(), m.windowSeconds(), m.messages(), m.messagesPerSecond(),
          m.latency().p50Micros() / 1000, m.latency().p99Micros() / 1000, m.lockWait().waitingSessionSeconds(),
          m.lockWaitShare(), m.lockWait().byWaitEvent(), m.lockWait().samples(), m.parentRowWrites(),
          m.keepAliveSpanSeconds() / (keepAlive.toNanos() / 1e9), m.walBytesPerMessage(),
          m.messagesPerSecond() / ceilingMessagesPerSecond, m.failures(), m.firstFailure());
    }
  }

  record ContentionResult(
      double keepAliveSeconds,
      double reapThresholdSeconds,
      double warmupSeconds,
      double cellSeconds,
      int rounds,
      List<Cell> cells,
      double checkKeepAliveSeconds,
      Cell keepAliveCheck) implements Result {

    Cell cell(String strategy, int publishers) {
      return cells.stream().filter(c -> c.strategy().equals(strategy) && c.publishers() == publishers)
          .findFirst().orElse(null);
    }

    @Override
    public void printTable(PrintStream out) {
      out.printf(Locale.ROOT, "keep-alive %.2f s, reap threshold %.2f s; %.1f s measured per cell in %d round(s),"
          + " each after %.1f s warm-up on freshly truncated tables%n",
          keepAliveSeconds, reapThresholdSeconds, cellSeconds, rounds, warmupSeconds);
      String header = String.format(Locale.ROOT, "%-20s %4s %10s %8s %8s %10s %7s %15s %9s %7s %5s",
          "strategy", "pubs", "msg/s", "p50 ms", "p99 ms", "lock-wait", "share", "parent writes", "WAL B/msg",
          "x no-fk", "fail");
      out.println(header);
      out.println("-".repeat(header.length()));
      int previous = -1;
      for (Cell c : cells) {
        if (previous != -1 && previous != c.publishers()) {
          out.println();
        }
        previous = c.publishers();
        out.printf(Locale.ROOT, "%-20s %4d %10.0f %8.2f %8.2f %9.2fs %6.2f%% %15s %9.0f %7.2f %5d%n",
            c.strategy(), c.publishers(), c.messagesPerSecond(), c.p50Millis(), c.p99Millis(),
            c.lockWaitSessionSeconds(), 100 * c.lockWaitShare(),
            String.format(Locale.ROOT, "%d / %.1f int", c.parentRowWrites(), c.keepAliveIntervals()),
            c.walBytesPerMessage(), c.ratioToNoFkCeiling(), c.failures());
      }
      out.println("lock-wait: waiting-session-seconds in the window (pg_stat_activity, wait_event_type = 'Lock');"
          + " share: of all publisher-session-seconds.");
      for (Cell c : cells) {
        if (!c.lockWaitByEvent().isEmpty()) {
          out.printf(Locale.ROOT, "  lock waits of %s x %d by wait_event: %s%n", c.strategy(), c.publishers(),
              c.lockWaitByEvent().entrySet().stream()
                  .map(e -> String.format(Locale.ROOT, "%s %.2fs", e.getKey(), e.getValue()))
                  .collect(java.util.stream.Collectors.joining(", ")));
        }
      }
      out.println("parent writes: n_tup_upd of \"MessageQueue\" from binding the queue until the publishers stopped"
          + " (warm-up included), against the keep-alive intervals in that span.");
      if (keepAliveCheck != null) {
        Cell c = keepAliveCheck;
        out.printf(Locale.ROOT, "parent-writes check (keep-alive %.2f s): %s x %d, %.0f msg/s, %d writes over %.1f"
            + " intervals, lock-wait share %.2f%%, %d failures%n", checkKeepAliveSeconds, c.strategy(),
            c.publishers(), c.messagesPerSecond(), c.parentRowWrites(), c.keepAliveIntervals(),
            100 * c.lockWaitShare(), c.failures());
      }
    }

    @Override
    public void writeCsv(Path file) throws IOException {
      List<String> lines = new ArrayList<>();
      lines.add("strategy,publishers,window_seconds,messages,messages_per_second,p50_ms,p99_ms,"
          + "lock_wait_session_seconds,lock_wait_share,parent_row_writes,keep_alive_intervals,wal_bytes_per_message,"
          + "ratio_to_no_fk_ceiling,failures");
      for (Cell c : cells) {
        lines.add(String.format(Locale.ROOT, "%s,%d,%.3f,%d,%.1f,%.3f,%.3f,%.4f,%.6f,%d,%.2f,%.1f,%.4f,%d",
            c.strategy(), c.publishers(), c.windowSeconds(), c.messages(), c.messagesPerSecond(), c.p50Millis(),
            c.p99Millis(), c.lockWaitSessionSeconds(), c.lockWaitShare(), c.parentRowWrites(),
            c.keepAliveIntervals(), c.walBytesPerMessage(), c.ratioToNoFkCeiling(), c.failures()));
      }
      Files.write(file, lines);
    }
  }
}
