package dev.msgqueue.console;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.FailureOutcome;
import dev.msgqueue.Housekeeper;
import dev.msgqueue.HousekeepingRun;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.RetryPolicy;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.TestDatabase;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpRequest;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.UnaryOperator;
import java.util.stream.IntStream;
import org.jooq.DSLContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The console's page and JSON API over real HTTP (the standalone server) on a real database. */
@ExtendWith(MsgQueueDatabaseExtension.class)
class ConsoleApiTest {
  private final TestDatabase db;
  private final MsgQueueRepository repository;
  private final List<AutoCloseable> closing = new ArrayList<>();

  ConsoleApiTest(TestDatabase db) {
    this.db = db;
    this.repository = ConsoleHarness.repository(db);
  }

  @AfterEach
  void close() throws Exception {
    for (AutoCloseable c : closing) {
      c.close();
    }
  }

  private ConsoleHarness console(UnaryOperator<Console.Builder> settings) {
    ConsoleHarness harness = ConsoleHarness.start(db, repository, settings);
    closing.add(harness);
    return harness;
  }

  private ConsoleHarness readOnly() {
    return console(builder -> builder);
  }

  private ConsoleHarness withActions() {
    return console(builder -> builder.actionsEnabled(true));
  }

  private static String encode(String text) {
    return URLEncoder.encode(text, StandardCharsets.UTF_8);
  }

  private DSLContext dsl() {
    return db.dsl();
  }

  /** {@code n} messages of {@code queue} moved to {@code deadLetterQueue} by a failed delivery each. */
  private List<Long> deadLetters(String queue, String deadLetterQueue, int n, String error) {
    QueueSpec spec = QueueSpec.durable(queue);
    repository.bindQueue(spec);
    RetryPolicy policy = RetryPolicy.builder(deadLetterQueue).maxDeliveries(1).build();
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      repository.publish(spec, "{\"n\": " + i + "}");
    }
    for (ClaimedMessage message : repository.claim(queue, n, Duration.ofMinutes(5))) {
      assertThat(repository.fail(message, new IllegalStateException(error), policy))
          .isEqualTo(FailureOutcome.DEAD_LETTERED);
      ids.add(message.id());
    }
    return ids;
  }

  @Test
  void thePageAndItsAssetsComeWithAStrictContentSecurityPolicy() {
    ConsoleHarness console = readOnly();

    ConsoleHarness.Response page = console.get("");
    assertThat(page.status()).isEqualTo(200);
    assertThat(page.header("Content-Type")).startsWith("text/html");
    assertThat(page.body()).contains("<script src=\"console.js\" defer></script>").doesNotContain("<script>");
    String policy = page.header("Content-Security-Policy");
    assertThat(policy).contains("default-src 'none'", "script-src 'self'", "require-trusted-types-for 'script'",
        "trusted-types 'none'", "frame-ancestors 'none'").doesNotContain("unsafe");
    assertThat(page.header("X-Content-Type-Options")).isEqualTo("nosniff");

    ConsoleHarness.Response script = console.get("console.js");
    assertThat(script.status()).isEqualTo(200);
    assertThat(script.header("Content-Type")).startsWith("text/javascript");
    assertThat(script.body()).doesNotContain("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
        "eval(");
    assertThat(console.get("console.css").status()).isEqualTo(200);
    assertThat(console.get("nothing-here").status()).isEqualTo(404);
  }

  @Test
  void theQueuesViewListsAQueueWithItsCountsKindAndReapTime() {
    QueueSpec orders = QueueSpec.durable("api-orders");
    repository.bindQueue(orders);
    for (int i = 0; i < 3; i++) {
      repository.publish(orders, "{\"order\": " + i + "}");
    }
    QueueSpec tenant = QueueSpec.autoDeleted("api-tenant");
    repository.publish(tenant, "{}");
    ConsoleHarness console = readOnly();

    JsonNode page = console.get("api/queues?sort=name&from=api-").json();

    JsonNode ordersRow = row(page, "api-orders");
    assertThat(ordersRow.path("kind").asText()).isEqualTo("durable");
    assertThat(ordersRow.path("counts").path("depth").asLong()).isEqualTo(3);
    assertThat(ordersRow.path("counts").path("ready").asLong()).isEqualTo(3);
    assertThat(ordersRow.path("reap").path("state").asText()).isEqualTo("never");
    JsonNode tenantRow = row(page, "api-tenant");
    assertThat(tenantRow.path("kind").asText()).isEqualTo("auto-deleted");
    assertThat(tenantRow.path("reap").path("state").asText()).isEqualTo("idle-after");
    assertThat(page.path("statistics").path("sampled").asBoolean()).isFalse();
    assertThat(page.path("statistics").path("source").asText()).isEqualTo("console");
  }

  private static JsonNode row(JsonNode page, String queue) {
    for (JsonNode row : page.path("rows")) {
      if (row.path("name").asText().equals(queue)) {
        return row;
      }
    }
    throw new AssertionError(queue + " not on the page: " + page);
  }

  private static List<String> names(JsonNode page) {
    List<String> names = new ArrayList<>();
    page.path("rows").forEach(row -> names.add(row.path("name").asText()));
    return names;
  }

  @Test
  void queuesPageByNameBothWaysAndSortByDepth() {
    List<String> created = IntStream.rangeClosed(1, 120).mapToObj(i -> String.format(Locale.ROOT, "pg-%03d", i))
        .toList();
    created.forEach(name -> repository.bindQueue(QueueSpec.durable(name)));
    for (int i = 0; i < 5; i++) {
      repository.publish(QueueSpec.durable("pg-007"), "{}");
    }
    repository.publish(QueueSpec.durable("pg-100"), "{}");
    ConsoleHarness console = readOnly();

    JsonNode first = console.get("api/queues?sort=name&from=pg-").json();
    assertThat(names(first)).containsExactlyElementsOf(created.subList(0, 50));
    JsonNode second = console.get("api/queues?sort=name&page=" + encode(first.path("next").asText())).json();
    assertThat(names(second)).containsExactlyElementsOf(created.subList(50, 100));
    JsonNode back = console.get("api/queues?sort=name&page=" + encode(second.path("previous").asText())).json();
    assertThat(names(back)).containsExactlyElementsOf(created.subList(0, 50));
    JsonNode jumped = console.get("api/queues?sort=name&from=pg-061").json();
    assertThat(names(jumped).get(0)).isEqualTo("pg-061");
    JsonNode descending = console.get("api/queues?sort=name&dir=desc&from=pg-061").json();
    assertThat(names(descending).subList(0, 3)).containsExactly("pg-061", "pg-060", "pg-059");

    JsonNode byDepth = console.get("api/queues?sort=depth&dir=desc").json();
    List<Long> depths = new ArrayList<>();
    byDepth.path("rows").forEach(row -> depths.add(row.path("counts").path("depth").asLong()));
    assertThat(depths).isSortedAccordingTo(java.util.Comparator.reverseOrder());
    assertThat(names(byDepth)).contains("pg-007", "pg-100");
    assertThat(names(byDepth).indexOf("pg-007")).isLessThan(names(byDepth).indexOf("pg-100"));
    JsonNode byDepthNext = console.get("api/queues?sort=depth&dir=desc&page=" + encode(byDepth.path("next")
        .asText())).json();
    assertThat(byDepthNext.path("offset").asLong()).isEqualTo(50);
    assertThat(names(byDepthNext)).doesNotContainAnyElementsOf(names(byDepth));

    JsonNode byLastActive = console.get("api/queues?sort=lastActive&dir=desc").json();
    assertThat(byLastActive.path("rows")).hasSize(50);
    assertThat(console.get("api/queues?sort=lastActive&page=o:10001").status()).isEqualTo(400);
    assertThat(console.get("api/queues?sort=nonsense").status()).isEqualTo(400);
  }

  @Test
  void oneQueueShowsExactCountsAndItsFirstMessagesById() {
    QueueSpec spec = QueueSpec.durable("api-one");
    repository.bindQueue(spec);
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      ids.add(repository.publish(spec, "{\"i\": " + i + "}"));
    }
    ConsoleHarness console = readOnly();

    JsonNode queue = console.get("api/queue?name=api-one").json();
    assertThat(queue.path("countsExact").asBoolean()).isTrue();
    assertThat(queue.path("queue").path("counts").path("depth").asLong()).isEqualTo(60);
    assertThat(queue.path("messages")).hasSize(50);
    assertThat(queue.path("messages").get(0).path("id").asLong()).isEqualTo(ids.get(0));
    assertThat(queue.path("messages").get(0).path("payloadPreview").asText()).isEqualTo("{\"i\": 0}");
    assertThat(queue.path("messages").get(0).path("state").asText()).isEqualTo("ready");
    long next = queue.path("next").asLong();
    JsonNode more = console.get("api/messages?queue=api-one&after=" + next).json();
    assertThat(more.path("messages")).hasSize(10);
    assertThat(more.path("messages").get(0).path("id").asLong()).isEqualTo(ids.get(50));
    assertThat(more.path("next").isNull()).isTrue();

    assertThat(console.get("api/queue?name=no-such-queue").status()).isEqualTo(404);
    assertThat(console.get("api/queue").status()).isEqualTo(400);
  }

  @Test
  void hostilePayloadsAndNamesComeBackAsEscapedJsonText() {
    String script = "{\"html\": \"<script>window.__pwned = 1</script>\"}";
    String image = "\"\\\"><img src=x onerror=\\\"window.__pwned = 2\\\">\"";
    String queueName = "<img src=x onerror=alert(1)>";
    QueueSpec spec = QueueSpec.durable(queueName);
    repository.bindQueue(spec);
    long scriptId = repository.publish(spec, script);
    long imageId = repository.publish(spec, image);
    ConsoleHarness console = readOnly();

    ConsoleHarness.Response list = console.get("api/queue?name=" + encode(queueName));
    assertThat(list.status()).isEqualTo(200);
    // No raw angle bracket in any response: the JSON escapes them, so not even a response read as HTML could run.
    assertThat(list.body()).doesNotContain("<", ">").contains("\\u003Cscript\\u003E");
    assertThat(list.json().path("queue").path("name").asText()).isEqualTo(queueName);
    ConsoleHarness.Response message = console.get("api/message?id=" + scriptId);
    assertThat(message.body()).doesNotContain("<script");
    assertThat(message.json().path("payload").asText()).isEqualTo("{\"html\": \"<script>window.__pwned = 1</script>\"}");
    assertThat(console.get("api/message?id=" + imageId).json().path("payload").asText())
        .isEqualTo("\"\\\"><img src=x onerror=\\\"window.__pwned = 2\\\">\"");
    assertThat(console.get("api/queues?sort=name").body()).doesNotContain("<img");
  }

  @Test
  void aOneMebibytePayloadIsPreviewedInListsAndWholeInItsOwnView() {
    String big = "\"" + "x".repeat(1024 * 1024) + "\"";
    QueueSpec spec = QueueSpec.durable("api-big");
    repository.bindQueue(spec);
    long id = repository.publish(spec, big);
    ConsoleHarness console = readOnly();

    JsonNode queue = console.get("api/queue?name=api-big").json();
    JsonNode row = queue.path("messages").get(0);
    assertThat(row.path("payloadChars").asInt()).isEqualTo(big.length());
    assertThat(row.path("payloadPreview").asText()).hasSize(ConsoleStatements.PREVIEW_CHARS);
    JsonNode message = console.get("api/message?id=" + id).json();
    assertThat(message.path("payload").asText()).isEqualTo(big);
  }

  @Test
  void deadLettersAreListedAndRepublishedWithTheCsrfTokenAndLoggedWithWho() {
    List<Long> ids = deadLetters("dl-orders", "dl-orders.dead", 3, "boom <b>");
    ConsoleHarness console = withActions();

    JsonNode page = console.get("api/dead-letters?queue=dl-orders.dead").json();
    assertThat(page.path("count").asInt()).isEqualTo(3);
    assertThat(page.path("rows").get(0).path("originalQueue").asText()).isEqualTo("dl-orders");
    assertThat(page.path("rows").get(0).path("errorClass").asText()).isEqualTo("java.lang.IllegalStateException");
    assertThat(page.path("rows").get(0).path("errorPreview").asText()).isEqualTo("boom <b>");
    assertThat(console.get("api/dead-letters").json().path("rows")).hasSizeGreaterThanOrEqualTo(3);

    String body = "{\"ids\": [" + ids.get(0) + ", " + ids.get(1) + "]}";
    assertThat(console.postWith("api/dead-letters/republish", body, null).status()).isEqualTo(403);
    assertThat(console.postWith("api/dead-letters/republish", body, "wrong").status()).isEqualTo(403);
    assertThat(dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq("dl-orders"))).isZero();

    String log = captureStandardError(() -> {
      ConsoleHarness.Response republished = console.post("api/dead-letters/republish", body);
      assertThat(republished.status()).isEqualTo(200);
      assertThat(republished.json().path("summary").path("REPUBLISHED").asInt()).isEqualTo(2);
    });
    assertThat(dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq("dl-orders"))).isEqualTo(2);
    assertThat(dsl().fetchCount(MESSAGE_QUEUE_ITEM_FAILURE,
        MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID.in(ids.subList(0, 2)))).isZero();
    assertThat(log).contains(Console.ACTION_LOG, "standalone (127.0.0.1) republished dead letters",
        ids.get(0) + ", " + ids.get(1), "REPUBLISHED=2");

    ConsoleHarness.Response again = console.post("api/dead-letters/republish", "{\"ids\": [" + ids.get(0) + "]}");
    assertThat(again.json().path("results").get(0).path("outcome").asText()).isEqualTo("NOT_A_DEAD_LETTER");
  }

  @Test
  void aPostWithoutJsonOrWithABadBodyIsRefused() {
    ConsoleHarness console = withActions();
    String token = console.get("api/session").json().path("postHeaders").path(Console.CSRF_HEADER).asText();
    ConsoleHarness.Response form = console.send(HttpRequest.newBuilder(URI.create(console.base()
            + "api/dead-letters/republish"))
        .header("Content-Type", "application/x-www-form-urlencoded").header(Console.CSRF_HEADER, token)
        .POST(HttpRequest.BodyPublishers.ofString("ids=1")));
    assertThat(form.status()).isEqualTo(400);
    assertThat(console.post("api/dead-letters/republish", "{\"ids\": \"1\"}").status()).isEqualTo(400);
    assertThat(console.post("api/dead-letters/republish", "{\"ids\": []}").status()).isEqualTo(400);
    assertThat(console.post("api/dead-letters/republish", "not json").status()).isEqualTo(400);
    assertThat(console.get("api/dead-letters/republish").status()).isEqualTo(405);
  }

  @Test
  void actionsAreRefusedUnlessEnabled() {
    List<Long> ids = deadLetters("ro-orders", "ro-orders.dead", 1, "boom");
    ConsoleHarness console = readOnly();
    assertThat(console.get("api/session").json().path("actionsEnabled").asBoolean()).isFalse();

    ConsoleHarness.Response refused = console.post("api/dead-letters/republish", "{\"ids\": [" + ids.get(0) + "]}");
    assertThat(refused.status()).isEqualTo(403);
    assertThat(refused.json().path("error").asText()).contains("actions are disabled");
    ConsoleHarness.Response purge = console.post("api/dead-letters/purge",
        "{\"queue\": \"ro-orders.dead\", \"confirm\": \"ro-orders.dead\"}");
    assertThat(purge.status()).isEqualTo(403);
    assertThat(dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq("ro-orders.dead"))).isEqualTo(1);
  }

  @Test
  void aPurgeNeedsTheQueueNameRepeatedAndDeletesItsDeadLettersAndTheirFailureRecords() {
    List<Long> ids = deadLetters("pu-orders", "pu-orders.dead", 4, "boom");
    deadLetters("pu-other", "pu-other.dead", 1, "boom");
    ConsoleHarness console = withActions();

    assertThat(console.post("api/dead-letters/purge", "{\"queue\": \"pu-orders.dead\", \"confirm\": \"pu-orders\"}")
        .status()).isEqualTo(400);
    assertThat(dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq("pu-orders.dead"))).isEqualTo(4);

    ConsoleHarness.Response selected = console.post("api/dead-letters/purge",
        "{\"queue\": \"pu-orders.dead\", \"confirm\": \"pu-orders.dead\", \"ids\": [" + ids.get(0) + "]}");
    assertThat(selected.json().path("purged").asInt()).isEqualTo(1);
    assertThat(selected.json().path("left").asInt()).isEqualTo(3);

    String log = captureStandardError(() -> {
      ConsoleHarness.Response all = console.post("api/dead-letters/purge",
          "{\"queue\": \"pu-orders.dead\", \"confirm\": \"pu-orders.dead\"}");
      assertThat(all.json().path("purged").asInt()).isEqualTo(3);
      assertThat(all.json().path("left").asInt()).isZero();
    });
    assertThat(log).contains("standalone (127.0.0.1) purged 3 dead letter(s) of \"pu-orders.dead\" (all)");
    assertThat(dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq("pu-orders.dead"))).isZero();
    assertThat(dsl().fetchCount(MESSAGE_QUEUE_ITEM_FAILURE, MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID.in(ids))).isZero();
    assertThat(dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq("pu-other.dead")))
        .as("another dead-letter queue's letters stay").isEqualTo(1);
  }

  @Test
  void aPurgeLeavesADeadLetterThatAConsumerHolds() {
    deadLetters("held-orders", "held-orders.dead", 2, "boom");
    List<ClaimedMessage> held = repository.claim("held-orders.dead", 1, Duration.ofMinutes(5));
    ConsoleHarness console = withActions();

    JsonNode purged = console.post("api/dead-letters/purge",
        "{\"queue\": \"held-orders.dead\", \"confirm\": \"held-orders.dead\"}").json();

    assertThat(purged.path("purged").asInt()).isEqualTo(1);
    assertThat(dsl().fetchExists(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.eq(held.get(0).id()))).isTrue();
  }

  @Test
  void theHousekeepingViewShowsTheTicksOfTheHousekeeperInThisProcessAndIdleQueues() {
    repository.publish(QueueSpec.autoDeleted("hk-idle"), "{}");
    assertThat(repository.ack(repository.claim("hk-idle", 1))).hasSize(1);
    new QueueRows(dsl()).makeIdle("hk-idle", Duration.ofHours(2));
    Housekeeper housekeeper = Housekeeper.builder(repository).build();
    ConsoleHarness console = console(builder -> builder.housekeeper(housekeeper).sampleInterval(Duration.ofMillis(100)));

    JsonNode before = console.get("api/housekeeping").json();
    assertThat(before.path("idleQueues").path("reapable").asInt()).isGreaterThanOrEqualTo(1);
    assertThat(before.path("inProcess").path("lastRun").isNull()).isTrue();

    HousekeepingRun run = housekeeper.runOnce();
    assertThat(run.outcome()).isEqualTo(HousekeepingRun.Outcome.COMPLETED);
    assertThat(new QueueRows(dsl()).exists("hk-idle")).isFalse();
    JsonNode after = awaitJson(console, "api/housekeeping",
        json -> json.path("inProcess").path("recentRuns").size() > 0);
    assertThat(after.path("inProcess").path("lastRun").path("outcome").asText()).isEqualTo("COMPLETED");
    assertThat(after.path("inProcess").path("lastRun").path("reapedQueues").asInt()).isGreaterThanOrEqualTo(1);
    assertThat(after.path("lockHolder").isNull()).isTrue();
  }

  @Test
  void withoutAHousekeeperInProcessTheViewSaysSoAndShowsWhoHoldsTheLockNow() throws Exception {
    ConsoleHarness console = readOnly();
    try (var connection = db.connect()) {
      connection.setAutoCommit(false);
      try (var statement = connection.createStatement()) {
        statement.execute("SELECT pg_advisory_xact_lock(" + Housekeeper.DEFAULT_ADVISORY_LOCK_KEY + ")");
      }
      JsonNode view = console.get("api/housekeeping").json();
      assertThat(view.path("inProcess").isNull()).isTrue();
      assertThat(view.path("lockHolder").path("pid").asInt()).isPositive();
      connection.rollback();
    }
    assertThat(console.get("api/housekeeping").json().path("lockHolder").isNull()).isTrue();
  }

  @Test
  void throughputShowsTheRowsWrittenAsTheyAreWritten() {
    ConsoleHarness console = console(builder -> builder.sampleInterval(Duration.ofMillis(200)));
    QueueSpec spec = QueueSpec.durable("tp-orders");
    repository.bindQueue(spec);
    JsonNode view = null;
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    while (System.nanoTime() < deadline) {
      repository.publishBatch(spec, List.of("{}", "{}", "{}", "{}", "{}"));
      view = console.get("api/throughput").json();
      if (maxRate(view, "inserted") > 0) {
        break;
      }
      sleep(100);
    }
    assertThat(maxRate(view, "inserted")).as("rows inserted per second: %s", view).isPositive();
    assertThat(view.path("samples").asInt()).isGreaterThan(1);
  }

  private static double maxRate(JsonNode view, String series) {
    double max = 0;
    for (JsonNode s : view.path("series")) {
      if (s.path("id").asText().equals(series)) {
        for (JsonNode point : s.path("points")) {
          max = Math.max(max, point.path("perSecond").asDouble(0));
        }
      }
    }
    return max;
  }

  @Test
  void noResponseNamesTheDatabaseItsServerOrTheConnection() {
    deadLetters("secret-orders", "secret-orders.dead", 1, "boom");
    ConsoleHarness console = withActions();
    String url = db.jdbcUrl();
    URI server = URI.create(url.substring("jdbc:".length()));
    for (String path : List.of("", "api/session", "api/queues", "api/queues?sort=depth", "api/queue?name=secret-orders",
        "api/dead-letters", "api/housekeeping", "api/throughput", "api/message?id=999999999", "api/queue?name=x",
        "api/queues?sort=bad")) {
      String body = console.get(path).body();
      assertThat(body).as(path).doesNotContain(db.name(), "jdbc:", "postgres", ":" + server.getPort(), "user=");
    }
  }

  @Test
  void aRequestWhoseHostIsNotALoopbackNameIsRefused() {
    ConsoleHarness console = readOnly();
    // The JDK client refuses to set Host itself: the raw request over a socket.
    try (var socket = new java.net.Socket("127.0.0.1", console.server.port())) {
      socket.getOutputStream().write(("GET /api/session HTTP/1.1\r\nHost: attacker.example:" + console.server.port()
          + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
      String response = new String(socket.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(response).startsWith("HTTP/1.1 421").doesNotContain("postHeaders");
    } catch (java.io.IOException e) {
      throw new AssertionError(e);
    }
  }

  private JsonNode awaitJson(ConsoleHarness console, String path, java.util.function.Predicate<JsonNode> condition) {
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    JsonNode json = console.get(path).json();
    while (!condition.test(json)) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("never true for " + path + ": " + json);
      }
      sleep(50);
      json = console.get(path).json();
    }
    return json;
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  private static String captureStandardError(Runnable action) {
    PrintStream original = System.err;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
    try {
      action.run();
    } finally {
      System.setErr(original);
    }
    String text = captured.toString(StandardCharsets.UTF_8);
    original.print(text);
    return text;
  }
}
