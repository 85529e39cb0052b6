package dev.msgqueue.boottest;

import com.jayway.jsonpath.JsonPath;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/** Real HTTP calls to the running service, with the JDK's client (the same on both Boot lines). */
final class Http {
  private final HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final String base;

  Http(int port) {
    this.base = "http://127.0.0.1:" + port;
  }

  record Response(int status, String body) {
    /** The value at {@code path} (JsonPath) of the JSON body. */
    <T> T json(String path) {
      return JsonPath.read(body, path);
    }
  }

  Response get(String path) {
    return send(HttpRequest.newBuilder(URI.create(base + path)).GET());
  }

  Response post(String path, String json) {
    return send(HttpRequest.newBuilder(URI.create(base + path)).header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(json)));
  }

  private Response send(HttpRequest.Builder request) {
    try {
      HttpResponse<String> response = client.send(request.timeout(Duration.ofSeconds(60)).build(),
          HttpResponse.BodyHandlers.ofString());
      return new Response(response.statusCode(), response.body());
    } catch (IOException e) {
      throw new IllegalStateException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
