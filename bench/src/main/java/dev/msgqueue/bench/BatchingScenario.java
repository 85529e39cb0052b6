package dev.msgqueue.bench;

import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.internal.publish.Publisher;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Scenario 2: {@link MsgQueueRepository#publishBatch} from one publisher, at each batch size, to the same hot
 * auto-deleted queue as scenario 1. Batch size 1 is the single-message rate the others are compared with.
 */
final class BatchingScenario implements Scenario {
  static final String ID = "batching";
  static final int PUBLISHERS = 1;

  private final BenchOptions options;
  private final MsgQueueConfig config;

  BatchingScenario(BenchOptions options, MsgQueueConfig config) {
    this.options = options;
    this.config = config;
  }

  @Override
  public String id() {
    return ID;
  }

  @Override
  public String title() {
    return "2. Batching: publishBatch from one publisher";
  }

  @Override
  public int steps() {
    return 4 * options.batchSizes().size();
  }

  @Override
  public Duration estimate() {
    return options.cellDuration().plus(options.warmup()).plusMillis(500).multipliedBy(steps());
  }

  @Override
  public Result run(BenchContext context) throws Exception {
    BenchDatabase database = context.database();
    Strategies.Message message = new Strategies.Message(
        PublishContentionScenario.HOT_QUEUE, BenchContext.PAYLOAD, PublishContentionScenario.MESSAGE_TTL);
    PgmqShape.create(database.control());
    // The four statements in turn at each batch size, so that a noisy machine weighs on them alike.
    List<ClosedLoopCell.Measurement> measured = new ArrayList<>();
    List<ClosedLoopCell.Measurement> inserted = new ArrayList<>();
    List<ClosedLoopCell.Measurement> copied = new ArrayList<>();
    List<ClosedLoopCell.Measurement> pgmq = new ArrayList<>();
    for (int batchSize : options.batchSizes()) {
      context.step(String.format(Locale.ROOT, "batching: publishBatch of %d", batchSize));
      database.reset();
      MsgQueueRepository repository = MsgQueueRepository.create(database.control(), config);
      repository.bindQueue(message.queue());
      database.flushStatistics();
      measured.add(ClosedLoopCell.run(database, Strategies.msgqueueBatch(message, repository, batchSize), PUBLISHERS,
          options.warmup(), options.cellDuration()));

      context.step(String.format(Locale.ROOT, "batching: insert statement of %d", batchSize));
      database.reset();
      MsgQueueRepository.create(database.control(), config).bindQueue(message.queue());
      database.flushStatistics();
      inserted.add(ClosedLoopCell.run(database, Strategies.insertBatch(message, config, batchSize), PUBLISHERS,
          options.warmup(), options.cellDuration()));

      context.step(String.format(Locale.ROOT, "batching: COPY of %d", batchSize));
      database.reset();
      MsgQueueRepository.create(database.control(), config).bindQueue(message.queue());
      database.flushStatistics();
      copied.add(ClosedLoopCell.run(database, Strategies.copyBatch(message, batchSize), PUBLISHERS,
          options.warmup(), options.cellDuration()));

      context.step(String.format(Locale.ROOT, "batching: pgmq-shaped send_batch of %d", batchSize));
      database.reset();
      PgmqShape.truncate(database.control());
      database.flushStatistics();
      pgmq.add(ClosedLoopCell.run(database, Strategies.pgmqSendBatch(message, batchSize), PUBLISHERS,
          options.warmup(), options.cellDuration()));
    }
    double single = Double.NaN;
    for (int i = 0; i < measured.size(); i++) {
      if (options.batchSizes().get(i) == 1) {
        single = measured.get(i).messagesPerSecond();
      }
    }
    List<Row> rows = rows(measured, single);
    List<Row> insertRows = rows(inserted, single);
    List<Row> copyRows = rows(copied, single);
    List<Row> pgmqRows = rows(pgmq, single);
    return new BatchingResult(PUBLISHERS, rows, insertRows, copyRows, pgmqRows);
  }

  private List<Row> rows(List<ClosedLoopCell.Measurement> cells, double single) {
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < cells.size(); i++) {
      ClosedLoopCell.Measurement m = cells.get(i);
      rows.add(new Row(options.batchSizes().get(i), m.windowSeconds(), m.calls(), m.messages(), m.callsPerSecond(),
          m.messagesPerSecond(), m.latency().p50Micros() / 1000, m.latency().p99Micros() / 1000,
          m.walBytesPerMessage(), m.messagesPerSecond() / single, m.failures(), m.firstFailure()));
    }
    return rows;
  }

  /** @param speedupOverSingle messages/s relative to batch size 1 (NaN when 1 was not measured) */
  record Row(
      int batchSize,
      double windowSeconds,
      long calls,
      long messages,
      double callsPerSecond,
      double messagesPerSecond,
      double p50Millis,
      double p99Millis,
      double walBytesPerMessage,
      double speedupOverSingle,
      long failures,
      String firstFailure) { }

  /**
   * @param rows {@code publishBatch} at each batch size
   * @param insertRows the payloads checked and inserted by the one statement {@code publishBatch} runs below its COPY
   *     size, at each batch size: what the COPY replaced at 100 and more
   * @param copyRows pgjdbc COPY of the same rows at each batch size (no ids, no heal), for comparison
   * @param pgmqRows the pgmq-shaped batch send at each batch size, into a table of pgmq's shape
   */
  record BatchingResult(
      int publishers, List<Row> rows, List<Row> insertRows, List<Row> copyRows, List<Row> pgmqRows) implements Result {
    Row copyRow(int batchSize) {
      return copyRows.stream().filter(r -> r.batchSize() == batchSize).findFirst().orElse(null);
    }

    Row row(int batchSize) {
      return rows.stream().filter(r -> r.batchSize() == batchSize).findFirst().orElse(null);
    }

    @Override
    public void printTable(PrintStream out) {
      String header = String.format(Locale.ROOT, "%-13s %6s %10s %11s %9s %9s %10s %8s %5s",
          "statement", "batch", "calls/s", "msg/s", "p50 ms", "p99 ms", "WAL B/msg", "x batch1", "fail");
      out.println(header);
      out.println("-".repeat(header.length()));
      for (Row r : rows) {
        printRow(out, "publishBatch", r);
      }
      for (Row r : insertRows) {
        printRow(out, "insert", r);
      }
      for (Row r : copyRows) {
        printRow(out, "COPY", r);
      }
      for (Row r : pgmqRows) {
        printRow(out, "pgmq-shape", r);
      }
      out.println("x batch1: messages/s relative to publishBatch of 1. insert: publishBatch's payload check and its"
          + " insert statement, which publishBatch uses below " + Publisher.COPY_MIN_BATCH + " messages and COPY from"
          + " there on. COPY returns no ids and cannot heal."
          + " pgmq-shape: pgmq's send_batch statement shape on a table of its shape (no foreign key).");
    }

    private static void printRow(PrintStream out, String statement, Row r) {
      out.printf(Locale.ROOT, "%-13s %6d %10.0f %11.0f %9.2f %9.2f %10.0f %8.2f %5d%n", statement, r.batchSize(),
          r.callsPerSecond(), r.messagesPerSecond(), r.p50Millis(), r.p99Millis(), r.walBytesPerMessage(),
          r.speedupOverSingle(), r.failures());
    }

    @Override
    public void writeCsv(Path file) throws IOException {
      List<String> lines = new ArrayList<>();
      lines.add("statement,batch_size,window_seconds,calls,messages,calls_per_second,messages_per_second,p50_ms,p99_ms,"
          + "wal_bytes_per_message,speedup_over_single,failures");
      for (Row r : rows) {
        lines.add(csv("publishBatch", r));
      }
      for (Row r : insertRows) {
        lines.add(csv("insert", r));
      }
      for (Row r : copyRows) {
        lines.add(csv("copy", r));
      }
      for (Row r : pgmqRows) {
        lines.add(csv("pgmq-shape", r));
      }
      Files.write(file, lines);
    }

    private static String csv(String statement, Row r) {
      return String.format(Locale.ROOT, "%s,%d,%.3f,%d,%d,%.1f,%.1f,%.3f,%.3f,%.1f,%.3f,%d", statement, r.batchSize(),
          r.windowSeconds(), r.calls(), r.messages(), r.callsPerSecond(), r.messagesPerSecond(), r.p50Millis(),
          r.p99Millis(), r.walBytesPerMessage(), r.speedupOverSingle(), r.failures());
    }
  }
}
