package dev.msgqueue;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import org.jooq.JSONB;

/**
 * Checks a payload against everything PostgreSQL's {@code jsonb} input would reject, so a bad payload fails with an
 * {@link IllegalArgumentException} before any SQL runs (and so never aborts a caller's transaction).
 */
final class Payloads {
  /** Nesting deeper than this is rejected; PostgreSQL's recursive jsonb code runs out of stack long before JSON does. */
  static final int MAX_NESTING_DEPTH = 1_000;
  // PostgreSQL numeric: at most 131072 digits before the decimal point and 16383 after.
  private static final int MAX_NUMERIC_INTEGER_DIGITS = 131_072;
  private static final int MAX_NUMERIC_SCALE = 16_383;

  private final int maxPayloadBytes;
  private final JsonFactory factory;

  Payloads(int maxPayloadBytes) {
    this.maxPayloadBytes = maxPayloadBytes;
    this.factory = JsonFactory.builder()
        .streamReadConstraints(StreamReadConstraints.builder()
            .maxNestingDepth(MAX_NESTING_DEPTH)
            .maxStringLength(maxPayloadBytes)
            .maxNumberLength(maxPayloadBytes)
            .build())
        .build();
  }

  JSONB validate(JSONB payload) {
    if (payload == null) {
      throw new IllegalArgumentException("payload is null");
    }
    return validate(payload.data());
  }

  JSONB validate(String json) {
    if (json == null) {
      throw new IllegalArgumentException("payload is null");
    }
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
    return JSONB.valueOf(json);
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
        case VALUE_NUMBER_FLOAT -> checkNumeric(parser.getDecimalValue());
        default -> { }
      }
    } while (depth > 0 && parser.nextToken() != null);
  }

  private static void checkText(String text, String where) {
    if (text.indexOf('\u0000') >= 0) {
      throw new IllegalArgumentException("payload has \\u0000 in " + where + "; PostgreSQL's jsonb cannot store it");
    }
    if (QueueSpec.unpairedSurrogateIndex(text) >= 0) {
      throw new IllegalArgumentException("payload has an unpaired surrogate in " + where);
    }
  }

  private static void checkNumeric(BigDecimal value) {
    int integerDigits = value.precision() - value.scale();
    if (integerDigits > MAX_NUMERIC_INTEGER_DIGITS || value.scale() > MAX_NUMERIC_SCALE) {
      throw new IllegalArgumentException("payload has a number outside PostgreSQL's numeric range");
    }
  }
}
