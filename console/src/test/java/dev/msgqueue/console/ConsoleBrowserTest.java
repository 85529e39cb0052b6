package dev.msgqueue.console;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.generateSeries;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.lpad;
import static org.jooq.impl.DSL.select;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.Housekeeper;
import dev.msgqueue.MicrometerMetrics;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.PublishOptions;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.RetryPolicy;
import dev.msgqueue.Subscriber;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.logging.Level;
import java.util.stream.Stream;
import org.jooq.Field;
import org.jooq.Record1;
import org.jooq.Table;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.ExtendWith;
import org.openqa.selenium.By;
import org.openqa.selenium.JavascriptExecutor;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.openqa.selenium.logging.LogEntry;
import org.openqa.selenium.logging.LogType;
import org.openqa.selenium.logging.LoggingPreferences;
import org.openqa.selenium.support.ui.ExpectedConditions;
import org.openqa.selenium.support.ui.WebDriverWait;

/**
 * The console's page in a real browser: Debian's headless Chromium driven through its chromedriver, against the
 * standalone server over a database with a service's worth of queues, a housekeeper and metrics in this process, and a
 * publisher and subscriber at work.
 *
 * <p>Tagged {@code browser}: runs only when selected ({@code mvn verify -Dmsgqueue.browser=true}, as {@code .ci/run}
 * does), and then fails if Chromium or chromedriver is missing. With {@code -Dmsgqueue.console.screenshots=DIR} it
 * writes a PNG of each view there (docs/console-*.png come from such a run).
 */
@Tag("browser")
@ExtendWith(MsgQueueDatabaseExtension.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ConsoleBrowserTest {
  static final Path CHROMIUM = Path.of("/usr/bin/chromium");
  static final Path CHROMEDRIVER = Path.of("/usr/bin/chromedriver");
  static final String SCRIPT_PAYLOAD = "{\"comment\": \"<script>window.__pwned = 1</script>\"}";
  static final String IMAGE_PAYLOAD = "{\"name\": \"\\\"><img src=x onerror=\\\"window.__pwned = 2\\\">\"}";
  static final String HOSTILE_QUEUE = "<img src=x onerror=\"window.__pwned = 3\">";
  private static final Duration WAIT = Duration.ofSeconds(20);

  private final TestDatabase db;
  private final MsgQueueRepository repository;
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final List<Long> hostileIds = new ArrayList<>();
  private final List<Long> deadLetterIds = new ArrayList<>();
  private final AtomicBoolean publishing = new AtomicBoolean(true);
  private final Path screenshots;
  private String bigPayload;
  private MicrometerMetrics metrics;
  private Housekeeper housekeeper;
  private Subscriber subscriber;
  private Thread publisher;
  private ConsoleHarness console;
  private Path profile;
  private ChromeDriver driver;

  ConsoleBrowserTest(TestDatabase db) {
    this.db = db;
    this.repository = ConsoleHarness.repository(db);
    String directory = System.getProperty("msgqueue.console.screenshots");
    this.screenshots = directory == null || directory.isBlank() ? null : Path.of(directory);
  }

  @BeforeAll
  void start() throws Exception {
    // Selected and missing is a failure, never a skip: the run that selects these tests must have run them.
    for (Path binary : List.of(CHROMIUM, CHROMEDRIVER)) {
      if (!Files.isExecutable(binary)) {
        throw new AssertionError(binary + " is missing: the browser tests need Debian's chromium and chromium-driver"
            + " (apt-get install -y chromium chromium-driver); .ci/run installs them");
      }
    }
    seed();
    metrics = MicrometerMetrics.bind(registry, repository);
    housekeeper = Housekeeper.builder(repository).interval(Duration.ofSeconds(2)).firstRunJitter(Duration.ZERO)
        .build().start();
    subscriber = Subscriber.builder(repository, QueueSpec.durable("payments"), message -> { })
        .pollInterval(Duration.ofMillis(200)).start();
    publisher = new Thread(this::publish, "browser-test-publisher");
    publisher.setDaemon(true);
    publisher.start();
    console = ConsoleHarness.start(db, repository, builder -> builder.actionsEnabled(true).housekeeper(housekeeper)
        .processCounters(new MicrometerCounters(registry)).sampleInterval(Duration.ofSeconds(1)));
    driver = startChromium();
  }

  private ChromeDriver startChromium() throws IOException {
    profile = Files.createTempDirectory("msgqueue-console-chromium");
    ChromeOptions options = new ChromeOptions();
    options.setBinary(CHROMIUM.toFile());
    options.addArguments("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--user-data-dir=" + profile, "--window-size=1360,900",
        "--force-device-scale-factor=1", "--lang=en-US");
    LoggingPreferences logs = new LoggingPreferences();
    logs.enable(LogType.BROWSER, Level.ALL);
    options.setCapability("goog:loggingPrefs", logs);
    ChromeDriverService service = new ChromeDriverService.Builder()
        .usingDriverExecutable(CHROMEDRIVER.toFile())
        .usingAnyFreePort()
        .withLogOutput(java.io.OutputStream.nullOutputStream())
        .build();
    return new ChromeDriver(service, options);
  }

  /** A service's worth of queues: busy, quiet, delayed, in flight, idle, dead letters and hostile foreign data. */
  private void seed() {
    QueueSpec orders = QueueSpec.durable("orders");
    repository.bindQueue(orders);
    for (int i = 0; i < 42; i++) {
      repository.publish(orders, "{\"type\": \"order.placed\", \"order\": " + (1000 + i) + ", \"total\": "
          + (19 + i) + ".90}");
    }
    QueueSpec billing = QueueSpec.durable("billing");
    repository.bindQueue(billing);
    for (int i = 0; i < 7; i++) {
      repository.publish(billing, "{\"type\": \"invoice.due\", \"invoice\": \"INV-" + (300 + i) + "\"}");
    }
    for (int i = 0; i < 3; i++) {
      repository.publish(billing, "{\"type\": \"invoice.reminder\"}",
          PublishOptions.defaults().withDelay(Duration.ofMinutes(10)).withTtl(Duration.ofHours(1)));
    }
    QueueSpec emails = QueueSpec.durable("emails");
    repository.bindQueue(emails);
    for (int i = 0; i < 12; i++) {
      repository.publish(emails, "{\"to\": \"customer-" + i + "@example.com\", \"template\": \"receipt\"}");
    }
    List<ClaimedMessage> inFlight = repository.claim("emails", 4, Duration.ofMinutes(10));
    assertThat(inFlight).hasSize(4);
    repository.bindQueue(QueueSpec.durable("payments"));

    QueueRows rows = new QueueRows(db.dsl());
    for (int tenant = 1; tenant <= 12; tenant++) {
      QueueSpec events = QueueSpec.autoDeleted(String.format("tenant-%04d-events", tenant));
      for (int i = 0; i < (tenant * 7) % 11; i++) {
        repository.publish(events, "{\"tenant\": " + tenant + ", \"event\": \"run.finished\", \"run\": " + i + "}");
      }
    }
    rows.makeIdle("tenant-0007-events", Duration.ofHours(3));
    for (String idle : List.of("tenant-0011-events", "tenant-0022-events")) {
      repository.publish(QueueSpec.autoDeleted(idle), "{}");
      assertThat(repository.ack(repository.claim(idle, 1))).hasSize(1);
      rows.makeIdle(idle, Duration.ofHours(2));
    }

    RetryPolicy policy = RetryPolicy.builder("orders.dead").maxDeliveries(1).build();
    QueueSpec shipping = QueueSpec.durable("shipping");
    repository.bindQueue(shipping);
    String[] errors = {"Read timed out", "carrier rejected the address: \"Rue de l'Église 7\" <no zip>",
        "HTTP 503 from carrier API", "Read timed out", "order 1042 not found"};
    for (int i = 0; i < errors.length; i++) {
      repository.publish(shipping, "{\"type\": \"shipment.requested\", \"order\": " + (1040 + i) + "}");
    }
    int e = 0;
    for (ClaimedMessage message : repository.claim("shipping", errors.length, Duration.ofMinutes(5))) {
      repository.fail(message, new java.net.SocketTimeoutException(errors[e++]), policy);
      deadLetterIds.add(message.id());
    }

    QueueSpec hostile = QueueSpec.durable(HOSTILE_QUEUE);
    repository.bindQueue(hostile);
    bigPayload = "\"" + "A".repeat(1024 * 1024) + "\"";
    hostileIds.add(repository.publish(hostile, SCRIPT_PAYLOAD));
    hostileIds.add(repository.publish(hostile, IMAGE_PAYLOAD));
    hostileIds.add(repository.publish(hostile, bigPayload));
  }

  private void publish() {
    QueueSpec payments = QueueSpec.durable("payments");
    int n = 0;
    while (publishing.get()) {
      try {
        int burst = 5 + (n % 7) * 3;
        for (int i = 0; i < burst; i++) {
          repository.publish(payments, "{\"payment\": " + n++ + "}");
        }
        Thread.sleep(250);
      } catch (InterruptedException e) {
        return;
      } catch (RuntimeException e) {
        // The database is going away at the end of the class; the next loop ends.
      }
    }
  }

  @AfterEach
  void noScriptErrors() {
    List<String> severe = new ArrayList<>();
    for (LogEntry entry : driver.manage().logs().get(LogType.BROWSER)) {
      if (entry.getLevel().intValue() >= Level.SEVERE.intValue()) {
        severe.add(entry.getMessage());
      }
    }
    assertThat(severe).as("errors in the browser's console (CSP or Trusted Types violations, failed requests)")
        .isEmpty();
    assertThat(pwned()).as("a hostile payload ran script").isNull();
  }

  @AfterAll
  void stop() throws Exception {
    publishing.set(false);
    if (driver != null) {
      driver.quit();
    }
    if (publisher != null) {
      publisher.interrupt();
      publisher.join(10_000);
    }
    if (subscriber != null) {
      subscriber.close();
    }
    if (console != null) {
      console.close();
    }
    if (housekeeper != null) {
      housekeeper.close();
    }
    if (metrics != null) {
      metrics.close();
    }
    if (profile != null) {
      try (Stream<Path> files = Files.walk(profile)) {
        files.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
      }
    }
  }

  // ---- helpers

  /** Opens {@code hash} and waits until the page has rendered it (a hash change keeps the document). */
  private void open(String hash, String view) {
    driver.get(console.base() + hash);
    new WebDriverWait(driver, WAIT).until(ExpectedConditions.attributeToBe(By.id("main"), "data-rendered", hash));
    awaitView(view);
  }

  private void awaitView(String view) {
    new WebDriverWait(driver, WAIT).until(ExpectedConditions.attributeToBe(By.id("main"), "data-view", view));
  }

  private WebElement await(By by) {
    return new WebDriverWait(driver, WAIT).until(ExpectedConditions.visibilityOfElementLocated(by));
  }

  private Object pwned() {
    return ((JavascriptExecutor) driver).executeScript("return window.__pwned === undefined ? null : window.__pwned;");
  }

  private String firstQueueOnPage() {
    return driver.findElement(By.cssSelector("#queues tbody tr:first-child td.name")).getText();
  }

  private void awaitFirstQueue(String name) {
    new WebDriverWait(driver, WAIT).until(d -> {
      try {
        return firstQueueOnPage().equals(name);
      } catch (org.openqa.selenium.NoSuchElementException | org.openqa.selenium.StaleElementReferenceException e) {
        return false;
      }
    });
  }

  private void screenshot(String name) throws IOException {
    if (screenshots == null) {
      return;
    }
    Files.createDirectories(screenshots);
    byte[] png = driver.getScreenshotAs(OutputType.BYTES);
    Files.write(screenshots.resolve(name + ".png"), png);
  }

  /** Waits until the housekeeper's statistics include {@code queue} with {@code depth} messages. */
  private void awaitCounted(String queue, long depth) {
    new WebDriverWait(driver, WAIT).until(d -> {
      var read = housekeeper.lastStatistics();
      return read.isPresent() && read.get().queues().stream()
          .anyMatch(s -> s.queue().equals(queue) && s.total() == depth);
    });
  }

  // ---- the tests

  @Test
  @Order(1)
  void theQueuesPageListsAQueueWithItsDepth() throws IOException {
    awaitCounted("orders", 42);
    open("#/queues?sort=depth&dir=desc", "queues");

    WebElement orders = await(By.cssSelector("#queues tr[data-queue='orders']"));
    assertThat(orders.findElement(By.cssSelector("td.depth")).getText()).isEqualTo("42");
    assertThat(orders.findElement(By.cssSelector("td:nth-child(2)")).getText()).isEqualTo("durable");
    assertThat(driver.findElements(By.cssSelector("#queues td.name")).stream().map(WebElement::getText))
        .as("the hostile queue name, as text").contains(HOSTILE_QUEUE);
    assertThat(driver.findElements(By.cssSelector("main img"))).isEmpty();
    screenshot("console-queues");

    orders.findElement(By.cssSelector("td.name a")).click();
    awaitView("queue");
    assertThat(await(By.id("queue-name")).getText()).isEqualTo("orders");
    assertThat(driver.findElement(By.cssSelector("dd[data-count='depth']")).getText()).isEqualTo("42");
    assertThat(driver.findElements(By.cssSelector("#messages tbody tr"))).hasSize(42);
    screenshot("console-queue");
  }

  @Test
  @Order(2)
  void hostilePayloadsRenderAsTextAndNoScriptRuns() throws IOException {
    open("#/queue?name=" + java.net.URLEncoder.encode(HOSTILE_QUEUE, java.nio.charset.StandardCharsets.UTF_8),
        "queue");
    assertThat(await(By.id("queue-name")).getText()).isEqualTo(HOSTILE_QUEUE);
    List<WebElement> previews = driver.findElements(By.cssSelector("#messages td.payload-preview code"));
    assertThat(previews).hasSize(3);
    assertThat(previews.get(0).getText()).isEqualTo(SCRIPT_PAYLOAD);
    assertThat(previews.get(1).getText()).isEqualTo(IMAGE_PAYLOAD);
    assertThat(previews.get(2).getText()).hasSize(ConsoleStatements.PREVIEW_CHARS);

    String[] payloads = {SCRIPT_PAYLOAD, IMAGE_PAYLOAD, bigPayload};
    for (int i = 0; i < payloads.length; i++) {
      open("#/message?id=" + hostileIds.get(i), "message");
      WebElement payload = await(By.id("payload"));
      String text = (String) ((JavascriptExecutor) driver).executeScript(
          "return document.getElementById('payload').textContent;");
      assertThat(text).isEqualTo(payloads[i]);
      assertThat(payload.findElements(By.xpath("./*"))).as("the payload is one text node").isEmpty();
      assertThat(driver.findElements(By.cssSelector("main img, main script"))).isEmpty();
      assertThat(pwned()).isNull();
      if (i == 0) {
        screenshot("console-message");
      }
    }
    assertThat(driver.findElements(By.tagName("script"))).as("only the console's own script").hasSize(1);
  }

  @Test
  @Order(3)
  void aDeadLetterIsRepublishedByClicking() throws IOException {
    open("#/dead-letters", "dead-letters");
    long id = deadLetterIds.get(1);
    WebElement row = await(By.cssSelector("#dead-letters tr[data-id='" + id + "']"));
    assertThat(row.getText()).contains("orders.dead", "shipping", "java.net.SocketTimeoutException",
        "carrier rejected the address: \"Rue de l'Église 7\" <no zip>");
    screenshot("console-dead-letters");

    row.findElement(By.cssSelector("button.republish")).click();

    new WebDriverWait(driver, WAIT).until(ExpectedConditions.attributeContains(
        By.cssSelector("#dead-letters tr[data-id='" + id + "']"), "class", "done"));
    assertThat(await(By.cssSelector("#action-result p")).getText()).isEqualTo("1 republished.");
    assertThat(db.dsl().fetchValue(select(MESSAGE_QUEUE_ITEM.QUEUE_ID).from(MESSAGE_QUEUE_ITEM)
        .where(MESSAGE_QUEUE_ITEM.ID.eq(id)))).isEqualTo("shipping");
    assertThat(db.dsl().fetchExists(MESSAGE_QUEUE_ITEM_FAILURE, MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID.eq(id))).isFalse();
  }

  @Test
  @Order(4)
  void aSelectionOfDeadLettersIsPurgedAfterTypingTheQueueName() {
    open("#/dead-letters?queue=orders.dead", "dead-letters");
    long first = deadLetterIds.get(3);
    long second = deadLetterIds.get(4);
    await(By.cssSelector("#dead-letters tr[data-id='" + first + "'] input[type=checkbox]")).click();
    driver.findElement(By.cssSelector("#dead-letters tr[data-id='" + second + "'] input[type=checkbox]")).click();
    WebElement purge = driver.findElement(By.id("purge"));
    assertThat(purge.getText()).isEqualTo("Purge selected (2)\u2026");
    purge.click();

    WebElement submit = await(By.id("purge-submit"));
    assertThat(submit.isEnabled()).isFalse();
    WebElement confirm = driver.findElement(By.id("purge-confirm"));
    confirm.sendKeys("orders.dea");
    assertThat(submit.isEnabled()).as("not the queue's name yet").isFalse();
    confirm.sendKeys("d");
    assertThat(submit.isEnabled()).isTrue();
    submit.click();

    new WebDriverWait(driver, WAIT).until(ExpectedConditions.textToBePresentInElementLocated(
        By.cssSelector("#action-result p"), "Purged 2 dead letter(s) of orders.dead"));
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.in(first, second))).isZero();
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq("orders.dead"))).isEqualTo(2);
  }

  @Test
  @Order(5)
  void theHousekeepingViewShowsTheTicksOfThisProcess() throws IOException {
    new WebDriverWait(driver, WAIT).until(d -> !new QueueRows(db.dsl()).exists("tenant-0011-events"));
    open("#/housekeeping", "housekeeping");
    WebElement facts = await(By.id("housekeeper"));
    assertThat(facts.getText()).contains("running, a tick every 2 s", "this process did the last tick");
    new WebDriverWait(driver, WAIT).until(d -> {
      d.navigate().refresh();
      awaitView("housekeeping");
      return d.findElements(By.cssSelector("#runs tbody tr")).size() >= 3;
    });
    assertThat(driver.findElement(By.id("database-now")).getText()).contains("Idle queues", "Expired messages");
    screenshot("console-housekeeping");
  }

  @Test
  @Order(6)
  void theThroughputViewChartsThisProcessAndTheDatabase() throws IOException {
    new WebDriverWait(driver, Duration.ofSeconds(40)).until(d -> {
      driver.navigate().to(console.base() + "#/throughput");
      driver.navigate().refresh();
      awaitView("throughput");
      return d.findElements(By.cssSelector("[data-series='published'] svg path.line")).size() == 1
          && d.findElements(By.cssSelector("[data-series='inserted'] svg path.line")).size() == 1
          && ((Number) ((JavascriptExecutor) d).executeScript("return document.querySelector("
              + "\"[data-series='published'] path.line\").getAttribute('d').split('L').length;")).intValue() >= 15;
    });
    String figures = driver.findElement(By.cssSelector("[data-series='published'] .figures")).getText();
    assertThat(figures).startsWith("now ").doesNotStartWith("now \u2014");
    screenshot("console-throughput");
  }

  @Test
  @Order(7)
  void pagingWorksAtTenThousandQueues() {
    Table<Record1<Integer>> series = generateSeries(1, 10_000).as("g", "n");
    Field<Integer> n = series.field("n", Integer.class);
    db.dsl().insertInto(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME, MESSAGE_QUEUE.DURABLE, MESSAGE_QUEUE.AUTO_DELETED,
            MESSAGE_QUEUE.EXCLUSIVE)
        .select(select(inline("page-").concat(lpad(n.cast(String.class), 5, "0")), inline(true), inline(false),
            inline(false)).from(series))
        .execute();

    open("#/queues?sort=name&from=page-", "queues");
    awaitFirstQueue("page-00001");
    assertThat(driver.findElements(By.cssSelector("#queues tbody tr"))).hasSize(50);
    for (int page = 2; page <= 4; page++) {
      driver.findElement(By.id("next-page")).click();
      awaitFirstQueue(String.format("page-%05d", (page - 1) * 50 + 1));
    }
    driver.findElement(By.id("previous-page")).click();
    awaitFirstQueue("page-00101");

    WebElement jump = driver.findElement(By.id("jump"));
    jump.clear();
    jump.sendKeys("page-07777", org.openqa.selenium.Keys.ENTER);
    awaitFirstQueue("page-07777");

    // By depth: from the housekeeper's statistics, once a tick has counted the new queues.
    new WebDriverWait(driver, WAIT).until(d -> housekeeper.lastStatistics().map(s -> s.queues().size() > 10_000)
        .orElse(false));
    driver.findElement(By.cssSelector("a[data-sort='depth']")).click();
    // The page shows the snapshot at hand while the console indexes the housekeeper's newer one: reload until it has.
    new WebDriverWait(driver, WAIT).until(d -> {
      d.navigate().refresh();
      awaitView("queues");
      return d.findElement(By.id("position")).getText().matches("rows 1\u201350 of 10,0\\d\\d");
    });
    List<Long> depths = driver.findElements(By.cssSelector("#queues td.depth")).stream()
        .map(cell -> Long.parseLong(cell.getText().replace(",", "").replace("\u2248", ""))).toList();
    assertThat(depths).isSortedAccordingTo(Comparator.reverseOrder());
    driver.findElement(By.id("next-page")).click();
    new WebDriverWait(driver, WAIT).until(ExpectedConditions.textMatches(By.id("position"),
        java.util.regex.Pattern.compile("rows 51\u2013100 of 10,0\\d\\d")));
    driver.findElement(By.cssSelector("a[data-sort='lastActive']")).click();
    new WebDriverWait(driver, WAIT).until(ExpectedConditions.textMatches(By.id("position"),
        java.util.regex.Pattern.compile("rows 1\u201350")));
  }
}
