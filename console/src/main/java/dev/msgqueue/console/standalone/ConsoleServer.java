package dev.msgqueue.console.standalone;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.msgqueue.console.Console;
import dev.msgqueue.console.ConsoleRequest;
import dev.msgqueue.console.ConsoleResponse;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The console served by the JDK's own HTTP server ({@code com.sun.net.httpserver}): no servlet container and no web
 * framework in the standalone jar. It maps each exchange to a {@link ConsoleRequest} and writes the
 * {@link ConsoleResponse} back.
 *
 * <p>Bound to a loopback address, it answers only requests whose {@code Host} names a loopback address (a browser
 * tab on another site that rebinds its own name to 127.0.0.1 gets 421), and it names the remote address as the actor
 * of every action. {@link #close()} stops the server and its threads.
 */
public final class ConsoleServer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ConsoleServer.class);
  private static final List<String> LOOPBACK_HOSTS = List.of("localhost", "127.0.0.1", "[::1]");

  private final HttpServer server;
  private final ExecutorService threads;
  private final Console console;
  private final boolean loopbackOnly;

  private ConsoleServer(HttpServer server, ExecutorService threads, Console console, boolean loopbackOnly) {
    this.server = server;
    this.threads = threads;
    this.console = console;
    this.loopbackOnly = loopbackOnly;
  }

  /**
   * Serves {@code console} at the root of {@code address} (port 0: any free port) on a few daemon threads.
   *
   * @throws IOException if the address cannot be bound
   */
  public static ConsoleServer start(Console console, InetSocketAddress address) throws IOException {
    HttpServer server = HttpServer.create(address, 64);
    AtomicInteger count = new AtomicInteger();
    ExecutorService threads = Executors.newFixedThreadPool(4, body -> {
      Thread thread = new Thread(body, "msgqueue-console-http-" + count.incrementAndGet());
      thread.setDaemon(true);
      return thread;
    });
    InetAddress bound = address.getAddress();
    ConsoleServer consoleServer = new ConsoleServer(server, threads, console, bound != null
        && bound.isLoopbackAddress());
    server.createContext("/", consoleServer::serve);
    server.setExecutor(threads);
    server.start();
    return consoleServer;
  }

  /** The port the server listens on. */
  public int port() {
    return server.getAddress().getPort();
  }

  private void serve(HttpExchange exchange) throws IOException {
    try {
      if (loopbackOnly && !isLoopbackHost(exchange.getRequestHeaders().getFirst("Host"))) {
        send(exchange, 421, "text/plain; charset=utf-8", Map.of(),
            "this console answers only at a loopback address".getBytes(StandardCharsets.UTF_8));
        return;
      }
      byte[] body = readBody(exchange);
      if (body == null) {
        send(exchange, 413, "text/plain; charset=utf-8", Map.of(),
            "request body too large".getBytes(StandardCharsets.UTF_8));
        return;
      }
      Map<String, String> headers = new HashMap<>();
      exchange.getRequestHeaders().forEach((name, values) -> {
        if (!values.isEmpty()) {
          headers.put(name.toLowerCase(Locale.ROOT), values.get(0));
        }
      });
      String actor = "standalone (" + exchange.getRemoteAddress().getAddress().getHostAddress() + ")";
      ConsoleResponse response = console.handle(new ConsoleRequest(exchange.getRequestMethod(),
          exchange.getRequestURI().getPath(), query(exchange.getRequestURI().getRawQuery()), headers, body, actor,
          Map.of()));
      send(exchange, response.status(), response.contentType(), response.headers(), response.body());
    } catch (RuntimeException e) {
      log.error("console: a request failed", e);
    } finally {
      exchange.close();
    }
  }

  private static boolean isLoopbackHost(String host) {
    if (host == null) {
      return false;
    }
    String name = host.toLowerCase(Locale.ROOT);
    int colon = name.lastIndexOf(':');
    if (colon > name.lastIndexOf(']')) {
      name = name.substring(0, colon);
    }
    return LOOPBACK_HOSTS.contains(name);
  }

  /** The body, or {@code null} if it is larger than the console reads. */
  private static byte[] readBody(HttpExchange exchange) throws IOException {
    try (InputStream in = exchange.getRequestBody()) {
      byte[] body = in.readNBytes(Console.MAX_BODY_BYTES + 1);
      return body.length > Console.MAX_BODY_BYTES ? null : body;
    }
  }

  private static Map<String, String> query(String raw) {
    Map<String, String> query = new HashMap<>();
    if (raw == null || raw.isEmpty()) {
      return query;
    }
    for (String pair : raw.split("&")) {
      int equals = pair.indexOf('=');
      String name = decode(equals < 0 ? pair : pair.substring(0, equals));
      String value = equals < 0 ? "" : decode(pair.substring(equals + 1));
      query.putIfAbsent(name, value);
    }
    return query;
  }

  private static String decode(String text) {
    try {
      return URLDecoder.decode(text, StandardCharsets.UTF_8);
    } catch (IllegalArgumentException e) {
      // A malformed escape: passed on as it is, for the API to refuse or find nothing by.
      return text;
    }
  }

  private static void send(HttpExchange exchange, int status, String contentType, Map<String, String> headers,
      byte[] body) throws IOException {
    exchange.getResponseHeaders().set("Content-Type", contentType);
    headers.forEach((name, value) -> exchange.getResponseHeaders().set(name, value));
    boolean noBody = body.length == 0 || exchange.getRequestMethod().equals("HEAD");
    exchange.sendResponseHeaders(status, noBody ? -1 : body.length);
    if (!noBody) {
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
    }
  }

  /** Stops accepting requests and stops the threads; a request in progress is cut off. */
  @Override
  public void close() {
    server.stop(0);
    threads.shutdown();
    try {
      threads.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
