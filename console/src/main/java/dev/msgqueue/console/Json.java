package dev.msgqueue.console;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.SerializableString;
import com.fasterxml.jackson.core.io.CharacterEscapes;
import com.fasterxml.jackson.core.io.SerializedString;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The API's JSON, with jackson-core's streaming API. Strings escape {@code < > & '} and the two JavaScript line
 * separators as well as what JSON requires, so that no payload or queue name can close a tag or a script even if a
 * response were ever read as HTML.
 */
final class Json {
  private static final JsonFactory FACTORY = JsonFactory.builder().build();
  private static final CharacterEscapes HTML_SAFE = new HtmlSafeEscapes();

  private Json() { }

  /** A JSON document being written; {@link #bytes()} ends it. */
  static final class Writer implements AutoCloseable {
    private final ByteArrayOutputStream out = new ByteArrayOutputStream(4096);
    private final JsonGenerator generator;

    Writer() {
      try {
        generator = FACTORY.createGenerator(out);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      generator.setCharacterEscapes(HTML_SAFE);
    }

    Writer startObject() {
      return run(generator::writeStartObject);
    }

    Writer startObject(String field) {
      return run(() -> generator.writeObjectFieldStart(field));
    }

    Writer endObject() {
      return run(generator::writeEndObject);
    }

    Writer startArray(String field) {
      return run(() -> generator.writeArrayFieldStart(field));
    }

    Writer startArray() {
      return run(generator::writeStartArray);
    }

    Writer endArray() {
      return run(generator::writeEndArray);
    }

    Writer field(String name, String value) {
      return run(() -> {
        if (value == null) {
          generator.writeNullField(name);
        } else {
          generator.writeStringField(name, value);
        }
      });
    }

    Writer field(String name, long value) {
      return run(() -> generator.writeNumberField(name, value));
    }

    Writer field(String name, Long value) {
      return value == null ? nullField(name) : field(name, value.longValue());
    }

    Writer field(String name, double value) {
      return run(() -> generator.writeNumberField(name, value));
    }

    Writer field(String name, boolean value) {
      return run(() -> generator.writeBooleanField(name, value));
    }

    /** An instant as ISO-8601 UTC text, or null. */
    Writer field(String name, Instant value) {
      return field(name, value == null ? null : value.toString());
    }

    /** A timestamp of the schema (UTC wall-clock time) as ISO-8601 UTC text, or null. */
    Writer field(String name, LocalDateTime utc) {
      return field(name, utc == null ? null : utc.toInstant(ZoneOffset.UTC));
    }

    /** A duration as (fractional) seconds, or null. */
    Writer seconds(String name, Duration value) {
      return value == null ? nullField(name) : field(name, value.toMillis() / 1000.0);
    }

    Writer nullField(String name) {
      return run(() -> generator.writeNullField(name));
    }

    Writer value(String value) {
      return run(() -> generator.writeString(value));
    }

    Writer value(long value) {
      return run(() -> generator.writeNumber(value));
    }

    byte[] bytes() {
      try {
        generator.close();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      return out.toByteArray();
    }

    @Override
    public void close() {
      bytes();
    }

    private Writer run(IoAction action) {
      try {
        action.run();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      return this;
    }
  }

  private interface IoAction {
    void run() throws IOException;
  }

  /**
   * Reads a request body: one JSON object whose values are strings, numbers, booleans or arrays of numbers (all the
   * actions take).
   *
   * @throws BadRequest for anything else
   */
  static Map<String, Object> readObject(byte[] body) {
    Map<String, Object> fields = new LinkedHashMap<>();
    try (JsonParser parser = FACTORY.createParser(body)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        throw ApiError.badRequest("the body must be a JSON object");
      }
      while (parser.nextToken() == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        JsonToken token = parser.nextToken();
        switch (token) {
          case VALUE_STRING -> fields.put(name, parser.getText());
          case VALUE_NUMBER_INT -> fields.put(name, parser.getLongValue());
          case VALUE_TRUE, VALUE_FALSE -> fields.put(name, token == JsonToken.VALUE_TRUE);
          case VALUE_NULL -> fields.put(name, null);
          case START_ARRAY -> {
            List<Long> numbers = new ArrayList<>();
            while (parser.nextToken() == JsonToken.VALUE_NUMBER_INT) {
              numbers.add(parser.getLongValue());
            }
            if (parser.currentToken() != JsonToken.END_ARRAY) {
              throw ApiError.badRequest("\"" + name + "\" must be an array of integers");
            }
            fields.put(name, numbers);
          }
          default -> throw ApiError.badRequest("unexpected value for \"" + name + "\"");
        }
      }
      if (parser.currentToken() != JsonToken.END_OBJECT || parser.nextToken() != null) {
        throw ApiError.badRequest("the body must be one JSON object");
      }
    } catch (IOException e) {
      throw ApiError.badRequest("the body is not valid JSON");
    }
    return fields;
  }

  /** Escapes what JSON requires plus the characters that mean something in HTML and in JavaScript source. */
  private static final class HtmlSafeEscapes extends CharacterEscapes {
    private static final long serialVersionUID = 1L;
    private static final SerializableString LINE_SEPARATOR = new SerializedString("\\u2028");
    private static final SerializableString PARAGRAPH_SEPARATOR = new SerializedString("\\u2029");
    private final int[] escapes;

    HtmlSafeEscapes() {
      escapes = standardAsciiEscapesForJSON();
      escapes['<'] = ESCAPE_STANDARD;
      escapes['>'] = ESCAPE_STANDARD;
      escapes['&'] = ESCAPE_STANDARD;
      escapes['\''] = ESCAPE_STANDARD;
    }

    @Override
    public int[] getEscapeCodesForAscii() {
      return escapes;
    }

    @Override
    public SerializableString getEscapeSequence(int ch) {
      // U+2028 and U+2029 end a line in JavaScript source before ES2019.
      if (ch == 0x2028) {
        return LINE_SEPARATOR;
      }
      return ch == 0x2029 ? PARAGRAPH_SEPARATOR : null;
    }
  }
}
