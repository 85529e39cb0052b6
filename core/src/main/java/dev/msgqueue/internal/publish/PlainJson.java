package dev.msgqueue.internal.publish;

/**
 * A one-pass check that recognizes the payloads services publish day to day: JSON in which every number is a
 * plain literal of at most {@value #MAX_PLAIN_NUMBER_LENGTH} characters without exponent, every string escape is one
 * of the two-character ones, and nesting stays within {@value #MAX_DEPTH} levels. Such a text is valid JSON within all
 * of PostgreSQL's {@code jsonb} limits, so {@link Payloads} accepts it without its full check. Anything else is "not
 * sure", never "invalid": the full check decides, and gives the reason.
 *
 * <p>Why: the full check runs Jackson's parser, a noticeable share of a large batch's time in the client; this scan
 * takes a fraction of it.
 */
final class PlainJson {
  // The full check measured about 0.45 us for a 100-byte payload, a twentieth of the time a batch of 1,000 takes to
  // copy.
  /** At most 16 characters: far inside numeric's range and scale, and no exponent to check. */
  static final int MAX_PLAIN_NUMBER_LENGTH = 16;
  static final int MAX_DEPTH = 64;

  private final String text;
  private int at;

  private PlainJson(String text) {
    this.text = text;
  }

  /** Whether {@code json} is, beyond doubt, one JSON value that PostgreSQL's jsonb accepts; false: not sure. */
  static boolean isPlain(String json) {
    PlainJson scan = new PlainJson(json);
    return scan.value() && scan.atEnd();
  }

  /**
   * One value, containers included, without recursion: {@code open} holds the kind of each open container
   * ({@code '{'} or {@code '['}).
   */
  private boolean value() {
    char[] open = new char[MAX_DEPTH];
    int depth = 0;
    while (true) {
      skipWhitespace();
      if (at >= text.length()) {
        return false;
      }
      char c = text.charAt(at);
      if (c == '{' || c == '[') {
        if (depth == MAX_DEPTH) {
          return false;
        }
        open[depth++] = c;
        at++;
        skipWhitespace();
        if (at < text.length() && text.charAt(at) == (c == '{' ? '}' : ']')) {
          at++;
          depth--;
        } else {
          if (c == '{' && !key()) {
            return false;
          }
          continue;
        }
      } else if (!scalar(c)) {
        return false;
      }
      // After a value: a comma and the next member or element, or the end of containers.
      while (true) {
        if (depth == 0) {
          return true;
        }
        skipWhitespace();
        if (at >= text.length()) {
          return false;
        }
        char next = text.charAt(at++);
        char container = open[depth - 1];
        if (next == ',') {
          if (container == '{' && !key()) {
            return false;
          }
          break;
        }
        if (next != (container == '{' ? '}' : ']')) {
          return false;
        }
        depth--;
      }
    }
  }

  /** An object key and its colon. */
  private boolean key() {
    skipWhitespace();
    if (at >= text.length() || text.charAt(at) != '"' || !string()) {
      return false;
    }
    skipWhitespace();
    if (at >= text.length() || text.charAt(at) != ':') {
      return false;
    }
    at++;
    return true;
  }

  private boolean scalar(char c) {
    return switch (c) {
      case '"' -> string();
      case 't' -> literal("true");
      case 'f' -> literal("false");
      case 'n' -> literal("null");
      default -> number();
    };
  }

  private boolean literal(String word) {
    if (!text.startsWith(word, at)) {
      return false;
    }
    at += word.length();
    return true;
  }

  /** A string from its opening quote; its text is whatever the payload's own checks let through. */
  private boolean string() {
    at++;
    while (at < text.length()) {
      char c = text.charAt(at++);
      if (c == '"') {
        return true;
      }
      if (c < 0x20) {
        return false;
      }
      if (c == '\\') {
        if (at >= text.length()) {
          return false;
        }
        switch (text.charAt(at++)) {
          case '"', '\\', '/', 'b', 'f', 'n', 'r', 't' -> { }
          default -> {
            return false; // \\u escapes (NUL, surrogates) and bad escapes: the full check
          }
        }
      }
    }
    return false;
  }

  /** {@code -? (0 | [1-9][0-9]*) (. [0-9]+)?}, short. */
  private boolean number() {
    int start = at;
    if (at < text.length() && text.charAt(at) == '-') {
      at++;
    }
    if (at >= text.length() || !isDigit(text.charAt(at))) {
      return false;
    }
    if (text.charAt(at++) != '0') {
      while (at < text.length() && isDigit(text.charAt(at))) {
        at++;
      }
    }
    if (at < text.length() && text.charAt(at) == '.') {
      at++;
      if (at >= text.length() || !isDigit(text.charAt(at))) {
        return false;
      }
      while (at < text.length() && isDigit(text.charAt(at))) {
        at++;
      }
    }
    if (at < text.length() && (text.charAt(at) == 'e' || text.charAt(at) == 'E')) {
      return false;
    }
    return at - start <= MAX_PLAIN_NUMBER_LENGTH;
  }

  private boolean atEnd() {
    skipWhitespace();
    return at == text.length();
  }

  /** JSON's white space, which is also PostgreSQL's. */
  private void skipWhitespace() {
    while (at < text.length()) {
      char c = text.charAt(at);
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
        return;
      }
      at++;
    }
  }

  private static boolean isDigit(char c) {
    return c >= '0' && c <= '9';
  }
}
