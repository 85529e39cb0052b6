package dev.msgqueue.console.standalone;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.TestDatabase;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The standalone console's command line, as an operator runs it. */
@ExtendWith(MsgQueueDatabaseExtension.class)
class StandaloneConsoleTest {
  private final TestDatabase db;

  StandaloneConsoleTest(TestDatabase db) {
    this.db = db;
  }

  @Test
  void servesThePageAtTheAddressItPrintsAndNeverPrintsTheUrl() throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    CountDownLatch stop = new CountDownLatch(1);
    CompletableFuture<Integer> exit = CompletableFuture.supplyAsync(() -> StandaloneConsole.run(
        new String[] {"--jdbc-url", db.jdbcUrl(), "--port", "0"}, "not-a-real-password",
        new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8), stop));
    String address = awaitAddress(out, exit);
    try {
      HttpResponse<String> page = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(address)).build(),
          HttpResponse.BodyHandlers.ofString());
      assertThat(page.statusCode()).isEqualTo(200);
      assertThat(page.body()).contains("msgqueue console");
      HttpResponse<String> session = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
          URI.create(address + "api/session")).build(), HttpResponse.BodyHandlers.ofString());
      assertThat(session.body()).contains("\"actionsEnabled\":false");
    } finally {
      stop.countDown();
    }
    assertThat(exit.get(30, TimeUnit.SECONDS)).isZero();
    String printed = out.toString(StandardCharsets.UTF_8) + err.toString(StandardCharsets.UTF_8);
    assertThat(printed).contains("read only").doesNotContain(db.jdbcUrl(), db.name(), "not-a-real-password");
  }

  private static String awaitAddress(ByteArrayOutputStream out, CompletableFuture<Integer> exit) throws Exception {
    Pattern serving = Pattern.compile("serving (http://\\S+/)");
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (System.nanoTime() < deadline) {
      Matcher matcher = serving.matcher(out.toString(StandardCharsets.UTF_8));
      if (matcher.find()) {
        return matcher.group(1);
      }
      if (exit.isDone()) {
        throw new AssertionError("the console exited with " + exit.get() + ": " + out);
      }
      Thread.sleep(20);
    }
    throw new AssertionError("the console never said where it serves: " + out);
  }

  @Test
  void aDatabaseWithoutTheTablesIsRefusedWithAHint() {
    try (TestDatabase empty = TestDatabase.createEmpty("standalone-empty")) {
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      int exit = StandaloneConsole.run(new String[] {"--jdbc-url", empty.jdbcUrl(), "--port", "0"}, null,
          new PrintStream(new ByteArrayOutputStream()), new PrintStream(err, true, StandardCharsets.UTF_8),
          new CountDownLatch(0));
      assertThat(exit).isEqualTo(StandaloneConsole.EXIT_UNAVAILABLE);
      assertThat(err.toString(StandardCharsets.UTF_8)).contains("no msgqueue tables", "currentSchema");
    }
  }

  @Test
  void aPasswordInTheUrlIsWarnedAbout() {
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int exit = StandaloneConsole.run(new String[] {"--jdbc-url",
        db.jdbcUrl() + (db.jdbcUrl().contains("?") ? "&" : "?") + "password=secret", "--port", "0"},
        null, new PrintStream(new ByteArrayOutputStream()), new PrintStream(err, true, StandardCharsets.UTF_8),
        new CountDownLatch(0));
    assertThat(exit).isZero();
    assertThat(err.toString(StandardCharsets.UTF_8)).contains("holds a password", StandaloneConsole.PASSWORD_VARIABLE)
        .doesNotContain("secret");
  }

  @Test
  void badCommandLinesAreRefusedBeforeAnyConnection() throws Exception {
    assertThatThrownBy(() -> StandaloneConsole.parse(new String[] {})).hasMessageContaining("--jdbc-url is required");
    assertThatThrownBy(() -> StandaloneConsole.parse(new String[] {"--jdbc-url", "jdbc:mysql://x/y"}))
        .hasMessageContaining("PostgreSQL");
    assertThatThrownBy(() -> StandaloneConsole.parse(new String[] {"--jdbc-url", "jdbc:postgresql://x/y", "--port",
        "70000"})).hasMessageContaining("--port");
    assertThatThrownBy(() -> StandaloneConsole.parse(new String[] {"--jdbc-url", "jdbc:postgresql://x/y",
        "--reap-idle-threshold", "an hour"})).hasMessageContaining("ISO-8601");
    assertThatThrownBy(() -> StandaloneConsole.parse(new String[] {"--jdbc-url", "jdbc:postgresql://x/y",
        "--password", "p"})).hasMessageContaining("unknown option --password");
    StandaloneConsole.Options options = StandaloneConsole.parse(new String[] {"--jdbc-url", "jdbc:postgresql://x/y",
        "--actions", "--bind", "0.0.0.0", "--port", "9000"});
    assertThat(options.actions()).isTrue();
    assertThat(options.bind()).isEqualTo("0.0.0.0");
    assertThat(options.port()).isEqualTo(9000);
    assertThat(StandaloneConsole.run(new String[] {"--help"}, null, new PrintStream(new ByteArrayOutputStream()),
        new PrintStream(new ByteArrayOutputStream()), null)).isZero();
  }
}
