package dev.msgqueue.console;

import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.stream.Collectors;

/**
 * One HTTP request to the console, as an adapter (the Spring Boot starter's, or the standalone server's) hands it
 * over.
 *
 * @param method the HTTP method, e.g. {@code GET}
 * @param path the path below the console's root, starting with {@code /} ({@code /} itself is the page)
 * @param query the decoded query parameters (the first value of each)
 * @param headers the request headers the adapter passes on, names in lower case; the console reads
 *     {@code content-type} and its own CSRF header
 * @param body the request body (empty for a GET); adapters bound its size
 * @param actor who is asking, as the action log names them: the authenticated principal in a service, the remote
 *     address in the standalone console
 * @param postHeaders headers the page must send with every POST besides the console's own CSRF token, name to value
 *     (a service's Spring Security CSRF token, say); empty when there are none
 */
public record ConsoleRequest(
    String method,
    String path,
    Map<String, String> query,
    Map<String, String> headers,
    byte[] body,
    String actor,
    Map<String, String> postHeaders) {

  public ConsoleRequest {
    Objects.requireNonNull(method, "method");
    Objects.requireNonNull(path, "path");
    query = Map.copyOf(query);
    headers = headers.entrySet().stream()
        .collect(Collectors.toUnmodifiableMap(e -> e.getKey().toLowerCase(Locale.ROOT), Map.Entry::getValue,
            (first, second) -> first));
    body = body == null ? new byte[0] : body;
    Objects.requireNonNull(actor, "actor");
    postHeaders = Map.copyOf(postHeaders);
  }

  /** The value of header {@code name} (any case), or {@code null}. */
  public String header(String name) {
    return headers.get(name.toLowerCase(Locale.ROOT));
  }
}
