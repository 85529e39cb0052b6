package dev.msgqueue.bench;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;

import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.QueueSpec;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.ToIntFunction;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * Scenario 3, the reaper race, time compressed: a publisher-only auto-deleted queue (nobody binds or touches it after
 * creation) receives a steady paced stream while a reaper loops. Afterwards it counts the unexpired items the reaper
 * orphaned ({@code "queueId"} set NULL by the foreign key's ON DELETE SET NULL, so no consumer can read them) and
 * the publishes that failed.
 *
 * <p>Each run pairs a publish strategy with a reaper: {@code idle-only}, the one-statement reaper fleets commonly run
 * (deletes every auto-deleted queue idle longer than the threshold), or {@code msgqueue}'s
 * {@link MsgQueueRepository#reapIdleQueues} (also skips queues that hold unexpired items). Pairing each publish
 * path with each reaper shows which mechanism prevents what.
 */
final class ReaperRaceScenario implements Scenario {
  static final String ID = "reaper-race";
  static final String IDLE_ONLY_REAPER = "idle-only";
  static final String MSGQUEUE_REAPER = "msgqueue";
  static final QueueSpec PUBLISHER_ONLY_QUEUE = QueueSpec.autoDeleted("bench-publisher-only-queue");
  /** Longer than the run: every orphan counted at the end was orphaned while unexpired. */
  static final Duration MESSAGE_TTL = Duration.ofMinutes(5);

  /** The runs, in order: {publish strategy, reaper}. */
  static final List<List<String>> RUNS = List.of(
      List.of(Strategies.UPSERT_PER_PUBLISH, IDLE_ONLY_REAPER),
      List.of(Strategies.OPTIMISTIC_HEAL, IDLE_ONLY_REAPER),
      List.of(Strategies.MSGQUEUE, IDLE_ONLY_REAPER),
      List.of(Strategies.OPTIMISTIC_HEAL, MSGQUEUE_REAPER),
      List.of(Strategies.MSGQUEUE, MSGQUEUE_REAPER));

  private final ReaperRaceSettings settings;

  ReaperRaceScenario(ReaperRaceSettings settings) {
    this.settings = settings;
  }

  @Override
  public String id() {
    return ID;
  }

  @Override
  public String title() {
    return "3. Reaper race (time compressed): a publisher-only queue while the reaper loops";
  }

  @Override
  public int steps() {
    return RUNS.size();
  }

  @Override
  public Duration estimate() {
    return settings.runLength().plusMillis(500).multipliedBy(steps());
  }

  @Override
  public Result run(BenchContext context) throws Exception {
    MsgQueueConfig config = MsgQueueConfig.builder()
        .keepAliveInterval(settings.keepAlive())
        .reapIdleThreshold(settings.reapThreshold())
        .build();
    List<Row> rows = new ArrayList<>();
    for (List<String> run : RUNS) {
      context.step(String.format(Locale.ROOT, "reaper race: %-18s with the %s reaper (%.1f s)", run.get(0), run.get(1),
          settings.runLength().toMillis() / 1000.0));
      rows.add(runOne(context.database(), config, run.get(0), run.get(1)));
    }
    return new ReaperRaceResult(settings.runLength().toMillis() / 1000.0, settings.reapThreshold().toMillis() / 1000.0,
        settings.keepAlive().toMillis() / 1000.0, MESSAGE_TTL.toSeconds(), settings.publishers(),
        settings.ratePerPublisher(), rows);
  }

  private Row runOne(BenchDatabase database, MsgQueueConfig config, String strategyId, String reaperKind)
      throws SQLException, InterruptedException {
    database.reset();
    MsgQueueRepository repository = MsgQueueRepository.create(database.control(), config);
    repository.bindQueue(PUBLISHER_ONLY_QUEUE);
    database.flushStatistics();
    Strategies.Message message = new Strategies.Message(PUBLISHER_ONLY_QUEUE, BenchContext.PAYLOAD, MESSAGE_TTL);
    PublishStrategy strategy = switch (strategyId) {
      case Strategies.UPSERT_PER_PUBLISH -> Strategies.upsertPerPublish(message);
      case Strategies.OPTIMISTIC_HEAL -> Strategies.optimisticHeal(message, new AtomicLong());
      // One view per publisher connection: the race is about the statements, not about coalescing.
      case Strategies.MSGQUEUE -> Strategies.msgqueueUncoalesced(Strategies.MSGQUEUE, message, repository);
      default -> throw new IllegalStateException(strategyId);
    };
    ToIntFunction<DSLContext> reaper = switch (reaperKind) {
      case IDLE_ONLY_REAPER -> ctx -> ctx.deleteFrom(MESSAGE_QUEUE)
          .where(MESSAGE_QUEUE.AUTO_DELETED.isTrue())
          .and(MESSAGE_QUEUE.LAST_ACTIVE.lt(BenchSql.utcNowMinus(config.reapIdleThreshold())))
          .execute();
      case MSGQUEUE_REAPER -> ctx -> MsgQueueRepository.create(ctx, config).reapIdleQueues().size();
      default -> throw new IllegalStateException(reaperKind);
    };

    List<Connection> connections = new ArrayList<>();
    List<Integer> pids = new ArrayList<>();
    List<Thread> threads = new ArrayList<>();
    AtomicLong published = new AtomicLong();
    AtomicLong failed = new AtomicLong();
    AtomicLong reaps = new AtomicLong();
    AtomicReference<String> firstFailure = new AtomicReference<>();
    AtomicReference<String> reaperFailure = new AtomicReference<>();
    long deadline = System.nanoTime() + settings.runLength().toNanos();
    BenchSql.ParentRowCounters before = BenchSql.parentRowCounters(database.control());
    try {
      long periodNanos = 1_000_000_000L / settings.ratePerPublisher();
      for (int i = 0; i < settings.publishers(); i++) {
        DSLContext ctx = open(database, connections, pids);
        PublishStrategy.Publisher publisher = strategy.open(ctx);
        threads.add(new Thread(() -> {
          // Paced, not back to back: a steady stream, as a queue's real publishers produce.
          long next = System.nanoTime();
          while (System.nanoTime() < deadline) {
            try {
              publisher.publish();
              published.incrementAndGet();
            } catch (RuntimeException e) {
              failed.incrementAndGet();
              firstFailure.compareAndSet(null, e.toString());
            }
            next += periodNanos;
            sleepUntil(next);
          }
        }, "race-publisher-" + i));
      }
      DSLContext reaperContext = open(database, connections, pids);
      threads.add(new Thread(() -> {
        while (System.nanoTime() < deadline) {
          try {
            reaps.addAndGet(reaper.applyAsInt(reaperContext));
          } catch (RuntimeException e) {
            reaperFailure.compareAndSet(null, e.toString());
          }
          sleepUntil(System.nanoTime() + settings.reaperPause().toNanos());
        }
      }, "race-reaper"));
      threads.forEach(Thread::start);
      for (Thread thread : threads) {
        thread.join();
      }
      closeAll(connections);
      database.awaitBackendsGone(pids);
    } finally {
      closeAll(connections);
    }
    BenchSql.ParentRowCounters writes = BenchSql.parentRowCounters(database.control()).minus(before);
    return new Row(strategyId, reaperKind, published.get(), failed.get(), firstFailure.get(), reaps.get(),
        writes.inserts(), database.unexpiredOrphans(), database.items(), database.queueExists(
            PUBLISHER_ONLY_QUEUE.name()), reaperFailure.get());
  }

  private static DSLContext open(BenchDatabase database, List<Connection> connections, List<Integer> pids)
      throws SQLException {
    Connection connection = database.connect();
    connections.add(connection);
    DSLContext ctx = DSL.using(connection, SQLDialect.POSTGRES);
    pids.add(BenchSql.backendPid(ctx));
    return ctx;
  }

  private static void closeAll(List<Connection> connections) {
    for (Connection connection : connections) {
      try {
        connection.close();
      } catch (SQLException e) {
        // A connection that fails to close is gone either way.
      }
    }
  }

  private static void sleepUntil(long nanoTime) {
    long wait = nanoTime - System.nanoTime();
    if (wait > 0) {
      try {
        TimeUnit.NANOSECONDS.sleep(wait);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * One publish strategy against one reaper.
   *
   * @param queueRecreations inserts into {@code "MessageQueue"} during the run: heals after a reap
   * @param unexpiredOrphans items with {@code "queueId"} NULL that had not expired: lost to every consumer
   * @param items all items stored during the run
   * @param queueExistsAtEnd whether the queue row existed when the run ended
   */
  record Row(
      String strategy,
      String reaper,
      long published,
      long failedPublishes,
      String firstFailure,
      long reaps,
      long queueRecreations,
      long unexpiredOrphans,
      long items,
      boolean queueExistsAtEnd,
      String reaperFailure) { }

  record ReaperRaceResult(
      double runSeconds,
      double reapThresholdSeconds,
      double keepAliveSeconds,
      long messageTtlSeconds,
      int publishers,
      int ratePerPublisher,
      List<Row> rows) implements Result {

    Row row(String strategy, String reaper) {
      return rows.stream().filter(r -> r.strategy().equals(strategy) && r.reaper().equals(reaper))
          .findFirst().orElse(null);
    }

    @Override
    public void printTable(PrintStream out) {
      out.printf(Locale.ROOT, "%.1f s per run; reap threshold %.2f s, msgqueue keep-alive %.2f s, TTL %d s;"
              + " %d publishers x %d msg/s; nobody binds the queue after creating it%n",
          runSeconds, reapThresholdSeconds, keepAliveSeconds, messageTtlSeconds, publishers, ratePerPublisher);
      String header = String.format(Locale.ROOT, "%-18s %-10s %9s %7s %6s %9s %9s %8s",
          "strategy", "reaper", "published", "failed", "reaps", "re-creates", "orphaned", "items");
      out.println(header);
      out.println("-".repeat(header.length()));
      for (Row r : rows) {
        out.printf(Locale.ROOT, "%-18s %-10s %9d %7d %6d %9d %9d %8d%n", r.strategy(), r.reaper(), r.published(),
            r.failedPublishes(), r.reaps(), r.queueRecreations(), r.unexpiredOrphans(), r.items());
      }
      out.println("orphaned: unexpired items whose queue the reaper deleted (\"queueId\" NULL): no consumer can read"
          + " them.");
    }

    @Override
    public void writeCsv(Path file) throws IOException {
      List<String> lines = new ArrayList<>();
      lines.add("strategy,reaper,published,failed_publishes,reaps,queue_recreations,unexpired_orphans,items,"
          + "queue_exists_at_end");
      for (Row r : rows) {
        lines.add(String.join(",", r.strategy(), r.reaper(), Long.toString(r.published()),
            Long.toString(r.failedPublishes()), Long.toString(r.reaps()), Long.toString(r.queueRecreations()),
            Long.toString(r.unexpiredOrphans()), Long.toString(r.items()), Boolean.toString(r.queueExistsAtEnd())));
      }
      Files.write(file, lines);
    }
  }
}
