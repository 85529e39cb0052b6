package dev.msgqueue.console;

import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * The console's answer to a {@link ConsoleRequest}: what the adapter writes back as it is.
 *
 * @param status the HTTP status
 * @param contentType the {@code Content-Type}
 * @param headers further response headers (security headers, caching), name to value
 * @param body the body
 */
public record ConsoleResponse(int status, String contentType, Map<String, String> headers, byte[] body) {
  public ConsoleResponse {
    headers = Map.copyOf(headers);
  }

  /** The body as UTF-8 text. */
  public String text() {
    return new String(body, StandardCharsets.UTF_8);
  }
}
