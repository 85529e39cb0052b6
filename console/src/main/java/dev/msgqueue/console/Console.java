package dev.msgqueue.console;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.MsgQueueRepository;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Clock;
import java.time.Duration;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.conf.SettingsTools;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The operations console without a web framework: the page (plain HTML, a script and a style sheet, served from
 * this jar) and the JSON API behind it, as one {@link #handle} method that an adapter calls for each HTTP request
 * below the console's root. The Spring Boot starter is one adapter, the standalone jar's server the other.
 *
 * <p><b>What it reads.</b> Queue counts come from the statistics a {@link Housekeeper} in this process read at its
 * last tick, else from {@link MsgQueueRepository#estimatedQueueStatistics()} read at most once per
 * {@link Builder#statisticsMaxAge}, in the background: never a count of the message table per page view. Every other
 * read is one page through an index, or a count that stops at its cap. See docs/console.md for what each view costs.
 *
 * <p><b>Actions</b> (republish dead letters, purge dead letters) are refused unless {@link Builder#actionsEnabled}.
 * They are POSTs that must carry the console's CSRF token in the {@value #CSRF_HEADER} header (the page reads it from
 * the API, which no other origin can), and each is logged through SLF4J (logger {@value #ACTION_LOG}) with who asked
 * and what was done.
 *
 * <p><b>Foreign data.</b> Payloads, queue names and error messages are shown as text: the API escapes them, the page
 * builds its DOM with {@code textContent} only, and every response carries a Content-Security-Policy that allows no
 * inline script, no script from elsewhere and no HTML sink for strings (Trusted Types). Nothing in a page or the API
 * names the database, its server or the connection.
 *
 * <p>Thread-safe. {@link Builder#build()} starts one daemon thread (sampling for the throughput view, and reading the
 * statistics when due); {@link #close()} stops it.
 */
public final class Console implements AutoCloseable {
  /** The request header that must carry the CSRF token on every POST. */
  public static final String CSRF_HEADER = "X-Msgqueue-Console-Csrf";
  /** The SLF4J logger every action is logged to. */
  public static final String ACTION_LOG = "dev.msgqueue.console.actions";
  /** The largest request body the API reads; adapters refuse larger ones before reading them whole. */
  public static final int MAX_BODY_BYTES = 64 * 1024;
  /** How often the throughput view is sampled when none is set. */
  public static final Duration DEFAULT_SAMPLE_INTERVAL = Duration.ofSeconds(10);
  /** How old the statistics may get before the console reads them again, when none is set. */
  public static final Duration DEFAULT_STATISTICS_MAX_AGE = Duration.ofMinutes(1);
  /** How far back the throughput view reaches. */
  public static final Duration THROUGHPUT_HISTORY = Duration.ofMinutes(15);
  /** The longest any console statement may run before it is cancelled. */
  static final int STATEMENT_TIMEOUT_SECONDS = 10;

  private static final Logger log = LoggerFactory.getLogger(Console.class);
  private static final Map<String, Asset> ASSETS = Map.of(
      "/", Asset.load("index.html", "text/html; charset=utf-8"),
      "/console.js", Asset.load("console.js", "text/javascript; charset=utf-8"),
      "/console.css", Asset.load("console.css", "text/css; charset=utf-8"),
      "/favicon.svg", Asset.load("favicon.svg", "image/svg+xml"));
  /**
   * Scripts and styles only from the console itself, no inline script or style element, nothing framed, no form
   * posted anywhere, and no string ever assigned to an HTML sink (Trusted Types with no policy).
   */
  static final String CONTENT_SECURITY_POLICY = "default-src 'none'; script-src 'self'; style-src 'self'; "
      + "img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
      + "require-trusted-types-for 'script'; trusted-types 'none'";

  private final Api api;
  private final String csrfToken;
  private final ScheduledThreadPoolExecutor thread;
  private final AtomicBoolean closed = new AtomicBoolean();

  private Console(Builder builder) {
    byte[] token = new byte[32];
    new SecureRandom().nextBytes(token);
    this.csrfToken = Base64.getUrlEncoder().withoutPadding().encodeToString(token);
    AtomicInteger threads = new AtomicInteger();
    ThreadFactory daemons = body -> {
      Thread thread = new Thread(body, "msgqueue-console-" + threads.incrementAndGet());
      thread.setDaemon(true);
      return thread;
    };
    this.thread = new ScheduledThreadPoolExecutor(1, daemons);
    thread.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
    thread.setContinueExistingPeriodicTasksAfterShutdownPolicy(false);
    // Every console statement is bounded, so a page never hangs on a stuck server.
    DSLContext ctx = builder.ctx.configuration()
        .derive(SettingsTools.clone(builder.ctx.settings()).withQueryTimeout(STATEMENT_TIMEOUT_SECONDS))
        .dsl();
    ConsoleStatements statements = new ConsoleStatements(ctx);
    Clock clock = Clock.systemUTC();
    Statistics statistics = new Statistics(builder.repository, builder.housekeeper, builder.statisticsMaxAge,
        thread, clock);
    Sampler sampler = new Sampler(statements, builder.processCounters, builder.housekeeper, builder.sampleInterval,
        THROUGHPUT_HISTORY, clock);
    this.api = new Api(builder, statements, statistics, sampler, csrfToken);
    thread.scheduleWithFixedDelay(sampler::sample, 0, builder.sampleInterval.toMillis(), TimeUnit.MILLISECONDS);
  }

  /**
   * A builder for a console over {@code repository}, whose own statements run on {@code ctx} (a context over a pool
   * or data source of the same database, PostgreSQL dialect, not tied to a caller's transaction).
   */
  public static Builder builder(MsgQueueRepository repository, DSLContext ctx) {
    return new Builder(repository, ctx);
  }

  /**
   * Answers one request. Never throws: a request the API refuses gets its 4xx with a message saying what was wrong,
   * and a failure inside gets a 500 whose body says only that (the cause goes to the log).
   */
  public ConsoleResponse handle(ConsoleRequest request) {
    Objects.requireNonNull(request, "request");
    if (closed.get()) {
      return respond(503, "application/json", error("the console is closed"));
    }
    try {
      Asset asset = ASSETS.get(request.path());
      if (asset != null) {
        if (!request.method().equals("GET")) {
          throw ApiError.methodNotAllowed("only GET here");
        }
        return respond(200, asset.contentType, asset.bytes);
      }
      if (request.path().startsWith("/api/")) {
        if (request.method().equals("POST")) {
          requireCsrfToken(request);
        }
        return respond(200, "application/json", api.answer(request));
      }
      throw ApiError.notFound("no such page");
    } catch (ApiError e) {
      return respond(e.status(), "application/json", error(e.getMessage()));
    } catch (RuntimeException e) {
      log.error("console: {} {} failed", request.method(), request.path(), e);
      return respond(500, "application/json", error("the request failed; the cause is in the log of the process that"
          + " serves the console"));
    }
  }

  private void requireCsrfToken(ConsoleRequest request) {
    String sent = request.header(CSRF_HEADER);
    boolean tokenMatches = sent != null && MessageDigest.isEqual(sent.getBytes(StandardCharsets.UTF_8),
        csrfToken.getBytes(StandardCharsets.UTF_8));
    String contentType = request.header("content-type");
    if (!tokenMatches) {
      LoggerFactory.getLogger(ACTION_LOG).warn("refused a POST to {} by {}: no valid CSRF token",
          request.path(), Api.printable(request.actor()));
      throw ApiError.forbidden("missing or wrong " + CSRF_HEADER + " header: reload the page");
    }
    if (contentType == null || !contentType.toLowerCase(java.util.Locale.ROOT).startsWith("application/json")) {
      throw ApiError.badRequest("a POST must send application/json");
    }
    if (request.body().length > MAX_BODY_BYTES) {
      throw ApiError.badRequest("the body is larger than " + MAX_BODY_BYTES + " bytes");
    }
  }

  private static byte[] error(String message) {
    Json.Writer json = new Json.Writer();
    return json.startObject().field("error", message).endObject().bytes();
  }

  private static ConsoleResponse respond(int status, String contentType, byte[] body) {
    Map<String, String> headers = new LinkedHashMap<>();
    headers.put("Content-Security-Policy", CONTENT_SECURITY_POLICY);
    headers.put("X-Content-Type-Options", "nosniff");
    headers.put("Referrer-Policy", "no-referrer");
    headers.put("X-Frame-Options", "DENY");
    headers.put("Cross-Origin-Opener-Policy", "same-origin");
    headers.put("Cross-Origin-Resource-Policy", "same-origin");
    headers.put("Cache-Control", "no-store");
    return new ConsoleResponse(status, contentType, headers, body);
  }

  /** Stops the console's thread; {@link #handle} answers 503 afterwards. Idempotent. */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    thread.shutdownNow();
    try {
      thread.awaitTermination(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The CSRF token, for tests. */
  String csrfToken() {
    return csrfToken;
  }

  private record Asset(String contentType, byte[] bytes) {
    static Asset load(String name, String contentType) {
      try (InputStream in = Console.class.getResourceAsStream("assets/" + name)) {
        if (in == null) {
          throw new IllegalStateException("the console's asset " + name + " is missing from its jar");
        }
        return new Asset(contentType, in.readAllBytes());
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  /** Builds a {@link Console}; every value is checked when it is set. */
  public static final class Builder {
    final MsgQueueRepository repository;
    final DSLContext ctx;
    boolean actionsEnabled;
    Housekeeper housekeeper;
    ProcessCounters processCounters;
    Duration statisticsMaxAge = DEFAULT_STATISTICS_MAX_AGE;
    Duration sampleInterval = DEFAULT_SAMPLE_INTERVAL;
    long advisoryLockKey = Housekeeper.DEFAULT_ADVISORY_LOCK_KEY;

    private Builder(MsgQueueRepository repository, DSLContext ctx) {
      this.repository = Objects.requireNonNull(repository, "repository");
      this.ctx = Objects.requireNonNull(ctx, "ctx");
      if (ctx.dialect().family() != SQLDialect.POSTGRES) {
        throw new IllegalArgumentException("the console needs the POSTGRES dialect, the context has " + ctx.dialect());
      }
    }

    /** Whether the page may republish and purge dead letters; default {@code false} (read only). */
    public Builder actionsEnabled(boolean value) {
      this.actionsEnabled = value;
      return this;
    }

    /**
     * The housekeeper of this process, if it runs one: the housekeeping view shows its ticks, and the queue counts
     * come from the statistics its ticks read (when metrics with queue gauges are bound; else the console reads them).
     */
    public Builder housekeeper(Housekeeper value) {
      this.housekeeper = value;
      return this;
    }

    /** This process's counters as its metrics count them, for the throughput and housekeeping views. */
    public Builder processCounters(ProcessCounters value) {
      this.processCounters = value;
      return this;
    }

    /**
     * How old the statistics may get before a page asks for a new read; default {@link #DEFAULT_STATISTICS_MAX_AGE}.
     *
     * @throws IllegalArgumentException unless in [1 s, 1 h]
     */
    public Builder statisticsMaxAge(Duration value) {
      this.statisticsMaxAge = within(value, "statisticsMaxAge", Duration.ofSeconds(1), Duration.ofHours(1));
      return this;
    }

    /**
     * How often the throughput view is sampled; default {@link #DEFAULT_SAMPLE_INTERVAL}.
     *
     * @throws IllegalArgumentException unless in [100 ms, 5 min]
     */
    public Builder sampleInterval(Duration value) {
      this.sampleInterval = within(value, "sampleInterval", Duration.ofMillis(100), Duration.ofMinutes(5));
      return this;
    }

    /** The advisory lock key the service's housekeepers take turns on; default the housekeeper's default. */
    public Builder advisoryLockKey(long value) {
      this.advisoryLockKey = value;
      return this;
    }

    private static Duration within(Duration value, String name, Duration min, Duration max) {
      if (value == null || value.compareTo(min) < 0 || value.compareTo(max) > 0) {
        throw new IllegalArgumentException(name + " must be in [" + min + ", " + max + "], was " + value);
      }
      return value;
    }

    /** A console with its thread started; close it when done. */
    public Console build() {
      return new Console(this);
    }
  }
}
