package dev.msgqueue.internal.publish;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import dev.msgqueue.internal.support.Arguments;
import dev.msgqueue.internal.support.Utf16;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.jooq.JSONB;

/**
 * Checks a payload against everything PostgreSQL's {@code jsonb} input would reject, so a bad payload fails with an
 * {@link IllegalArgumentException} before any SQL runs (and so never aborts a caller's transaction).
 */
public final class Payloads {
  /** Nesting deeper than this is rejected; PostgreSQL's recursive jsonb code runs out of stack long before JSON does. */
  public static final int MAX_NESTING_DEPTH = 1_000;
  /** PostgreSQL's numeric holds at most this many digits before the decimal point. */
  public static final int MAX_NUMERIC_INTEGER_DIGITS = 131_072;
  /** PostgreSQL's numeric keeps at most this many digits after the decimal point (trailing zeros count). */
  public static final int MAX_NUMERIC_SCALE = 16_383;
  /** PostgreSQL's numeric input rejects an exponent whose magnitude reaches {@code INT_MAX / 2}, even on zero. */
  public static final long MAX_NUMERIC_EXPONENT_EXCLUSIVE = Integer.MAX_VALUE / 2;

  private final int maxPayloadBytes;
  private final JsonFactory factory;

  public Payloads(int maxPayloadBytes) {
    this.maxPayloadBytes = maxPayloadBytes;
    this.factory = JsonFactory.builder()
        .streamReadConstraints(StreamReadConstraints.builder()
            .maxNestingDepth(MAX_NESTING_DEPTH)
            .maxStringLength(maxPayloadBytes)
            .maxNumberLength(maxPayloadBytes)
            .maxNameLength(maxPayloadBytes)
            .build())
        .build();
  }

  public JSONB validate(JSONB payload) {
    return validate(Arguments.requireNonNull(payload, "payload").data());
  }

  /**
   * Validates a batch of at most {@code maxBatch} payloads.
   *
   * @throws IllegalArgumentException for a null or too long list, or naming the index of the first invalid payload
   */
  public List<JSONB> validateAll(List<String> jsons, int maxBatch) {
    Arguments.requireNonNull(jsons, "payloads");
    if (jsons.size() > maxBatch) {
      throw new IllegalArgumentException("a batch holds at most " + maxBatch + " payloads, was " + jsons.size());
    }
    List<JSONB> validated = new ArrayList<>(jsons.size());
    for (int i = 0; i < jsons.size(); i++) {
      try {
        validated.add(validate(jsons.get(i)));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("payload " + i + ": " + e.getMessage(), e);
      }
    }
    return validated;
  }

  public JSONB validate(String json) {
    Arguments.requireNonNull(json, "payload");
    if (json.isBlank()) {
      throw new IllegalArgumentException("payload is empty; it must be a JSON value");
    }
    // A UTF-8 byte is at most 3 per UTF-16 char, so the exact count is needed only near the limit.
    if ((long) json.length() * 3 > maxPayloadBytes) {
      int bytes = json.getBytes(StandardCharsets.UTF_8).length;
      if (bytes > maxPayloadBytes) {
        throw new IllegalArgumentException(
            "payload is " + bytes + " bytes in UTF-8; the maximum is " + maxPayloadBytes);
      }
    }
    // Text with no UTF-8 form cannot reach the server unchanged (the driver would substitute '?'); escaped
    // surrogates are checked after decoding, by the full check.
    int unpaired = Utf16.unpairedSurrogateIndex(json);
    if (unpaired >= 0) {
      throw new IllegalArgumentException("payload has an unpaired surrogate at index " + unpaired);
    }
    if (!PlainJson.isPlain(json)) {
      checkFully(json);
    }
    return JSONB.valueOf(json);
  }

  /**
   * Parses {@code json} (already checked for size and unpaired surrogates) and applies every rule of PostgreSQL's
   * {@code jsonb} input to its keys, strings and numbers.
   *
   * @throws IllegalArgumentException saying what breaks which rule
   */
  void checkFully(String json) {
    try (JsonParser parser = factory.createParser(json)) {
      if (parser.nextToken() == null) {
        throw new IllegalArgumentException("payload is empty; it must be a JSON value");
      }
      checkValue(parser);
      if (parser.nextToken() != null) {
        throw new IllegalArgumentException(
            "payload has content after its JSON value at " + parser.currentLocation().getCharOffset());
      }
    } catch (StreamConstraintsException e) {
      throw new IllegalArgumentException("payload exceeds a JSON limit: " + e.getOriginalMessage(), e);
    } catch (IOException e) {
      throw new IllegalArgumentException("payload is not valid JSON: " + e.getMessage(), e);
    }
  }

  /** Walks the value the parser is on (and, for containers, all of it). */
  private static void checkValue(JsonParser parser) throws IOException {
    int depth = 0;
    do {
      JsonToken token = parser.currentToken();
      switch (token) {
        case START_OBJECT, START_ARRAY -> depth++;
        case END_OBJECT, END_ARRAY -> depth--;
        case FIELD_NAME -> checkText(parser.currentName(), "an object key");
        case VALUE_STRING -> checkText(parser.getText(), "a string");
        case VALUE_NUMBER_INT, VALUE_NUMBER_FLOAT -> checkNumeric(parser.getText());
        default -> { }
      }
    } while (depth > 0 && parser.nextToken() != null);
  }

  private static void checkText(String text, String where) {
    if (text.indexOf('\u0000') >= 0) {
      throw new IllegalArgumentException("payload has \\u0000 in " + where + "; PostgreSQL's jsonb cannot store it");
    }
    if (Utf16.unpairedSurrogateIndex(text) >= 0) {
      throw new IllegalArgumentException("payload has an unpaired surrogate in " + where);
    }
  }

  /**
   * Applies PostgreSQL's numeric input rules to a JSON number literal (already well-formed: the parser checked its
   * grammar) by looking at its digits only, never converting it, so a megabyte of digits costs one linear scan. For a
   * literal with fraction digits {@code F} and exponent {@code E}: {@code |E|} below {@code INT_MAX / 2}; the kept
   * scale {@code max(0, F - E)} at most {@value #MAX_NUMERIC_SCALE}; and unless the value is zero, its most
   * significant digit at most {@value #MAX_NUMERIC_INTEGER_DIGITS} places before the decimal point.
   */
  static void checkNumeric(String literal) {
    int length = literal.length();
    int i = literal.charAt(0) == '-' ? 1 : 0;
    int integerStart = i;
    while (i < length && isDigit(literal.charAt(i))) {
      i++;
    }
    int integerEnd = i;
    int fractionStart = i;
    int fractionEnd = i;
    if (i < length && literal.charAt(i) == '.') {
      fractionStart = ++i;
      while (i < length && isDigit(literal.charAt(i))) {
        i++;
      }
      fractionEnd = i;
    }
    long exponent = 0;
    if (i < length && (literal.charAt(i) == 'e' || literal.charAt(i) == 'E')) {
      exponent = exponent(literal, i + 1);
      if (Math.abs(exponent) >= MAX_NUMERIC_EXPONENT_EXCLUSIVE) {
        throw outOfRange(literal, "its exponent is beyond PostgreSQL's limit");
      }
    }
    long scale = Math.max(0, (fractionEnd - fractionStart) - exponent);
    if (scale > MAX_NUMERIC_SCALE) {
      throw outOfRange(literal, "it keeps " + scale + " digits after the decimal point; the maximum is "
          + MAX_NUMERIC_SCALE);
    }
    // The place of the most significant non-zero digit: 0 for units, 1 for tens, -1 for tenths.
    long place;
    int firstNonZero = firstNonZeroDigit(literal, integerStart, integerEnd);
    if (firstNonZero >= 0) {
      place = (integerEnd - 1 - firstNonZero) + exponent;
    } else {
      firstNonZero = firstNonZeroDigit(literal, fractionStart, fractionEnd);
      if (firstNonZero < 0) {
        return; // zero, whatever its exponent
      }
      place = -(firstNonZero - fractionStart + 1) + exponent;
    }
    if (place >= MAX_NUMERIC_INTEGER_DIGITS) {
      throw outOfRange(literal, "it has " + (place + 1) + " digits before the decimal point; the maximum is "
          + MAX_NUMERIC_INTEGER_DIGITS);
    }
  }

  /** The exponent's value, saturated at +-Long.MAX_VALUE (PostgreSQL's strtol saturates likewise). */
  private static long exponent(String literal, int start) {
    int i = start;
    boolean negative = false;
    if (literal.charAt(i) == '+' || literal.charAt(i) == '-') {
      negative = literal.charAt(i) == '-';
      i++;
    }
    long value = 0;
    for (; i < literal.length(); i++) {
      int digit = literal.charAt(i) - '0';
      if (value > (Long.MAX_VALUE - digit) / 10) {
        value = Long.MAX_VALUE;
        break;
      }
      value = value * 10 + digit;
    }
    return negative ? -value : value;
  }

  private static int firstNonZeroDigit(String literal, int from, int to) {
    for (int i = from; i < to; i++) {
      if (literal.charAt(i) != '0') {
        return i;
      }
    }
    return -1;
  }

  private static boolean isDigit(char c) {
    return c >= '0' && c <= '9';
  }

  private static IllegalArgumentException outOfRange(String literal, String why) {
    String shown = literal.length() > 40 ? literal.substring(0, 20) + "..." + " (" + literal.length() + " characters)"
        : literal;
    return new IllegalArgumentException(
        "payload has the number " + shown + " outside PostgreSQL's numeric range: " + why);
  }
}
