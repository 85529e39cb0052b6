package dev.msgqueue.console;

/**
 * A request the API refuses, with the HTTP status and a message for the page. The message names only what the request
 * got wrong, never anything of the server, the database or the connection.
 */
final class ApiError extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final int status;

  private ApiError(int status, String message) {
    super(message, null, false, false);
    this.status = status;
  }

  static ApiError badRequest(String message) {
    return new ApiError(400, message);
  }

  static ApiError forbidden(String message) {
    return new ApiError(403, message);
  }

  static ApiError notFound(String message) {
    return new ApiError(404, message);
  }

  static ApiError methodNotAllowed(String message) {
    return new ApiError(405, message);
  }

  int status() {
    return status;
  }
}
