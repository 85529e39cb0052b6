package dev.msgqueue.bench;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.jooq.impl.DSL.generateSeries;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.lpad;
import static org.jooq.impl.DSL.max;
import static org.jooq.impl.DSL.min;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.val;
import static org.jooq.impl.DSL.when;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueStatisticsSnapshot;
import dev.msgqueue.console.Console;
import dev.msgqueue.console.ConsoleRequest;
import dev.msgqueue.console.ConsoleResponse;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
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
import org.jooq.DSLContext;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.jooq.Field;
import org.jooq.Record1;
import org.jooq.SQLDialect;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.DefaultExecuteListenerProvider;
import org.jooq.types.DayToSecond;

/**
 * The operations console at scale (opt-in: {@code --scenarios console}, not in the default run): fills the database
 * with {@code --console-queues} queues (default 100,000) and {@code --console-messages} messages (default 10
 * million) spread as a service's are (ten large queues hold half, the rest a few dozen each; some delayed, in flight
 * or expired; 10,000 dead letters), then asks the console for each view {@code --console-requests} times through
 * {@link Console#handle}, the whole server side of a page view without the HTTP server. It reports per view the
 * p50/p95/max time of a request and the slowest statement a request ran, each statement timed from its execution to
 * its last row by an {@link ExecuteListener} on the console's and the repository's connections (the client's view of
 * the statement: its server time plus one loopback round trip). The statistics read that refreshes the counts runs in
 * the background at most once a minute while pages are open; it is timed on its own.
 */
final class ConsoleScenario implements Scenario {
  static final String ID = "console";
  /** The ten large queues: half of the messages, interleaved as publishes to them arrive. */
  static final int LARGE_QUEUES = 10;
  /** The durable "service" queues among the first queues; the rest are auto-deleted tenant queues. */
  static final int DURABLE_QUEUES = 100;
  static final int DEAD_LETTERS = 10_000;
  static final String DEAD_LETTER_QUEUE = "orders.dead";

  private final ConsoleSettings settings;

  ConsoleScenario(ConsoleSettings settings) {
    this.settings = settings;
  }

  @Override
  public String id() {
    return ID;
  }

  @Override
  public String title() {
    return String.format(Locale.ROOT, "Console: server-side time per view at %,d queues and %,d messages",
        settings.queues(), settings.messages());
  }

  @Override
  public int steps() {
    return 2 + views(settings, new Fixtures("", "", "", 0, 0, "", 0)).size();
  }

  @Override
  public Duration estimate() {
    if (settings.existingDatabase() != null) {
      return Duration.ofSeconds(60 + (long) steps() * settings.requests() / 10);
    }
    // The fill: about 40,000 messages a second on a 2-core machine, then VACUUM ANALYZE; then the requests.
    return Duration.ofSeconds(settings.messages() / 40_000 + 60
        + (long) steps() * settings.requests() / 10);
  }

  /** What the views ask for: names and ids from the filled database. */
  record Fixtures(String largeQueue, String smallQueue, String middleQueue, long largeQueueMiddleId, long messageId,
      String deadLetterQueue, long deadLetterMiddleId) { }

  /** One view (or one page of a view) and the request that opens it. */
  record View(String name, String path, Map<String, String> query) { }

  static List<View> views(ConsoleSettings settings, Fixtures f) {
    return List.of(
        new View("page (static)", "/", Map.of()),
        new View("session", "/api/session", Map.of()),
        new View("queues by name, first page", "/api/queues", Map.of("sort", "name")),
        new View("queues by name, jump to the middle", "/api/queues", Map.of("sort", "name", "from", f.middleQueue())),
        new View("queues by depth, first page", "/api/queues", Map.of("sort", "depth")),
        new View("queues by depth, row 50,000", "/api/queues", Map.of("sort", "depth", "page",
            "o:" + Math.min(50_000, Math.max(0, settings.queues() - 50)))),
        new View("queues by last activity, first page", "/api/queues", Map.of("sort", "lastActive")),
        new View("queues by last activity, row 10,000", "/api/queues", Map.of("sort", "lastActive", "page",
            "o:10000")),
        new View("one large queue (counts from the snapshot)", "/api/queue", Map.of("name", f.largeQueue())),
        new View("one small queue (exact counts)", "/api/queue", Map.of("name", f.smallQueue())),
        new View("a large queue's messages, a middle page", "/api/messages", Map.of("queue", f.largeQueue(),
            "after", Long.toString(f.largeQueueMiddleId()))),
        new View("one message", "/api/message", Map.of("id", Long.toString(f.messageId()))),
        new View("dead letters, every queue", "/api/dead-letters", Map.of()),
        new View("dead letters of one queue, a middle page", "/api/dead-letters", Map.of("queue", f.deadLetterQueue(),
            "after", Long.toString(f.deadLetterMiddleId()))),
        new View("housekeeping", "/api/housekeeping", Map.of()),
        new View("throughput", "/api/throughput", Map.of()));
  }

  @Override
  public Result run(BenchContext context) throws Exception {
    BenchDatabase database = context.database();
    String url = database.url();
    long fillStart = System.nanoTime();
    if (settings.existingDatabase() == null) {
      database.reset();
      context.step(String.format(Locale.ROOT, "console: fill %,d queues and %,d messages, then VACUUM ANALYZE",
          settings.queues(), settings.messages()));
      fill(database.control());
    } else {
      context.step("console: measure database " + settings.existingDatabase() + " as it is (no fill)");
      url = database.urlOf(settings.existingDatabase());
    }
    double fillSeconds = (System.nanoTime() - fillStart) / 1e9;

    StatementTimes times = new StatementTimes();
    HikariConfig poolConfig = new HikariConfig();
    poolConfig.setJdbcUrl(url);
    poolConfig.setMaximumPoolSize(4);
    poolConfig.setPoolName("bench-console");
    try (HikariDataSource pool = new HikariDataSource(poolConfig)) {
      DSLContext timed = DSL.using(pool, SQLDialect.POSTGRES);
      timed.configuration().set(new DefaultExecuteListenerProvider(times));
      MsgQueueRepository repository = MsgQueueRepository.create(timed, MsgQueueConfig.defaults());

      context.step("console: the statistics read (what refreshes the counts in the background)");
      Latencies statisticsReads = new Latencies();
      QueueStatisticsSnapshot snapshot = null;
      times.view("statistics read");
      for (int i = 0; i < settings.statisticsReads(); i++) {
        long start = System.nanoTime();
        snapshot = repository.estimatedQueueStatistics();
        statisticsReads.record(System.nanoTime() - start);
      }
      Fixtures fixtures = fixtures(DSL.using(pool, SQLDialect.POSTGRES), snapshot);
      List<Row> rows = new ArrayList<>();
      rows.add(row("statistics read (background, at most once a minute while pages are open)", statisticsReads,
          times.summary("statistics read")));

      try (Console console = Console.builder(repository, timed).actionsEnabled(true).build()) {
        // The first page waits for the console's first statistics read; every later one is served from it.
        times.view("first page");
        console.handle(request(new View("first", "/api/queues", Map.of("sort", "depth"))));
        times.view("background");
        for (View view : views(settings, fixtures)) {
          context.step("console: " + view.name() + " x " + settings.requests());
          Latencies latencies = new Latencies();
          times.view(view.name());
          for (int i = 0; i < settings.requests(); i++) {
            long start = System.nanoTime();
            ConsoleResponse response = console.handle(request(view));
            latencies.record(System.nanoTime() - start);
            if (response.status() != 200) {
              throw new IllegalStateException(view.name() + " answered " + response.status() + ": "
                  + response.text());
            }
          }
          times.view("background");
          rows.add(row(view.name(), latencies, times.summary(view.name())));
        }
        rows.add(row("statistics read by the console in the background meanwhile", new Latencies(),
            times.summary("background")));
      }
      long messages = DSL.using(pool, SQLDialect.POSTGRES).select(DSL.field(DSL.name("reltuples"), Double.class))
          .from(DSL.table(DSL.name("pg_catalog", "pg_class")))
          .where("oid = to_regclass({0})", val(timed.render(MESSAGE_QUEUE_ITEM))) // a regclass has no jOOQ type
          .fetchOne(0, Double.class).longValue();
      return new ConsoleResult(settings.existingDatabase(), snapshot == null ? 0 : snapshot.queues().size(),
          messages, snapshot != null && snapshot.sampled(), settings.requests(), Math.round(fillSeconds), rows);
    }
  }

  private static ConsoleRequest request(View view) {
    return new ConsoleRequest("GET", view.path(), view.query(), Map.of(), new byte[0], "bench", Map.of());
  }

  private static Row row(String view, Latencies latencies, StatementTimes.Summary statements) {
    double[] p = latencies.size() == 0 ? new double[] {Double.NaN, Double.NaN, Double.NaN}
        : latencies.percentilesMillis(0.50, 0.95, 1.0);
    return new Row(view, latencies.size(), p[0], p[1], p[2], statements.perRequest(latencies.size()),
        statements.p95Millis(), statements.slowestMillis(), statements.slowestSql());
  }

  /**
   * Fills the tables, typed INSERT ... SELECT over generate_series: queues first (ten large durable ones, the other
   * durable "service" queues, then auto-deleted tenant queues, last active over the past two hours), then the
   * messages interleaved over the queues as publishes arrive, then the dead letters with their failure records.
   */
  private void fill(DSLContext ctx) {
    int queues = settings.queues();
    Table<Record1<Integer>> queueSeries = generateSeries(1, queues).as("q", "n");
    Field<Integer> n = queueSeries.field("n", Integer.class);
    ctx.insertInto(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME, MESSAGE_QUEUE.DURABLE, MESSAGE_QUEUE.AUTO_DELETED,
            MESSAGE_QUEUE.EXCLUSIVE, MESSAGE_QUEUE.LAST_ACTIVE)
        .select(select(queueName(n), n.le(DURABLE_QUEUES), n.gt(DURABLE_QUEUES), inline(false),
            BenchSql.utcNow().minus(val(DayToSecond.valueOf(Duration.ofSeconds(1)))
                .mul(n.mul(7919).mod(7200))))
            .from(queueSeries))
        .execute();
    ctx.insertInto(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME, MESSAGE_QUEUE.DURABLE, MESSAGE_QUEUE.AUTO_DELETED,
            MESSAGE_QUEUE.EXCLUSIVE)
        .values(DEAD_LETTER_QUEUE, true, false, false)
        .execute();

    int messages = settings.messages();
    int half = messages / 2;
    Table<Record1<Integer>> series = generateSeries(1, messages).as("m", "i");
    Field<Integer> i = series.field("i", Integer.class);
    Field<Integer> queue = when(i.le(half), i.minus(1).mod(LARGE_QUEUES).plus(1))
        .otherwise(inline(LARGE_QUEUES + 1).plus(i.minus(half + 1).mod(Math.max(1, queues - LARGE_QUEUES))));
    Field<Integer> bucket = i.mod(100);
    // 90% ready (readable up to 10 minutes ago), 5% delayed 10 minutes, 3% in flight (claimed with a 5-minute lease),
    // 2% expired a minute ago.
    ctx.insertInto(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.PAYLOAD, MESSAGE_QUEUE_ITEM.READ_AFTER,
            MESSAGE_QUEUE_ITEM.EXPIRES_AT, MESSAGE_QUEUE_ITEM.QUEUE_ID, MESSAGE_QUEUE_ITEM.STATUS)
        .select(select(val(BenchContext.PAYLOAD),
            when(bucket.lt(5), BenchSql.utcNowPlus(Duration.ofMinutes(10)))
                .when(bucket.lt(8), BenchSql.utcNowPlus(Duration.ofMinutes(5)))
                .otherwise(BenchSql.utcNow().minus(val(DayToSecond.valueOf(Duration.ofSeconds(1)))
                    .mul(i.mod(600)))),
            when(bucket.ge(98), BenchSql.utcNowMinus(Duration.ofMinutes(1)))
                .otherwise(BenchSql.utcNowPlus(Duration.ofHours(1))),
            queueName(queue),
            when(bucket.between(5, 7), inline(MessageQueueItemStatus.ASSIGNED))
                .otherwise(inline(MessageQueueItemStatus.PENDING)))
            .from(series))
        .execute();

    Table<Record1<Integer>> deadSeries = generateSeries(1, DEAD_LETTERS).as("d", "k");
    var dead = DSL.name("dead").fields("id").as(ctx.insertInto(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.PAYLOAD,
            MESSAGE_QUEUE_ITEM.READ_AFTER, MESSAGE_QUEUE_ITEM.EXPIRES_AT, MESSAGE_QUEUE_ITEM.QUEUE_ID,
            MESSAGE_QUEUE_ITEM.STATUS)
        .select(select(val(BenchContext.PAYLOAD), BenchSql.utcNow(),
            BenchSql.utcNowPlus(Duration.ofDays(14)), inline(DEAD_LETTER_QUEUE),
            inline(MessageQueueItemStatus.PENDING)).from(deadSeries))
        .returningResult(MESSAGE_QUEUE_ITEM.ID));
    Field<Long> deadId = dead.field("id", Long.class);
    ctx.with(dead)
        .insertInto(MESSAGE_QUEUE_ITEM_FAILURE, MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID,
            MESSAGE_QUEUE_ITEM_FAILURE.FAILED_DELIVERIES, MESSAGE_QUEUE_ITEM_FAILURE.LAST_ERROR_CLASS,
            MESSAGE_QUEUE_ITEM_FAILURE.LAST_ERROR_MESSAGE, MESSAGE_QUEUE_ITEM_FAILURE.LAST_FAILED_AT,
            MESSAGE_QUEUE_ITEM_FAILURE.ORIGINAL_QUEUE_ID, MESSAGE_QUEUE_ITEM_FAILURE.DEAD_LETTERED_AT)
        .select(select(deadId, inline(5), inline("java.net.SocketTimeoutException"), inline("Read timed out"),
            BenchSql.utcNow(), inline(queueNameOf(1)), BenchSql.utcNow())
            .from(dead))
        .execute();
    // jOOQ has no VACUUM statement. The server this benchmark runs on may have autovacuum off; a production server
    // would have analyzed and vacuumed a table after such a load (the visibility map lets the bounded counts read
    // the index alone).
    ctx.execute("VACUUM (ANALYZE) " + ctx.render(MESSAGE_QUEUE) + ", " + ctx.render(MESSAGE_QUEUE_ITEM) + ", "
        + ctx.render(MESSAGE_QUEUE_ITEM_FAILURE));

  }

  /**
   * What the views ask for, read from the database as it is (filled here or not): the queue holding the most
   * messages and one holding a few, the queue in the middle of the name order, a middle page of the large queue and of
   * the first dead-letter queue.
   */
  private static Fixtures fixtures(DSLContext ctx, QueueStatisticsSnapshot snapshot) {
    List<dev.msgqueue.QueueStatistics> queues = snapshot == null ? List.of() : snapshot.queues();
    String large = queues.stream().max(java.util.Comparator.comparingLong(dev.msgqueue.QueueStatistics::total))
        .map(dev.msgqueue.QueueStatistics::queue).orElse("none");
    String small = queues.stream().filter(q -> q.total() > 0 && q.total() <= 1_000)
        .map(dev.msgqueue.QueueStatistics::queue).findFirst().orElse(large);
    String middle = queues.isEmpty() ? "m" : queues.get(queues.size() / 2).queue();
    var range = ctx.select(min(MESSAGE_QUEUE_ITEM.ID), max(MESSAGE_QUEUE_ITEM.ID)).from(MESSAGE_QUEUE_ITEM)
        .where(MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(large)).fetchOne();
    String deadLetterQueue = ctx.select(MESSAGE_QUEUE_ITEM.QUEUE_ID).from(MESSAGE_QUEUE_ITEM_FAILURE)
        .join(MESSAGE_QUEUE_ITEM).on(MESSAGE_QUEUE_ITEM.ID.eq(MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID))
        .where(MESSAGE_QUEUE_ITEM_FAILURE.DEAD_LETTERED_AT.isNotNull()).limit(1).fetchOne(0, String.class);
    var deadRange = ctx.select(min(MESSAGE_QUEUE_ITEM.ID), max(MESSAGE_QUEUE_ITEM.ID)).from(MESSAGE_QUEUE_ITEM)
        .where(MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(deadLetterQueue == null ? DEAD_LETTER_QUEUE : deadLetterQueue))
        .fetchOne();
    return new Fixtures(large, small, middle, range.value1() == null ? 0 : (range.value1() + range.value2()) / 2,
        range.value1() == null ? 1 : range.value1(), deadLetterQueue == null ? DEAD_LETTER_QUEUE : deadLetterQueue,
        deadRange.value1() == null ? 0 : (deadRange.value1() + deadRange.value2()) / 2);
  }

  private static Field<String> queueName(Field<Integer> n) {
    return when(n.le(DURABLE_QUEUES), inline("service-").concat(lpad(n.cast(String.class), 4, "0")))
        .otherwise(inline("tenant-").concat(lpad(n.cast(String.class), 6, "0")).concat(inline("-events")));
  }

  private static String queueNameOf(int n) {
    return n <= DURABLE_QUEUES ? String.format(Locale.ROOT, "service-%04d", n)
        : String.format(Locale.ROOT, "tenant-%06d-events", n);
  }

  /** Statement times per view, recorded by an {@link ExecuteListener} on the thread that runs the view. */
  static final class StatementTimes implements ExecuteListener {
    private static final long serialVersionUID = 1L;
    private final transient ThreadLocal<String> view = ThreadLocal.withInitial(() -> "background");
    private final transient Map<String, List<Statement>> statements = new ConcurrentHashMap<>();

    record Statement(String sql, long nanos) { }

    record Summary(int statements, double p95Millis, double slowestMillis, String slowestSql) {
      double perRequest(int requests) {
        return requests == 0 ? statements : (double) statements / requests;
      }
    }

    /** The view the statements this thread runs from now on belong to. */
    void view(String name) {
      view.set(name);
    }

    @Override
    public void executeStart(ExecuteContext ctx) {
      ctx.data("bench.start", System.nanoTime());
    }

    @Override
    public void end(ExecuteContext ctx) {
      Object start = ctx.data("bench.start");
      if (start == null) {
        return;
      }
      String label = Thread.currentThread().getName().startsWith("msgqueue-console") ? "background" : view.get();
      statements.computeIfAbsent(label, key -> java.util.Collections.synchronizedList(new ArrayList<>()))
          .add(new Statement(ctx.sql(), System.nanoTime() - (Long) start));
    }

    Summary summary(String label) {
      List<Statement> of = statements.getOrDefault(label, List.of());
      synchronized (of) {
        Statement slowest = null;
        Latencies all = new Latencies();
        for (Statement statement : of) {
          all.record(statement.nanos());
          if (slowest == null || statement.nanos() > slowest.nanos()) {
            slowest = statement;
          }
        }
        return new Summary(of.size(), all.size() == 0 ? Double.NaN : all.percentilesMillis(0.95)[0],
            slowest == null ? Double.NaN : slowest.nanos() / 1e6, slowest == null ? "" : shorten(slowest.sql()));
      }
    }

    private static String shorten(String sql) {
      String flat = sql.replaceAll("\\s+", " ");
      return flat.length() <= 160 ? flat : flat.substring(0, 157) + "...";
    }
  }

  /** One view's figures; times in milliseconds. */
  record Row(String view, int requests, double p50Millis, double p95Millis, double maxMillis,
      double statementsPerRequest, double statementP95Millis, double slowestStatementMillis,
      String slowestStatement) { }

  record ConsoleResult(String database, int queues, long messages, boolean statisticsSampled, int requestsPerView,
      long fillSeconds, List<Row> rows) implements Result {
    @Override
    public void printTable(PrintStream out) {
      out.printf(Locale.ROOT, "%s%,d queues, about %,d messages (the planner's estimate); statistics %s; %d requests"
          + " per view%s%n", database == null ? "" : "database " + database + ": ", queues, messages,
          statisticsSampled ? "sampled" : "exact", requestsPerView,
          database == null ? "; filled in " + fillSeconds + " s" : "");
      out.printf(Locale.ROOT, "%-58s %8s %8s %8s %6s %10s %10s%n", "view", "p50 ms", "p95 ms", "max ms", "stmts",
          "stmt p95", "stmt max");
      for (Row row : rows) {
        out.printf(Locale.ROOT, "%-58s %8.1f %8.1f %8.1f %6.1f %10.1f %10.1f%n", row.view(), row.p50Millis(),
            row.p95Millis(), row.maxMillis(), row.statementsPerRequest(), row.statementP95Millis(),
            row.slowestStatementMillis());
      }
      out.println("slowest statement per view:");
      for (Row row : rows) {
        out.printf(Locale.ROOT, "  %-56s %s%n", row.view(), row.slowestStatement());
      }
    }

    @Override
    public void writeCsv(Path file) throws IOException {
      List<String> lines = new ArrayList<>();
      lines.add("view,requests,p50_ms,p95_ms,max_ms,statements_per_request,statement_p95_ms,slowest_statement_ms,"
          + "slowest_statement");
      for (Row row : rows) {
        lines.add(String.format(Locale.ROOT, "\"%s\",%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,\"%s\"", row.view(),
            row.requests(), row.p50Millis(), row.p95Millis(), row.maxMillis(), row.statementsPerRequest(),
            row.statementP95Millis(), row.slowestStatementMillis(), row.slowestStatement().replace("\"", "\"\"")));
      }
      Files.write(file, lines);
    }
  }

  /** The scenario's sizes. */
  record ConsoleSettings(int queues, int messages, int requests, int statisticsReads, String existingDatabase) {
    static final ConsoleSettings FULL = new ConsoleSettings(100_000, 10_000_000, 100, 5, null);
    static final ConsoleSettings QUICK = new ConsoleSettings(2_000, 20_000, 5, 1, null);
  }
}
