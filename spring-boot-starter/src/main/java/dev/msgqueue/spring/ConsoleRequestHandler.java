package dev.msgqueue.spring;

import dev.msgqueue.console.Console;
import dev.msgqueue.console.ConsoleRequest;
import dev.msgqueue.console.ConsoleResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Method;
import java.security.Principal;
import java.util.Collections;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import org.springframework.web.HttpRequestHandler;

/**
 * The console's Spring MVC adapter: maps a servlet request below the console's path to a {@link ConsoleRequest} and
 * writes the {@link ConsoleResponse} back. It names the authenticated principal (or "anonymous") and the remote
 * address as the actor, and hands the page the service's Spring Security CSRF token, if there is one, to send with
 * every POST.
 */
final class ConsoleRequestHandler implements HttpRequestHandler {
  /** The request attribute Spring Security keeps the CSRF token under, read by name: Security is optional. */
  private static final String SPRING_SECURITY_CSRF_ATTRIBUTE = "_csrf";
  private static final String SPRING_SECURITY_CSRF_TOKEN = "org.springframework.security.web.csrf.CsrfToken";

  private final Console console;
  private final String path;

  ConsoleRequestHandler(Console console, String path) {
    this.console = console;
    this.path = path;
  }

  /**
   * The console's path as configured: absolute, not the root, no trailing slash, no wildcard.
   *
   * @throws IllegalArgumentException naming the property otherwise
   */
  static String requireValidPath(String path) {
    if (path == null || !path.startsWith("/") || path.length() < 2 || path.endsWith("/") || path.contains("*")
        || path.contains("{") || path.contains("?") || path.contains("//")) {
      throw new IllegalArgumentException("invalid msgqueue.console.path \"" + path + "\": a path of its own such as"
          + " /msgqueue (starting with a slash, not the root, no trailing slash, no pattern)");
    }
    return path;
  }

  @Override
  public void handleRequest(HttpServletRequest request, HttpServletResponse response) throws IOException {
    String below = request.getRequestURI().substring(request.getContextPath().length());
    if (!below.startsWith(path)) {
      response.sendError(HttpServletResponse.SC_NOT_FOUND);
      return;
    }
    below = below.substring(path.length());
    if (below.isEmpty()) {
      // The page's links are relative: it must be served at the path with its slash.
      response.sendRedirect(request.getContextPath() + path + "/");
      return;
    }
    byte[] body = readBody(request);
    if (body == null) {
      response.sendError(HttpServletResponse.SC_REQUEST_ENTITY_TOO_LARGE);
      return;
    }
    Map<String, String> query = new HashMap<>();
    request.getParameterMap().forEach((name, values) -> {
      if (values.length > 0) {
        query.put(name, values[0]);
      }
    });
    Map<String, String> headers = new HashMap<>();
    for (String name : Collections.list(request.getHeaderNames())) {
      headers.put(name.toLowerCase(Locale.ROOT), request.getHeader(name));
    }
    ConsoleResponse answer = console.handle(new ConsoleRequest(request.getMethod(), below, query, headers, body,
        actor(request), springSecurityCsrf(request)));
    response.setStatus(answer.status());
    answer.headers().forEach(response::setHeader);
    response.setContentType(answer.contentType());
    response.setContentLength(answer.body().length);
    response.getOutputStream().write(answer.body());
  }

  private static String actor(HttpServletRequest request) {
    Principal principal = request.getUserPrincipal();
    String who = principal == null ? "anonymous" : "user " + principal.getName();
    return who + " (" + request.getRemoteAddr() + ")";
  }

  /** The body, or {@code null} if it is larger than the console reads. */
  private static byte[] readBody(HttpServletRequest request) throws IOException {
    if (request.getContentLengthLong() > Console.MAX_BODY_BYTES) {
      return null;
    }
    try (InputStream in = request.getInputStream()) {
      byte[] body = in.readNBytes(Console.MAX_BODY_BYTES + 1);
      return body.length > Console.MAX_BODY_BYTES ? null : body;
    }
  }

  /**
   * Spring Security's CSRF token for this request (its header name and value), if the service has Spring Security
   * with CSRF protection on: the page sends it with every POST, and Security's own filter checks it before the console
   * sees the request.
   */
  private static Map<String, String> springSecurityCsrf(HttpServletRequest request) {
    Object token = request.getAttribute(SPRING_SECURITY_CSRF_ATTRIBUTE);
    if (token == null) {
      return Map.of();
    }
    try {
      Class<?> type = Class.forName(SPRING_SECURITY_CSRF_TOKEN, false, token.getClass().getClassLoader());
      if (!type.isInstance(token)) {
        return Map.of();
      }
      Method headerName = type.getMethod("getHeaderName");
      Method value = type.getMethod("getToken");
      return Map.of((String) headerName.invoke(token), (String) value.invoke(token));
    } catch (ReflectiveOperationException | LinkageError e) {
      return Map.of();
    }
  }
}
