package dev.msgqueue.console;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.console.standalone.ConsoleServer;
import dev.msgqueue.it.TestDatabase;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.function.UnaryOperator;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/** A console over a test database, served by the standalone server on a free loopback port, and an HTTP client. */
final class ConsoleHarness implements AutoCloseable {
  static final ObjectMapper JSON = new ObjectMapper();

  final TestDatabase db;
  final MsgQueueRepository repository;
  final Console console;
  final ConsoleServer server;
  private final HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  private ConsoleHarness(TestDatabase db, MsgQueueRepository repository, Console console, ConsoleServer server) {
    this.db = db;
    this.repository = repository;
    this.console = console;
    this.server = server;
  }

  /** A repository with room for 2 MiB payloads (the tests store a 1 MiB string), and a console over it. */
  static MsgQueueRepository repository(TestDatabase db) {
    return MsgQueueRepository.create(db.dataSource(),
        MsgQueueConfig.builder().maxPayloadBytes(2 * 1024 * 1024).build());
  }

  static ConsoleHarness start(TestDatabase db, MsgQueueRepository repository,
      UnaryOperator<Console.Builder> settings) {
    Console console = settings.apply(Console.builder(repository, DSL.using(db.dataSource(), SQLDialect.POSTGRES))
        .statisticsMaxAge(Duration.ofSeconds(1))).build();
    try {
      ConsoleServer server = ConsoleServer.start(console,
          new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
      return new ConsoleHarness(db, repository, console, server);
    } catch (IOException e) {
      console.close();
      throw new UncheckedIOException(e);
    }
  }

  String base() {
    return "http://127.0.0.1:" + server.port() + "/";
  }

  record Response(int status, HttpHeaders headers, String body) {
    JsonNode json() {
      try {
        return JSON.readTree(body);
      } catch (IOException e) {
        throw new AssertionError("not JSON: " + body, e);
      }
    }

    String header(String name) {
      return headers.firstValue(name).orElse(null);
    }
  }

  Response get(String pathAndQuery) {
    return send(HttpRequest.newBuilder(URI.create(base() + pathAndQuery)).GET());
  }

  /** A POST as the page sends it: JSON, with the CSRF token the session API hands out. */
  Response post(String path, String json) {
    String token = get("api/session").json().path("postHeaders").path(Console.CSRF_HEADER).asText();
    return postWith(path, json, token);
  }

  Response postWith(String path, String json, String csrfToken) {
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(base() + path))
        .header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(json));
    if (csrfToken != null) {
      request.header(Console.CSRF_HEADER, csrfToken);
    }
    return send(request);
  }

  Response send(HttpRequest.Builder request) {
    try {
      HttpResponse<String> response = client.send(request.timeout(Duration.ofSeconds(60)).build(),
          HttpResponse.BodyHandlers.ofString());
      return new Response(response.statusCode(), response.headers(), response.body());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  @Override
  public void close() {
    server.close();
    console.close();
  }
}
