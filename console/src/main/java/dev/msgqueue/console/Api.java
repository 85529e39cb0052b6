package dev.msgqueue.console;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.HousekeepingRun;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueNotFoundException;
import dev.msgqueue.QueueStatistics;
import dev.msgqueue.RepublishOutcome;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The JSON API: one method per view or action, each reading what its view shows and nothing more. */
final class Api {
  private static final Logger actions = LoggerFactory.getLogger(Console.ACTION_LOG);
  static final int DEFAULT_PAGE = 50;
  static final int MAX_PAGE = 200;
  /** The deepest page of the "lastActive" order: its index walks past offset rows (about 30 ms at 10,000). */
  static final int MAX_LAST_ACTIVE_OFFSET = 10_000;
  /** Up to this many messages a queue's counts are exact (a bounded count decides); above, the estimate. */
  static final int EXACT_COUNTS_UP_TO = 10_000;
  /** The most dead letters a count on the page goes up to (each counted one checks its message row). */
  static final int DEAD_LETTER_COUNT_CAP = 1_000;
  /** The most ids one republish or purge of a selection takes. */
  static final int MAX_SELECTION = 500;
  /** The most dead letters one purge request deletes; the page says how many are left. */
  static final int MAX_PURGED_PER_REQUEST = 50_000;
  /**
   * How many of the longest-idle auto-deleted queues the housekeeping view checks for live messages (one index probe
   * each): the reaper's own batch size by default, enough to tell whether the oldest are being reaped.
   */
  static final int IDLE_QUEUES_CHECKED = 100;
  static final int MAX_NAME_CHARS = 10_000;

  private final MsgQueueRepository repository;
  private final ConsoleStatements statements;
  private final Statistics statistics;
  private final Sampler sampler;
  private final Housekeeper housekeeper;
  private final boolean actionsEnabled;
  private final boolean processCounters;
  private final long advisoryLockKey;
  private final Duration reapIdleThreshold;
  private final Duration sampleInterval;
  private final String csrfToken;

  Api(Console.Builder builder, ConsoleStatements statements, Statistics statistics, Sampler sampler,
      String csrfToken) {
    this.repository = builder.repository;
    this.statements = statements;
    this.statistics = statistics;
    this.sampler = sampler;
    this.housekeeper = builder.housekeeper;
    this.actionsEnabled = builder.actionsEnabled;
    this.processCounters = builder.processCounters != null;
    this.advisoryLockKey = builder.advisoryLockKey;
    this.reapIdleThreshold = repository.config().reapIdleThreshold();
    this.sampleInterval = builder.sampleInterval;
    this.csrfToken = csrfToken;
  }

  byte[] answer(ConsoleRequest request) {
    String route = request.method() + " " + request.path();
    return switch (route) {
      case "GET /api/session" -> session(request);
      case "GET /api/queues" -> queues(request);
      case "GET /api/queue" -> queue(request);
      case "GET /api/messages" -> messages(request);
      case "GET /api/message" -> message(request);
      case "GET /api/dead-letters" -> deadLetters(request);
      case "POST /api/dead-letters/republish" -> republish(request);
      case "POST /api/dead-letters/purge" -> purge(request);
      case "GET /api/housekeeping" -> housekeeping();
      case "GET /api/throughput" -> throughput();
      default -> throw isKnownPath(request.path()) ? ApiError.methodNotAllowed("not allowed: " + request.method())
          : ApiError.notFound("no such API");
    };
  }

  private static boolean isKnownPath(String path) {
    return Set.of("/api/session", "/api/queues", "/api/queue", "/api/messages", "/api/message",
        "/api/dead-letters", "/api/dead-letters/republish", "/api/dead-letters/purge", "/api/housekeeping",
        "/api/throughput").contains(path);
  }

  // ---- session

  private byte[] session(ConsoleRequest request) {
    Json.Writer json = new Json.Writer().startObject()
        .field("actionsEnabled", actionsEnabled)
        .field("housekeeperInProcess", housekeeper != null)
        .field("processCounters", processCounters)
        .seconds("reapIdleThresholdSeconds", reapIdleThreshold)
        .field("pageSize", DEFAULT_PAGE)
        .field("maxSelection", MAX_SELECTION)
        .startObject("postHeaders")
        .field(Console.CSRF_HEADER, csrfToken);
    request.postHeaders().forEach(json::field);
    return json.endObject().endObject().bytes();
  }

  // ---- queues

  private enum Sort {
    NAME("name"), LAST_ACTIVE("lastActive"), DEPTH("depth", Statistics.Order.DEPTH),
    READY("ready", Statistics.Order.READY), DELAYED("delayed", Statistics.Order.DELAYED),
    IN_FLIGHT("inFlight", Statistics.Order.IN_FLIGHT), EXPIRED("expired", Statistics.Order.EXPIRED),
    OLDEST("oldest", Statistics.Order.OLDEST);

    final String id;
    final Statistics.Order order;

    Sort(String id) {
      this(id, null);
    }

    Sort(String id, Statistics.Order order) {
      this.id = id;
      this.order = order;
    }

    static Sort of(String id) {
      for (Sort sort : values()) {
        if (sort.id.equals(id)) {
          return sort;
        }
      }
      throw ApiError.badRequest("unknown sort \"" + printable(id) + "\"");
    }
  }

  private byte[] queues(ConsoleRequest request) {
    Sort sort = Sort.of(request.query().getOrDefault("sort", "name"));
    boolean descending = switch (request.query().getOrDefault("dir", sort == Sort.NAME ? "asc" : "desc")) {
      case "asc" -> false;
      case "desc" -> true;
      default -> throw ApiError.badRequest("dir must be asc or desc");
    };
    int limit = intParameter(request, "limit", DEFAULT_PAGE, 1, MAX_PAGE);
    String page = request.query().get("page");
    Statistics.Indexed counts = statistics.current();
    LocalDateTime now = statements.serverNow();

    List<ConsoleStatements.QueueRow> rows;
    List<String> names;
    String next = null;
    String previous = null;
    long offset = 0;
    if (sort == Sort.NAME) {
      // Keyset: "a:<name>" is the page after that name, "b:<name>" the page before it.
      boolean backwards = page != null && page.startsWith("b:");
      String from = page == null ? null : cursor(page);
      String jump = request.query().get("from");
      if (page == null && jump != null && !jump.isEmpty()) {
        // The page starting at the name typed (or the first one after it in this order): the keyset after the name
        // just before it.
        List<ConsoleStatements.QueueRow> before = statements.queuesByName(name(jump), !descending, 1);
        from = before.isEmpty() ? null : before.get(0).name();
        backwards = false;
      }
      boolean readDescending = descending != backwards;
      List<ConsoleStatements.QueueRow> read = statements.queuesByName(from, readDescending, limit + 1);
      boolean more = read.size() > limit;
      rows = new ArrayList<>(read.subList(0, Math.min(limit, read.size())));
      if (backwards) {
        Collections.reverse(rows);
      }
      if (!rows.isEmpty()) {
        String first = rows.get(0).name();
        String last = rows.get(rows.size() - 1).name();
        boolean hasNext = backwards ? from != null : more;
        boolean hasPrevious = backwards ? more : from != null;
        next = hasNext ? "a:" + last : null;
        previous = hasPrevious ? "b:" + first : null;
      }
      names = rows.stream().map(ConsoleStatements.QueueRow::name).toList();
    } else if (sort == Sort.LAST_ACTIVE) {
      offset = offset(page, MAX_LAST_ACTIVE_OFFSET);
      List<ConsoleStatements.QueueRow> read = statements.queuesByLastActive(descending, (int) offset, limit + 1);
      rows = read.subList(0, Math.min(limit, read.size()));
      next = read.size() > limit && offset + limit <= MAX_LAST_ACTIVE_OFFSET ? "o:" + (offset + limit) : null;
      previous = offset > 0 ? "o:" + Math.max(0, offset - limit) : null;
      names = rows.stream().map(ConsoleStatements.QueueRow::name).toList();
    } else {
      // From the statistics snapshot, sorted once when it was read; then the rows of this page by name.
      QueueStatistics[] sorted = counts == null ? new QueueStatistics[0] : counts.sorted().get(sort.order);
      offset = offset(page, Integer.MAX_VALUE);
      names = new ArrayList<>();
      for (long i = offset; i < Math.min(sorted.length, offset + limit); i++) {
        names.add(sorted[descending ? (int) i : sorted.length - 1 - (int) i].queue());
      }
      Map<String, ConsoleStatements.QueueRow> found = statements.queues(names).stream()
          .collect(Collectors.toMap(ConsoleStatements.QueueRow::name, Function.identity()));
      rows = names.stream().map(found::get).toList();
      next = offset + limit < sorted.length ? "o:" + (offset + limit) : null;
      previous = offset > 0 ? "o:" + Math.max(0, offset - limit) : null;
    }

    Json.Writer json = new Json.Writer().startObject()
        .field("sort", sort.id)
        .field("dir", descending ? "desc" : "asc")
        .field("limit", limit)
        .field("offset", offset)
        .field("next", next)
        .field("previous", previous)
        .field("lastActiveMaxOffset", MAX_LAST_ACTIVE_OFFSET);
    statisticsMeta(json, counts);
    json.startArray("rows");
    for (int i = 0; i < names.size(); i++) {
      ConsoleStatements.QueueRow row = rows.get(i);
      QueueStatistics stats = counts == null ? null : counts.of(names.get(i));
      queueJson(json.startObject(), names.get(i), row, stats, now).endObject();
    }
    return json.endArray().endObject().bytes();
  }

  private static String cursor(String page) {
    if (page.length() < 2 || (page.charAt(0) != 'a' && page.charAt(0) != 'b') || page.charAt(1) != ':') {
      throw ApiError.badRequest("bad page token");
    }
    return name(page.substring(2));
  }

  private static long offset(String page, long max) {
    if (page == null) {
      return 0;
    }
    if (!page.startsWith("o:")) {
      throw ApiError.badRequest("bad page token");
    }
    try {
      long offset = Long.parseLong(page.substring(2));
      if (offset < 0 || offset > max) {
        throw ApiError.badRequest("page offset must be in [0, " + max + "]");
      }
      return offset;
    } catch (NumberFormatException e) {
      throw ApiError.badRequest("bad page token");
    }
  }

  private void statisticsMeta(Json.Writer json, Statistics.Indexed counts) {
    if (counts == null) {
      json.nullField("statistics");
      return;
    }
    json.startObject("statistics")
        .field("readAt", counts.snapshot().readAt())
        .seconds("ageSeconds", Duration.between(counts.snapshot().readAt(), Instant.now()))
        .field("source", counts.source() == Statistics.Source.HOUSEKEEPER ? "housekeeper" : "console")
        .field("sampled", counts.snapshot().sampled())
        .field("queues", counts.queues())
        .endObject();
  }

  private Json.Writer queueJson(Json.Writer json, String name, ConsoleStatements.QueueRow row, QueueStatistics stats,
      LocalDateTime now) {
    json.field("name", name).field("exists", row != null);
    if (row != null) {
      json.field("kind", kind(row))
          .field("durable", row.durable())
          .field("autoDeleted", row.autoDeleted())
          .field("exclusive", row.exclusive())
          .field("lastActive", row.lastActive());
    }
    countsJson(json, "counts", stats);
    if (row != null) {
      reapJson(json, row, stats, now);
    }
    return json;
  }

  private static String kind(ConsoleStatements.QueueRow row) {
    String kind = row.durable() ? "durable" : row.autoDeleted() ? "auto-deleted" : "non-durable";
    return row.exclusive() ? kind + ", exclusive" : kind;
  }

  private static void countsJson(Json.Writer json, String field, QueueStatistics stats) {
    if (stats == null) {
      json.nullField(field);
      return;
    }
    json.startObject(field)
        .field("depth", stats.total())
        .field("ready", stats.ready())
        .field("delayed", stats.delayed())
        .field("inFlight", stats.inFlight())
        .field("expired", stats.expired())
        .seconds("oldestReadyAgeSeconds", stats.oldestReadyAge())
        .endObject();
  }

  /**
   * When the reaper deletes the queue: never (durable, or not auto-deleted, or no "lastActive"), once idle past the
   * threshold, or at the next tick once it is; a queue idle past the threshold that holds live messages is kept.
   */
  private void reapJson(Json.Writer json, ConsoleStatements.QueueRow row, QueueStatistics stats, LocalDateTime now) {
    json.startObject("reap");
    if (row.durable() || !row.autoDeleted() || row.lastActive() == null) {
      json.field("state", "never");
    } else {
      LocalDateTime eligible = row.lastActive().plus(reapIdleThreshold);
      if (now.isBefore(eligible)) {
        json.field("state", "idle-after").field("at", eligible);
      } else if (stats != null && stats.ready() + stats.delayed() + stats.inFlight() > 0) {
        json.field("state", "kept").field("at", eligible);
      } else {
        json.field("state", "due").field("at", eligible);
      }
    }
    json.endObject();
  }

  // ---- one queue, its messages, one message

  private byte[] queue(ConsoleRequest request) {
    String name = name(required(request, "name"));
    ConsoleStatements.QueueRow row = statements.queue(name)
        .orElseThrow(() -> ApiError.notFound("no queue \"" + printable(name) + "\""));
    LocalDateTime now = statements.serverNow();
    Statistics.Indexed counts = statistics.current();
    QueueStatistics stats = counts == null ? null : counts.of(name);
    boolean exact = false;
    // Exact counts only when a count that stops at the cap says the queue is small: one index range either way.
    if (statements.messagesUpTo(name, EXACT_COUNTS_UP_TO + 1) <= EXACT_COUNTS_UP_TO) {
      Optional<QueueStatistics> read = repository.queueStatistics(name);
      if (read.isPresent()) {
        stats = read.get();
        exact = true;
      }
    }
    Json.Writer json = new Json.Writer().startObject();
    queueJson(json.startObject("queue"), name, row, stats, now).endObject();
    json.field("countsExact", exact).field("exactUpTo", EXACT_COUNTS_UP_TO);
    statisticsMeta(json, counts);
    messagesJson(json, name, 0, DEFAULT_PAGE, now);
    return json.endObject().bytes();
  }

  private byte[] messages(ConsoleRequest request) {
    String name = name(required(request, "queue"));
    long after = longParameter(request, "after", 0);
    int limit = intParameter(request, "limit", DEFAULT_PAGE, 1, MAX_PAGE);
    Json.Writer json = new Json.Writer().startObject().field("queue", name);
    messagesJson(json, name, after, limit, statements.serverNow());
    return json.endObject().bytes();
  }

  private void messagesJson(Json.Writer json, String queue, long after, int limit, LocalDateTime now) {
    List<ConsoleStatements.MessageRow> read = statements.messages(queue, after, limit + 1);
    List<ConsoleStatements.MessageRow> rows = read.subList(0, Math.min(limit, read.size()));
    json.field("after", after);
    json.field("next", read.size() > limit ? rows.get(rows.size() - 1).id() : null);
    json.startArray("messages");
    for (ConsoleStatements.MessageRow row : rows) {
      json.startObject()
          .field("id", row.id())
          .field("status", row.status() == null ? null : row.status().getLiteral())
          .field("state", state(row.status(), row.readAfter(), row.expiresAt(), now))
          .field("readAfter", row.readAfter())
          .field("expiresAt", row.expiresAt())
          .field("payloadPreview", row.payloadPreview())
          .field("payloadChars", row.payloadChars())
          .field("failedDeliveries", row.failedDeliveries() == null ? null : (long) row.failedDeliveries())
          .field("deadLetteredAt", row.deadLetteredAt())
          .endObject();
    }
    json.endArray();
  }

  /** The message's state as the statistics count it. */
  private static String state(MessageQueueItemStatus status, LocalDateTime readAfter, LocalDateTime expiresAt,
      LocalDateTime now) {
    if (expiresAt != null && !expiresAt.isAfter(now)) {
      return "expired";
    }
    if (readAfter == null) {
      return "unknown";
    }
    if (!readAfter.isAfter(now)) {
      return "ready";
    }
    return status == MessageQueueItemStatus.ASSIGNED ? "in flight" : "delayed";
  }

  private byte[] message(ConsoleRequest request) {
    long id = longParameter(request, "id", -1);
    if (id < 0) {
      throw ApiError.badRequest("id is required");
    }
    ConsoleStatements.MessageDetail message = statements.message(id)
        .orElseThrow(() -> ApiError.notFound("no message " + id + " (acked, expired and cleaned up, or never"
            + " published)"));
    LocalDateTime now = statements.serverNow();
    Json.Writer json = new Json.Writer().startObject()
        .field("id", message.id())
        .field("queue", message.queue())
        .field("status", message.status() == null ? null : message.status().getLiteral())
        .field("state", state(message.status(), message.readAfter(), message.expiresAt(), now))
        .field("readAfter", message.readAfter())
        .field("expiresAt", message.expiresAt())
        .field("payloadChars", message.payload().length())
        .field("payload", message.payload());
    if (message.failedDeliveries() == null) {
      json.nullField("failure");
    } else {
      json.startObject("failure")
          .field("failedDeliveries", (long) message.failedDeliveries())
          .field("lastErrorClass", message.lastErrorClass())
          .field("lastErrorMessage", message.lastErrorMessage())
          .field("lastFailedAt", message.lastFailedAt())
          .field("originalQueue", message.originalQueue())
          .field("deadLetteredAt", message.deadLetteredAt())
          .endObject();
    }
    return json.field("deadLetter", message.deadLetteredAt() != null).endObject().bytes();
  }

  // ---- dead letters

  private byte[] deadLetters(ConsoleRequest request) {
    String queue = request.query().get("queue");
    queue = queue == null || queue.isEmpty() ? null : name(queue);
    long after = longParameter(request, "after", 0);
    int limit = intParameter(request, "limit", DEFAULT_PAGE, 1, MAX_PAGE);
    List<ConsoleStatements.DeadLetterRow> read = statements.deadLetters(queue, after, limit + 1);
    List<ConsoleStatements.DeadLetterRow> rows = read.subList(0, Math.min(limit, read.size()));
    int count = statements.deadLettersUpTo(queue, DEAD_LETTER_COUNT_CAP + 1);
    Json.Writer json = new Json.Writer().startObject()
        .field("queue", queue)
        .field("after", after)
        .field("next", read.size() > limit ? rows.get(rows.size() - 1).id() : null)
        .field("count", Math.min(count, DEAD_LETTER_COUNT_CAP))
        .field("countCapped", count > DEAD_LETTER_COUNT_CAP)
        .startArray("rows");
    for (ConsoleStatements.DeadLetterRow row : rows) {
      json.startObject()
          .field("id", row.id())
          .field("queue", row.queue())
          .field("originalQueue", row.originalQueue())
          .field("deliveries", row.deliveries())
          .field("errorClass", row.errorClass())
          .field("errorPreview", row.errorPreview())
          .field("deadLetteredAt", row.deadLetteredAt())
          .field("expiresAt", row.expiresAt())
          .field("payloadPreview", row.payloadPreview())
          .field("payloadChars", row.payloadChars())
          .field("held", row.held())
          .endObject();
    }
    return json.endArray().endObject().bytes();
  }

  private void requireActionsEnabled(ConsoleRequest request, String action) {
    if (!actionsEnabled) {
      actions.warn("refused {} by {}: actions are disabled", action, printable(request.actor()));
      throw ApiError.forbidden("actions are disabled in this console");
    }
  }

  private byte[] republish(ConsoleRequest request) {
    requireActionsEnabled(request, "republish");
    Map<String, Object> body = Json.readObject(request.body());
    List<Long> ids = ids(body.get("ids"), true);
    Map<Long, String> outcomes = new LinkedHashMap<>();
    for (long id : ids) {
      String outcome;
      try {
        RepublishOutcome result = repository.republishDeadLetter(id);
        outcome = result.name();
      } catch (QueueNotFoundException e) {
        outcome = "ORIGINAL_QUEUE_MISSING";
      }
      outcomes.put(id, outcome);
    }
    Map<String, Long> summary = outcomes.values().stream()
        .collect(Collectors.groupingBy(Function.identity(), LinkedHashMap::new, Collectors.counting()));
    actions.info("{} republished dead letters {}: {}", printable(request.actor()), ids, summary);
    Json.Writer json = new Json.Writer().startObject().startArray("results");
    outcomes.forEach((id, outcome) -> json.startObject().field("id", id).field("outcome", outcome).endObject());
    json.endArray().startObject("summary");
    summary.forEach(json::field);
    return json.endObject().endObject().bytes();
  }

  private byte[] purge(ConsoleRequest request) {
    requireActionsEnabled(request, "purge");
    Map<String, Object> body = Json.readObject(request.body());
    if (!(body.get("queue") instanceof String queueText) || queueText.isEmpty()) {
      throw ApiError.badRequest("\"queue\" (the dead-letter queue to purge) is required");
    }
    String queue = name(queueText);
    if (!queue.equals(body.get("confirm"))) {
      throw ApiError.badRequest("\"confirm\" must repeat the queue's name exactly");
    }
    List<Long> ids = body.containsKey("ids") ? ids(body.get("ids"), true) : null;
    int purged = 0;
    int batch;
    do {
      batch = statements.purgeDeadLetters(queue, ids);
      purged += batch;
    } while (ids == null && batch == ConsoleStatements.PURGE_BATCH && purged < MAX_PURGED_PER_REQUEST);
    int left = statements.deadLettersUpTo(queue, DEAD_LETTER_COUNT_CAP + 1);
    actions.info("{} purged {} dead letter(s) of {} ({}); {} left", printable(request.actor()), purged,
        printable('"' + queue + '"'), ids == null ? "all" : "selected " + ids, left > DEAD_LETTER_COUNT_CAP
            ? "more than " + DEAD_LETTER_COUNT_CAP : String.valueOf(left));
    return new Json.Writer().startObject()
        .field("queue", queue)
        .field("purged", purged)
        .field("left", Math.min(left, DEAD_LETTER_COUNT_CAP))
        .field("leftCapped", left > DEAD_LETTER_COUNT_CAP)
        .endObject().bytes();
  }

  @SuppressWarnings("unchecked")
  private static List<Long> ids(Object value, boolean required) {
    if (!(value instanceof List<?> list) || (required && list.isEmpty())) {
      throw ApiError.badRequest("\"ids\" must be a non-empty array of message ids");
    }
    Set<Long> unique = new LinkedHashSet<>((List<Long>) list);
    if (unique.size() > MAX_SELECTION) {
      throw ApiError.badRequest("at most " + MAX_SELECTION + " ids at once");
    }
    for (long id : unique) {
      if (id <= 0) {
        throw ApiError.badRequest("message ids are positive");
      }
    }
    return List.copyOf(unique);
  }

  // ---- housekeeping

  private byte[] housekeeping() {
    Json.Writer json = new Json.Writer().startObject();
    if (housekeeper == null) {
      json.nullField("inProcess");
    } else {
      json.startObject("inProcess")
          .field("running", housekeeper.isRunning())
          .seconds("intervalSeconds", housekeeper.interval())
          .field("consecutiveFailures", housekeeper.consecutiveFailures());
      Optional<HousekeepingRun> last = housekeeper.lastRun();
      if (last.isPresent()) {
        runJson(json.startObject("lastRun"), last.get()).endObject();
      } else {
        json.nullField("lastRun");
      }
      json.startArray("recentRuns");
      for (HousekeepingRun run : sampler.runs()) {
        runJson(json.startObject(), run).endObject();
      }
      json.endArray().endObject();
    }
    Optional<ConsoleStatements.LockHolder> holder = statements.housekeepingLockHolder(advisoryLockKey);
    if (holder.isPresent()) {
      json.startObject("lockHolder")
          .field("pid", holder.get().pid())
          .field("applicationName", holder.get().applicationName())
          .field("since", holder.get().since())
          .endObject();
    } else {
      json.nullField("lockHolder");
    }
    ConsoleStatements.IdleQueues idle = statements.idleQueues(reapIdleThreshold, IDLE_QUEUES_CHECKED);
    json.seconds("reapIdleThresholdSeconds", reapIdleThreshold)
        .startObject("idleQueues")
        .field("checked", idle.checked())
        .field("pastThreshold", idle.pastThreshold())
        .field("reapable", idle.reapable())
        .field("oldestReapableLastActive", idle.oldestReapableActive())
        .endObject();
    Statistics.Indexed counts = statistics.current();
    json.startObject("expired").field("oldestExpiresAt", statements.oldestExpiry().orElse(null));
    if (counts == null) {
      json.nullField("messages");
    } else {
      json.field("messages", counts.snapshot().queues().stream().mapToLong(QueueStatistics::expired).sum());
    }
    json.endObject();
    statisticsMeta(json, counts);
    json.field("serverNow", statements.serverNow());
    Map<String, Double> totals = latestProcessTotals();
    if (totals == null) {
      json.nullField("processTotals");
    } else {
      json.startObject("processTotals");
      totals.forEach((name, value) -> json.field(name, value.doubleValue()));
      json.endObject();
    }
    return json.endObject().bytes();
  }

  private Map<String, Double> latestProcessTotals() {
    if (!processCounters) {
      return null;
    }
    List<Sampler.Sample> samples = sampler.samples();
    if (samples.isEmpty()) {
      return null;
    }
    Map<String, Double> totals = new LinkedHashMap<>();
    Map<String, Double> last = samples.get(samples.size() - 1).process();
    for (String name : List.of(ProcessCounters.REAPED, ProcessCounters.EXPIRED_DELETED)) {
      if (last.containsKey(name)) {
        totals.put(name, last.get(name));
      }
    }
    return totals;
  }

  private static Json.Writer runJson(Json.Writer json, HousekeepingRun run) {
    return json.field("startedAt", run.startedAt())
        .field("durationMillis", run.duration().toMillis())
        .field("outcome", run.outcome().name())
        .field("reapedQueues", run.reapedQueues())
        .field("deletedExpiredMessages", run.deletedExpiredMessages())
        // The failure's type only: its message may name the server or the connection.
        .field("failure", run.failure() == null ? null : failureType(run.failure()));
  }

  private static String failureType(String failure) {
    int colon = failure.indexOf(':');
    return colon < 0 ? failure : failure.substring(0, colon);
  }

  // ---- throughput

  private static final List<String[]> PROCESS_SERIES = List.of(
      new String[] {ProcessCounters.PUBLISHED, "published (this process)"},
      new String[] {ProcessCounters.CLAIMED, "claimed (this process)"},
      new String[] {ProcessCounters.ACKED, "acked (this process)"},
      new String[] {ProcessCounters.DEAD_LETTERED, "dead-lettered (this process)"});

  private byte[] throughput() {
    List<Sampler.Sample> samples = sampler.samples();
    Json.Writer json = new Json.Writer().startObject()
        .seconds("intervalSeconds", sampleInterval)
        .seconds("historySeconds", Console.THROUGHPUT_HISTORY)
        .field("samples", samples.size())
        .field("since", samples.isEmpty() ? null : samples.get(0).at())
        .startArray("series");
    if (processCounters) {
      for (String[] series : PROCESS_SERIES) {
        seriesJson(json, series[0], series[1], "process", samples, s -> s.process().get(series[0]));
      }
    }
    seriesJson(json, "inserted", "rows inserted: messages published (all clients)", "database", samples,
        s -> s.database() == null ? null : (double) s.database().inserted());
    seriesJson(json, "deleted", "rows deleted: messages acked, taken or cleaned up (all clients)", "database",
        samples, s -> s.database() == null ? null : (double) s.database().deleted());
    seriesJson(json, "updated", "rows updated: claims with a lease, releases, dead letters (all clients)",
        "database", samples, s -> s.database() == null ? null : (double) s.database().updated());
    return json.endArray().endObject().bytes();
  }

  private static void seriesJson(Json.Writer json, String id, String label, String source,
      List<Sampler.Sample> samples, Function<Sampler.Sample, Double> value) {
    json.startObject().field("id", id).field("label", label).field("source", source).startArray("points");
    for (int i = 1; i < samples.size(); i++) {
      Sampler.Sample before = samples.get(i - 1);
      Sampler.Sample after = samples.get(i);
      Double from = value.apply(before);
      Double to = value.apply(after);
      double seconds = Duration.between(before.at(), after.at()).toMillis() / 1000.0;
      json.startObject().field("at", after.at());
      // A gap (unread) or a reset of the counters shows as no value, never as a negative rate.
      if (from == null || to == null || to < from || seconds <= 0) {
        json.nullField("perSecond");
      } else {
        json.field("perSecond", (to - from) / seconds);
      }
      json.endObject();
    }
    json.endArray().endObject();
  }

  // ---- parameters

  private static String required(ConsoleRequest request, String name) {
    String value = request.query().get(name);
    if (value == null || value.isEmpty()) {
      throw ApiError.badRequest(name + " is required");
    }
    return value;
  }

  private static String name(String value) {
    if (value.length() > MAX_NAME_CHARS) {
      throw ApiError.badRequest("a queue name is at most " + MAX_NAME_CHARS + " characters");
    }
    if (value.indexOf('\0') >= 0) {
      throw ApiError.badRequest("a queue name has no NUL character");
    }
    return value;
  }

  private static int intParameter(ConsoleRequest request, String name, int fallback, int min, int max) {
    long value = longParameter(request, name, fallback);
    if (value < min || value > max) {
      throw ApiError.badRequest(name + " must be in [" + min + ", " + max + "]");
    }
    return (int) value;
  }

  private static long longParameter(ConsoleRequest request, String name, long fallback) {
    String value = request.query().get(name);
    if (value == null || value.isEmpty()) {
      return fallback;
    }
    try {
      return Long.parseLong(value);
    } catch (NumberFormatException e) {
      throw ApiError.badRequest(name + " must be an integer");
    }
  }

  /** Text from a request or the database as one printable log line: control characters escaped. */
  static String printable(String text) {
    if (text == null) {
      return "null";
    }
    StringBuilder out = new StringBuilder(text.length());
    text.codePoints().forEach(c -> {
      if (Character.isISOControl(c) || c == 0x2028 || c == 0x2029) {
        out.append(String.format("\\u%04X", c));
      } else {
        out.appendCodePoint(c);
      }
    });
    return out.toString();
  }

  static Instant utc(LocalDateTime utc) {
    return utc == null ? null : utc.toInstant(ZoneOffset.UTC);
  }
}
