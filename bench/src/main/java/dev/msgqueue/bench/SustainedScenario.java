package dev.msgqueue.bench;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.ConsumeMode;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.Subscriber;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jooq.ExecuteListener;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.impl.DefaultConfiguration;

/**
 * Scenario 6: P publishers publish one message per call as fast as they can while one Subscriber (default settings,
 * at a given concurrency; and once in lease mode, the mode that writes acks) consumes the same queue, for a fixed
 * time. Reports published/s, handled/s, the backlog's slope, the publish-to-handler latency, and the most receipts
 * one ack statement carried (acks used to pile up here into statements of tens of thousands; the default mode's
 * claims take their messages and write none).
 */
final class SustainedScenario implements Scenario {
  static final String ID = "sustained";
  static final String QUEUE = "sustained";
  static final int PUBLISHERS = 8;
  static final Duration LEASE = Duration.ofSeconds(30);

  /** One run: the Subscriber's concurrency and mode. */
  record Cell(int concurrency, ConsumeMode consumeMode) {
    String mode() {
      return switch (consumeMode) {
        case TRANSACTION -> "transaction";
        case LEASE -> "lease";
        case AT_MOST_ONCE -> "take";
      };
    }

    boolean lease() {
      return consumeMode == ConsumeMode.LEASE;
    }
  }

  static final List<Cell> CELLS = List.of(new Cell(Subscriber.DEFAULT_CONCURRENCY, ConsumeMode.TRANSACTION),
      new Cell(16, ConsumeMode.TRANSACTION), new Cell(Subscriber.DEFAULT_CONCURRENCY, ConsumeMode.AT_MOST_ONCE),
      new Cell(Subscriber.DEFAULT_CONCURRENCY, ConsumeMode.LEASE));

  private final Duration runFor;

  SustainedScenario(Duration runFor) {
    this.runFor = runFor;
  }

  @Override
  public String id() {
    return ID;
  }

  @Override
  public String title() {
    return String.format(Locale.ROOT, "6. Sustained: %d publishers and one Subscriber (default settings) for %.1f s",
        PUBLISHERS, runFor.toMillis() / 1000.0);
  }

  @Override
  public int steps() {
    return CELLS.size();
  }

  @Override
  public Duration estimate() {
    return runFor.plusSeconds(2).multipliedBy(steps());
  }

  @Override
  public Result run(BenchContext context) throws Exception {
    List<Row> rows = new ArrayList<>();
    for (Cell cell : CELLS) {
      context.step(String.format(Locale.ROOT, "sustained: %d publishers, subscriber concurrency %d, %s mode",
          PUBLISHERS, cell.concurrency(), cell.mode()));
      context.database().reset();
      rows.add(runOne(context.database(), cell));
    }
    return new SustainedResult(PUBLISHERS, runFor.toMillis() / 1000.0, rows);
  }

  private Row runOne(BenchDatabase database, Cell cell) throws Exception {
    int concurrency = cell.concurrency();
    HikariConfig poolConfig = new HikariConfig();
    poolConfig.setJdbcUrl(database.url());
    // The publishers' connections, and the held-transaction mode's: one per handler, one batch ahead, one spare.
    poolConfig.setMaximumPoolSize(PUBLISHERS + concurrency + 4);
    poolConfig.setPoolName("sustained");
    try (HikariDataSource pool = new HikariDataSource(poolConfig)) {
      AtomicInteger largestAck = new AtomicInteger();
      MsgQueueRepository repository = MsgQueueRepository.create(DSL.using(new DefaultConfiguration().set(pool)
          .set(SQLDialect.POSTGRES).set(largestAckOf(largestAck))), MsgQueueConfig.defaults());
      QueueSpec queue = QueueSpec.durable(QUEUE);
      repository.bindQueue(queue);
      Map<Long, Long> publishedAt = new ConcurrentHashMap<>();
      Map<Long, Long> handledAt = new ConcurrentHashMap<>();
      AtomicLong published = new AtomicLong();
      AtomicLong failures = new AtomicLong();
      AtomicBoolean publishing = new AtomicBoolean(true);
      ExecutorService publishers = Executors.newFixedThreadPool(PUBLISHERS);
      long backlogAtStart;
      long backlogAtEnd;
      double seconds;
      Subscriber.Builder builder = Subscriber.builder(repository, queue,
          message -> handledAt.put(message.id(), System.nanoTime())).concurrency(concurrency)
          .mode(cell.consumeMode());
      if (cell.lease()) {
        builder.lease(LEASE);
      }
      try (Subscriber subscriber = builder.start()) {
        backlogAtStart = database.control().fetchCount(MESSAGE_QUEUE_ITEM);
        long started = System.nanoTime();
        for (int i = 0; i < PUBLISHERS; i++) {
          publishers.execute(() -> {
            while (publishing.get()) {
              long before = System.nanoTime();
              try {
                publishedAt.put(repository.publish(queue, BenchContext.PAYLOAD), before);
                published.incrementAndGet();
              } catch (RuntimeException e) {
                failures.incrementAndGet();
              }
            }
          });
        }
        Thread.sleep(runFor.toMillis());
        publishing.set(false);
        seconds = (System.nanoTime() - started) / 1e9;
        publishers.shutdown();
        publishers.awaitTermination(30, TimeUnit.SECONDS);
        backlogAtEnd = database.control().fetchCount(MESSAGE_QUEUE_ITEM);
      } finally {
        publishers.shutdownNow();
      }
      long handledInWindow = handledAt.size();
      long[] latencies = publishedAt.entrySet().stream()
          .filter(entry -> handledAt.containsKey(entry.getKey()))
          .mapToLong(entry -> handledAt.get(entry.getKey()) - entry.getValue())
          .sorted().toArray();
      return new Row(concurrency, cell.mode(), published.get(), handledInWindow, seconds, published.get() / seconds,
          handledInWindow / seconds, (backlogAtEnd - backlogAtStart) / seconds, percentileMillis(latencies, 0.50),
          percentileMillis(latencies, 0.99), failures.get(), largestAck.get());
    }
  }

  private static double percentileMillis(long[] sorted, double quantile) {
    if (sorted.length == 0) {
      return Double.NaN;
    }
    int index = (int) Math.min(sorted.length - 1, Math.ceil(quantile * sorted.length) - 1);
    return sorted[Math.max(0, index)] / 1e6;
  }

  /** @param backlogSlope messages/s by which the queue grew over the run (negative: it shrank) */
  record Row(int concurrency, String mode, long published, long handled, double seconds, double publishedPerSecond,
      double handledPerSecond, double backlogSlope, double p50Millis, double p99Millis, long publishFailures,
      int largestAck) { }

  /** Records the most receipts one ack statement carried: the length of its id array. */
  private static ExecuteListener largestAckOf(AtomicInteger largest) {
    return ExecuteListener.onExecuteStart(ctx -> {
      // Only deletes are folded and lowered: every statement of the run passes here, and the ack is sent as rendered
      // once, formatted over several lines.
      String raw = ctx.sql();
      if (raw == null || !raw.regionMatches(true, 0, "delete", 0, 6)) {
        return;
      }
      String sql = raw.replaceAll("\\s+", " ").toLowerCase(Locale.ROOT);
      if (sql.startsWith("delete from \"messagequeueitem\" using")) {
        ctx.query().getBindValues().stream().filter(Long[].class::isInstance).findFirst()
            .ifPresent(ids -> largest.accumulateAndGet(((Long[]) ids).length, Math::max));
      }
    });
  }

  record SustainedResult(int publishers, double seconds, List<Row> rows) implements Result {
    @Override
    public void printTable(PrintStream out) {
      String header = String.format(Locale.ROOT, "%5s %8s %11s %10s %10s %12s %9s %9s %5s %8s",
          "conc", "mode", "published/s", "handled/s", "handled", "backlog/s", "p50 ms", "p99 ms", "fail", "max ack");
      out.println(header);
      out.println("-".repeat(header.length()));
      for (Row r : rows) {
        out.printf(Locale.ROOT, "%5d %8s %11.0f %10.0f %10d %12.1f %9.2f %9.2f %5d %8d%n", r.concurrency(),
            r.mode(), r.publishedPerSecond(), r.handledPerSecond(), r.handled(), r.backlogSlope(), r.p50Millis(),
            r.p99Millis(), r.publishFailures(), r.largestAck());
      }
    }

    @Override
    public void writeCsv(Path file) throws IOException {
      List<String> lines = new ArrayList<>();
      lines.add("concurrency,mode,published,handled,seconds,published_per_second,handled_per_second,backlog_slope,"
          + "p50_ms,p99_ms,publish_failures,largest_ack");
      for (Row r : rows) {
        lines.add(String.format(Locale.ROOT, "%d,%s,%d,%d,%.3f,%.1f,%.1f,%.2f,%.3f,%.3f,%d,%d", r.concurrency(),
            r.mode(), r.published(), r.handled(), r.seconds(), r.publishedPerSecond(), r.handledPerSecond(), r.backlogSlope(),
            r.p50Millis(), r.p99Millis(), r.publishFailures(), r.largestAck()));
      }
      Files.write(file, lines);
    }
  }
}
