package dev.msgqueue.boottest;

import static org.assertj.core.api.Assertions.assertThat;

import com.jayway.jsonpath.JsonPath;
import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.FailureOutcome;
import dev.msgqueue.Housekeeper;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.RetryPolicy;
import java.io.IOException;
import java.net.CookieManager;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The console inside the service, through Boot's own auto-configuration and the starter, with the service's Spring
 * Security as Boot configures it by default: every request authenticated, CSRF protection on.
 */
@ExtendWith({ScratchDatabase.class, OutputCaptureExtension.class})
@SpringBootTest(classes = BootService.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT, properties = {
    "boottest.default-security=true",
    "spring.security.user.name=operator",
    "spring.security.user.password=" + ConsoleInServiceTest.PASSWORD,
    "msgqueue.console.enabled=true",
    "msgqueue.console.actions-enabled=true"})
@DirtiesContext
class ConsoleInServiceTest {
  static final String PASSWORD = "console-test-password";
  private static final String CSRF_HEADER = "X-Msgqueue-Console-Csrf";

  @DynamicPropertySource
  static void database(DynamicPropertyRegistry registry) {
    registry.add("spring.datasource.url", () -> ScratchDatabase.current().jdbcUrl());
  }

  @Value("${local.server.port}")
  private int port;

  @Autowired
  private MsgQueueRepository repository;

  @Autowired
  private Housekeeper housekeeper;

  private final HttpClient browser = HttpClient.newBuilder().cookieHandler(new CookieManager())
      .followRedirects(HttpClient.Redirect.NEVER).connectTimeout(Duration.ofSeconds(5)).build();

  private HttpResponse<String> get(String path, boolean authenticated) {
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).GET();
    return send(authenticated ? withLogin(request) : request);
  }

  private HttpResponse<String> post(String path, String json, Map<String, String> headers) {
    HttpRequest.Builder request = withLogin(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(json)));
    headers.forEach(request::header);
    return send(request);
  }

  private static HttpRequest.Builder withLogin(HttpRequest.Builder request) {
    return request.header("Authorization", "Basic " + Base64.getEncoder()
        .encodeToString(("operator:" + PASSWORD).getBytes(StandardCharsets.UTF_8)));
  }

  private HttpResponse<String> send(HttpRequest.Builder request) {
    try {
      return browser.send(request.timeout(Duration.ofSeconds(60)).build(), HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      throw new IllegalStateException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  @Test
  void theConsoleSitsBehindTheServicesSecurity() {
    assertThat(get("/msgqueue/", false).statusCode()).isEqualTo(401);
    assertThat(get("/msgqueue/api/queues", false).statusCode()).isEqualTo(401);
    assertThat(get("/msgqueue/api/session", false).body()).doesNotContain(CSRF_HEADER);

    HttpResponse<String> redirect = get("/msgqueue", true);
    assertThat(redirect.statusCode()).isEqualTo(302);
    assertThat(redirect.headers().firstValue("Location").orElseThrow()).endsWith("/msgqueue/");
    HttpResponse<String> page = get("/msgqueue/", true);
    assertThat(page.statusCode()).isEqualTo(200);
    assertThat(page.body()).contains("<script src=\"console.js\" defer></script>");
    assertThat(page.headers().firstValue("Content-Security-Policy").orElseThrow()).contains("default-src 'none'");
  }

  @Test
  void itListsTheServicesQueuesWithTheirDepth() {
    QueueSpec queue = QueueSpec.durable("console-listed");
    repository.bindQueue(queue);
    for (int i = 0; i < 4; i++) {
      repository.publish(queue, "{\"n\": " + i + "}");
    }
    // The list's counts come from the housekeeper's statistics snapshot, never a count per page view: a tick reads
    // one that includes this queue (the scheduled tick may have read its snapshot before the queue existed).
    housekeeper.runOnce();
    HttpResponse<String> page = get("/msgqueue/api/queues?sort=name&from=console-listed", true);
    assertThat(page.statusCode()).isEqualTo(200);
    assertThat((String) JsonPath.read(page.body(), "$.rows[0].name")).isEqualTo("console-listed");
    assertThat(((Number) JsonPath.read(page.body(), "$.rows[0].counts.depth")).longValue()).isEqualTo(4);
  }

  @Test
  void aDeadLetterIsRepublishedWithTheServicesCsrfTokenAndLoggedWithThePrincipal(CapturedOutput output) {
    QueueSpec queue = QueueSpec.durable("console-failing");
    repository.bindQueue(queue);
    repository.publish(queue, "{\"fails\": true}");
    ClaimedMessage message = repository.claim("console-failing", 1, Duration.ofMinutes(5)).get(0);
    assertThat(repository.fail(message, new IllegalStateException("boom"),
        RetryPolicy.builder("console-failing.dead").maxDeliveries(1).build())).isEqualTo(FailureOutcome.DEAD_LETTERED);

    String session = get("/msgqueue/api/session", true).body();
    Map<String, String> postHeaders = JsonPath.read(session, "$.postHeaders");
    assertThat(postHeaders).containsKey(CSRF_HEADER).hasSize(2);
    String body = "{\"ids\": [" + message.id() + "]}";

    HttpResponse<String> withoutSpringsToken = post("/msgqueue/api/dead-letters/republish", body,
        Map.of(CSRF_HEADER, postHeaders.get(CSRF_HEADER)));
    // Refused by Spring Security's CSRF filter before the console sees it (Boot answers the forward to its error page
    // with 401 on one line and 403 on the other).
    assertThat(withoutSpringsToken.statusCode()).isIn(401, 403);
    assertThat(withoutSpringsToken.body()).doesNotContain("REPUBLISHED");
    assertThat(repository.deadLetters("console-failing.dead", 10)).hasSize(1);

    HttpResponse<String> republished = post("/msgqueue/api/dead-letters/republish", body, postHeaders);
    assertThat(republished.statusCode()).isEqualTo(200);
    assertThat((List<String>) JsonPath.read(republished.body(), "$.results[*].outcome")).containsExactly("REPUBLISHED");
    assertThat(repository.deadLetters("console-failing.dead", 10)).isEmpty();
    assertThat(output.getOut() + output.getErr())
        .contains("user operator (127.0.0.1) republished dead letters [" + message.id() + "]");
  }
}
