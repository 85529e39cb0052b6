package dev.msgqueue.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.Subscriber;
import dev.msgqueue.TransactionalQueue;
import dev.msgqueue.WakeupListener;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * Scenario 4, end to end: one publisher sends a steady stream to one queue, one {@link Subscriber} handles it, and
 * each message's latency is the time from the start of its publish call to the start of its handler. Run twice: with
 * wake-ups (the publishes NOTIFY, a {@link WakeupListener} wakes the subscriber) and without (polling only).
 *
 * <p>The stream is open loop: message {@code i} is due at {@code start + i / rate}, whatever happened to the ones before,
 * so a slow claim never slows the offered load down (a closed loop would hide exactly the delays measured here). The
 * payload carries the {@link System#nanoTime()} taken just before its publish call; publisher and subscriber run in
 * this JVM, so the handler subtracts it from its own clock.
 */
final class EndToEndScenario implements Scenario {
  static final String ID = "end-to-end";
  static final String WAKEUPS_ON = "wakeups-on";
  static final String WAKEUPS_OFF = "wakeups-off";
  /** The runs, in order; the first also pays for whatever the warm-up did not warm. */
  static final List<String> RUNS = List.of(WAKEUPS_ON, WAKEUPS_OFF);
  /** Durable: nothing here is about reaping, and the scenario runs no reaper. */
  static final QueueSpec QUEUE = QueueSpec.durable("bench-end-to-end");
  /**
   * The subscriber's concurrency and batch size, stated in the report: smaller than the library's defaults
   * ({@link Subscriber#DEFAULT_CONCURRENCY}, {@link Subscriber#DEFAULT_BATCH_SIZE}), which a 200 msg/s stream does not
   * need; latency here is set by the wake-up or the poll, not by how many handlers run.
   */
  static final int CONCURRENCY = 4;
  static final int BATCH_SIZE = 10;
  private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(5);
  private static final Duration LISTEN_TIMEOUT = Duration.ofSeconds(10);
  private static final ObjectMapper JSON = new ObjectMapper();

  private final EndToEndSettings settings;

  EndToEndScenario(EndToEndSettings settings) {
    this.settings = settings;
  }

  @Override
  public String id() {
    return ID;
  }

  @Override
  public String title() {
    return "4. End to end: publish -> subscriber handler latency at a steady rate, wake-ups on and off";
  }

  @Override
  public int steps() {
    return RUNS.size();
  }

  @Override
  public Duration estimate() {
    // Stream, then the last poll interval's messages, then pool start-up and close.
    return settings.warmup().plus(settings.publishFor()).plus(settings.pollInterval()).plusSeconds(1)
        .multipliedBy(steps());
  }

  @Override
  public Result run(BenchContext context) throws Exception {
    MsgQueueConfig defaults = MsgQueueConfig.defaults();
    List<Row> rows = new ArrayList<>();
    for (String run : RUNS) {
      context.step(String.format(Locale.ROOT, "end to end: %s, %d msg/s for %.1f s, poll interval %.2f s", run,
          settings.ratePerSecond(), settings.publishFor().toMillis() / 1000.0,
          settings.pollInterval().toMillis() / 1000.0));
      rows.add(runOne(context.database(), run.equals(WAKEUPS_ON)));
    }
    return new EndToEndResult(settings.ratePerSecond(), settings.publishFor().toMillis() / 1000.0,
        settings.warmup().toMillis() / 1000.0, settings.pollInterval().toMillis() / 1000.0,
        settings.libraryPollInterval(), defaults.wakeupWindow().toMillis(), CONCURRENCY, BATCH_SIZE,
        settings.drainTimeout().toMillis() / 1000.0, rows);
  }

  private Row runOne(BenchDatabase database, boolean wakeups) throws Exception {
    database.reset();
    // Everything else at the library defaults, so the only difference between the runs is the wake-ups.
    MsgQueueConfig config = MsgQueueConfig.builder().wakeupNotifications(wakeups).build();
    Handled handled = new Handled();
    HikariConfig poolConfig = new HikariConfig();
    poolConfig.setJdbcUrl(database.url());
    poolConfig.setPoolName("bench-end-to-end");
    // Each handler acks on its own connection; the claimer (claims, keep-alives) needs one more; one spare.
    poolConfig.setMaximumPoolSize(CONCURRENCY + 2);
    try (HikariDataSource pool = new HikariDataSource(poolConfig);
        // The publisher's own connection: it never waits for a pool connection the handlers hold.
        Connection publisherConnection = database.connect()) {
      MsgQueueRepository repository = MsgQueueRepository.create(pool, config);
      // The same repository's coalescing, as one service sharing one repository would have it.
      TransactionalQueue publisher =
          repository.inTransaction(DSL.using(publisherConnection, SQLDialect.POSTGRES));
      // Its own DriverManager connection, never the pool's: a LISTEN connection is held for good.
      WakeupListener listener = wakeups ? WakeupListener.start(database::connect) : null;
      try {
        if (listener != null) {
          awaitListening(listener);
        }
        Subscriber subscriber = Subscriber.builder(repository, QUEUE, handled::handle)
            .concurrency(CONCURRENCY)
            .batchSize(BATCH_SIZE)
            .pollInterval(settings.pollInterval())
            .wakeups(listener)
            .closeTimeout(CLOSE_TIMEOUT)
            .start();
        PublishedStream stream;
        long drainStarted;
        boolean drained;
        try {
          stream = publish(publisher);
          drainStarted = System.nanoTime();
          drained = handled.await(stream.publishedTotal(), settings.drainTimeout());
        } finally {
          subscriber.close(CLOSE_TIMEOUT);
        }
        double drainSeconds = (System.nanoTime() - drainStarted) / 1e9;
        return handled.row(wakeups ? WAKEUPS_ON : WAKEUPS_OFF, wakeups, settings.ratePerSecond(), stream,
            drainSeconds, drained, database.items());
      } finally {
        if (listener != null) {
          listener.close();
        }
      }
    }
  }

  /** The warm-up stream followed without a pause by the measured one, on one schedule. */
  private PublishedStream publish(TransactionalQueue publisher) {
    int rate = settings.ratePerSecond();
    int warmupCount = (int) (settings.warmup().toNanos() * rate / 1_000_000_000L);
    int measuredCount = (int) Math.max(1, settings.publishFor().toNanos() * rate / 1_000_000_000L);
    int total = warmupCount + measuredCount;
    long start = System.nanoTime();
    long firstMeasuredDue = start + warmupCount * 1_000_000_000L / rate;
    long lastMeasuredSent = 0;
    long maxLagNanos = 0;
    long publishedMeasured = 0;
    long publishedTotal = 0;
    long failures = 0;
    String firstFailure = null;
    for (int seq = 0; seq < total; seq++) {
      // Computed from the start each time, so rounding never accumulates into drift.
      long due = start + seq * 1_000_000_000L / rate;
      sleepUntil(due);
      boolean warmup = seq < warmupCount;
      long sent = System.nanoTime();
      if (!warmup) {
        maxLagNanos = Math.max(maxLagNanos, sent - due);
        lastMeasuredSent = sent;
      }
      try {
        publisher.publish(QUEUE, payload(seq, sent, warmup));
        publishedTotal++;
        publishedMeasured += warmup ? 0 : 1;
      } catch (RuntimeException e) {
        failures++;
        firstFailure = firstFailure == null ? e.toString() : firstFailure;
      }
    }
    return new PublishedStream(measuredCount, publishedMeasured, publishedTotal, failures, firstFailure, firstMeasuredDue,
        lastMeasuredSent, 1_000_000_000L / rate, maxLagNanos);
  }

  /** The benchmark's usual payload fields plus what the handler needs: sequence number, send time, warm-up flag. */
  private static String payload(int seq, long sentNanos, boolean warmup) {
    String common = BenchContext.PAYLOAD.data();
    return "{\"seq\": " + seq + ", \"sentNanos\": " + sentNanos + ", \"warmup\": " + warmup + ", "
        + common.substring(common.indexOf('{') + 1);
  }

  private static void awaitListening(WakeupListener listener) throws InterruptedException {
    // Otherwise the first messages' notifications go to nobody, and the run measures polling after all.
    long deadline = System.nanoTime() + LISTEN_TIMEOUT.toNanos();
    while (!listener.isListening()) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the wake-up listener did not connect within " + LISTEN_TIMEOUT);
      }
      Thread.sleep(5);
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
   * What the publisher did.
   *
   * @param measuredCount how many measured messages were due
   * @param firstMeasuredDueNanos when the first measured message was due (it may have been sent later)
   * @param periodNanos the schedule's nominal gap between two messages
   * @param maxLagNanos how far behind its schedule the publisher ever was in the measured stream
   */
  private record PublishedStream(
      long measuredCount,
      long publishedMeasured,
      long publishedTotal,
      long failures,
      String firstFailure,
      long firstMeasuredDueNanos,
      long lastMeasuredSentNanos,
      long periodNanos,
      long maxLagNanos) { }

  /** The handler's record of what it saw; called on the subscriber's handler threads. */
  private static final class Handled {
    private final Latencies latencies = new Latencies(); // guarded by this
    private final BitSet seen = new BitSet(); // guarded by this
    private long total; // guarded by this
    private long measured; // guarded by this
    private long duplicates; // guarded by this
    private long lastMeasuredNanos; // guarded by this

    void handle(ClaimedMessage message) throws IOException {
      long now = System.nanoTime(); // first: parsing the payload is the handler's work, not the queue's
      JsonNode payload = JSON.readTree(message.payload());
      int seq = payload.path("seq").asInt(-1);
      long sent = payload.path("sentNanos").asLong();
      boolean warmup = payload.path("warmup").asBoolean();
      if (seq < 0) {
        throw new IOException("a payload without its sequence number: " + message.payload());
      }
      synchronized (this) {
        if (seen.get(seq)) {
          // Never expected (the default mode is at most once per claim), but counted rather than assumed.
          duplicates++;
          return;
        }
        seen.set(seq);
        total++;
        notifyAll();
        if (!warmup) {
          measured++;
          lastMeasuredNanos = now;
          latencies.record(now - sent);
        }
      }
    }

    /** Waits until {@code expected} distinct messages were handled; @return whether they were within the timeout. */
    synchronized boolean await(long expected, Duration timeout) throws InterruptedException {
      long deadline = System.nanoTime() + timeout.toNanos();
      while (total < expected) {
        long remaining = deadline - System.nanoTime();
        if (remaining <= 0) {
          return false;
        }
        TimeUnit.NANOSECONDS.timedWait(this, remaining);
      }
      return true;
    }

    synchronized Row row(String run, boolean wakeups, int rate, PublishedStream stream, double drainSeconds,
        boolean drained, long itemsLeft) {
      double[] millis = latencies.percentilesMillis(0.50, 0.95, 0.99, 1.0);
      // Both rates over a span starting when the first measured message was due, not when it was sent: a publisher
      // that starts late and catches up back to back must not look faster than the schedule. The publisher's span
      // ends one period after its last send (a stream on schedule gives exactly the target), the handlers' at the
      // last measured handler start.
      double publishedPerSecond = stream.publishedMeasured() / ((stream.lastMeasuredSentNanos()
          - stream.firstMeasuredDueNanos() + stream.periodNanos()) / 1e9);
      double handledPerSecond = measured == 0 ? Double.NaN
          : measured / ((lastMeasuredNanos - stream.firstMeasuredDueNanos()) / 1e9);
      return new Row(run, wakeups, rate, stream.measuredCount(), stream.publishedMeasured(), measured,
          stream.publishedMeasured() - measured, duplicates, stream.failures(), stream.firstFailure(),
          millis[0], millis[1], millis[2], millis[3], publishedPerSecond, handledPerSecond,
          stream.maxLagNanos() / 1e6, drainSeconds, drained, itemsLeft);
    }
  }

  /**
   * One run.
   *
   * @param due measured messages the schedule called for
   * @param published measured messages published (warm-up messages are handled too, but counted nowhere here)
   * @param handled distinct measured messages whose handler ran before the drain ended
   * @param notHandled published but not handled when the drain ended (or its timeout ran out)
   * @param duplicates handler runs for a message already handled
   * @param p50Millis latency percentiles from the start of the publish call to the start of the handler
   * @param publishedPerSecond the rate the publisher achieved over the measured stream, from when its first message
   *     was due; at most the target rate
   * @param handledPerSecond measured messages handled per second from when the first measured message was due to the
   *     last handler start of a measured message (so it includes one tail latency)
   * @param maxPublishLagMillis how far the publisher ever fell behind its schedule
   * @param drainSeconds from the last publish until every message was handled, or until the drain timed out
   * @param drained whether every published message (warm-up ones included) was handled within the drain timeout
   * @param itemsLeft items still in the table after the subscriber closed (warm-up ones included)
   */
  record Row(
      String run,
      boolean wakeups,
      int targetRate,
      long due,
      long published,
      long handled,
      long notHandled,
      long duplicates,
      long publishFailures,
      String firstFailure,
      double p50Millis,
      double p95Millis,
      double p99Millis,
      double maxMillis,
      double publishedPerSecond,
      double handledPerSecond,
      double maxPublishLagMillis,
      double drainSeconds,
      boolean drained,
      long itemsLeft) { }

  record EndToEndResult(
      int targetRate,
      double publishSeconds,
      double warmupSeconds,
      double pollIntervalSeconds,
      boolean libraryDefaultPollInterval,
      long wakeupWindowMillis,
      int concurrency,
      int batchSize,
      double drainTimeoutSeconds,
      List<Row> rows) implements Result {

    @Override
    public void printTable(PrintStream out) {
      out.printf(Locale.ROOT, "%d msg/s for %.1f s after %.1f s warm-up, open loop, one publisher; one subscriber"
              + " (concurrency %d, batch %d; the library's defaults are %d and %d; poll interval %.2f s%s);"
              + " wake-up window %d ms%n", targetRate,
          publishSeconds, warmupSeconds, concurrency, batchSize, Subscriber.DEFAULT_CONCURRENCY,
          Subscriber.DEFAULT_BATCH_SIZE, pollIntervalSeconds,
          libraryDefaultPollInterval ? ", the library default" : ", overridden: the library default is "
              + EndToEndSettings.LIBRARY_POLL_INTERVAL.toSeconds() + " s",
          wakeupWindowMillis);
      String header = String.format(Locale.ROOT, "%-11s %9s %8s %9s %8s %8s %8s %8s %8s %9s %7s %7s",
          "run", "published", "handled", "unhandled", "p50 ms", "p95 ms", "p99 ms", "max ms", "sent/s", "handled/s",
          "lag ms", "drain s");
      out.println(header);
      out.println("-".repeat(header.length()));
      for (Row r : rows) {
        out.printf(Locale.ROOT, "%-11s %9d %8d %9d %8.1f %8.1f %8.1f %8.1f %8.0f %9.0f %7.0f %7.2f%n", r.run(),
            r.published(), r.handled(), r.notHandled(), r.p50Millis(), r.p95Millis(), r.p99Millis(), r.maxMillis(),
            r.publishedPerSecond(), r.handledPerSecond(), r.maxPublishLagMillis(), r.drainSeconds());
      }
      out.println("latency: start of the publish call to the start of the handler; sent/s and handled/s run from"
          + " when the first message was due to the last send / handler start;");
      out.println("lag: how far the publisher fell behind its schedule at worst (its messages were sent that late).");
      for (Row r : rows) {
        if (!r.drained() || r.duplicates() > 0 || r.publishFailures() > 0 || r.itemsLeft() > 0
            || r.published() < r.due()) {
          out.printf(Locale.ROOT, "%s: %d of %d due published, %d publish failures (%s), %d duplicates, %d items left"
                  + " in the table%s%n", r.run(), r.published(), r.due(), r.publishFailures(), r.firstFailure(),
              r.duplicates(), r.itemsLeft(), r.drained() ? "" : ", drain timed out");
        }
      }
    }

    @Override
    public void writeCsv(Path file) throws IOException {
      List<String> lines = new ArrayList<>();
      lines.add("run,wakeups,target_rate,poll_interval_seconds,due,published,handled,not_handled,duplicates,"
          + "publish_failures,items_left,p50_ms,p95_ms,p99_ms,max_ms,published_per_second,handled_per_second,"
          + "max_publish_lag_ms,drain_seconds,drained");
      for (Row r : rows) {
        lines.add(String.format(Locale.ROOT, "%s,%b,%d,%.3f,%d,%d,%d,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.1f,%.1f,%.3f,%.3f,%b",
            r.run(), r.wakeups(), r.targetRate(), pollIntervalSeconds, r.due(), r.published(), r.handled(),
            r.notHandled(), r.duplicates(), r.publishFailures(), r.itemsLeft(), r.p50Millis(), r.p95Millis(),
            r.p99Millis(), r.maxMillis(), r.publishedPerSecond(), r.handledPerSecond(), r.maxPublishLagMillis(),
            r.drainSeconds(), r.drained()));
      }
      Files.write(file, lines);
    }
  }
}
