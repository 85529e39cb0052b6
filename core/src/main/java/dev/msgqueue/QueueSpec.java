package dev.msgqueue;

import dev.msgqueue.internal.support.Arguments;
import dev.msgqueue.internal.support.Utf16;
import java.nio.charset.StandardCharsets;
import java.util.UUID;

/**
 * A named queue and the attributes it is bound with. Publishing to an auto-deleted queue that the reaper removed
 * re-creates it with these attributes; publishing to a missing queue that is not auto-deleted fails with
 * {@link QueueNotFoundException}.
 *
 * <p>Names are validated on construction: at most {@value #MAX_NAME_BYTES} bytes in UTF-8, well-formed Unicode (no
 * unpaired surrogate), no control character (U+0000-U+001F, U+007F-U+009F) and no line or paragraph separator
 * (U+2028, U+2029), and neither starting nor ending with an <em>invisible</em> character: Unicode white space
 * ({@link Character#isWhitespace(int)} or {@link Character#isSpaceChar(int)}, which includes the no-break spaces
 * U+00A0, U+2007 and U+202F) or a format character (general category Cf, such as the zero-width space U+200B, the
 * word joiner U+2060, the byte order mark U+FEFF or the soft hyphen U+00AD). So a blank name, one made only of
 * invisible characters, is rejected too. Inside a name such characters are kept as given (an emoji sequence needs its
 * zero-width joiners). Quotes, semicolons and all other Unicode are fine: every value is a bind parameter.
 *
 * @param name the queue's name, its primary key
 * @param durable whether the queue is durable: the reaper never deletes a durable queue, whatever its row says
 * @param autoDeleted whether the reaper may delete the queue once it is idle and holds no unexpired message; not
 *     together with {@code durable}
 * @param exclusive whether the queue belongs to one consumer
 * @param exclusiveConsumerId the owning consumer of an exclusive queue; required exactly when {@code exclusive}
 */
public record QueueSpec(String name, boolean durable, boolean autoDeleted, boolean exclusive, UUID exclusiveConsumerId) {
  /** The longest queue name accepted, in UTF-8 bytes. */
  public static final int MAX_NAME_BYTES = 255;

  public QueueSpec {
    requireValidName(name);
    if (durable && autoDeleted) {
      throw new IllegalArgumentException(
          "queue \"" + name + "\" is durable and auto-deleted: a durable queue is never reaped, choose one");
    }
    if (exclusive && exclusiveConsumerId == null) {
      throw new IllegalArgumentException("queue \"" + name + "\" is exclusive but has no exclusiveConsumerId");
    }
    if (!exclusive && exclusiveConsumerId != null) {
      throw new IllegalArgumentException("queue \"" + name + "\" has an exclusiveConsumerId but is not exclusive");
    }
  }

  /** White space or a format character: nothing a reader can see, so not allowed at either end of a name. */
  static boolean isInvisible(int codePoint) {
    return Character.isWhitespace(codePoint) || Character.isSpaceChar(codePoint)
        || Character.getType(codePoint) == Character.FORMAT;
  }

  /** A durable queue that is never reaped. */
  public static QueueSpec durable(String name) {
    return new QueueSpec(name, true, false, false, null);
  }

  /** A non-durable queue that the reaper deletes once idle. */
  public static QueueSpec autoDeleted(String name) {
    return new QueueSpec(name, false, true, false, null);
  }

  /** An auto-deleted queue owned by one consumer. */
  public static QueueSpec exclusive(String name, UUID consumerId) {
    return new QueueSpec(name, false, true, true, Arguments.requireNonNull(consumerId, "consumerId"));
  }

  /**
   * Checks a queue name against the rules in this class's documentation.
   *
   * @throws IllegalArgumentException naming the rule the name breaks
   */
  public static String requireValidName(String name) {
    Arguments.requireNonNull(name, "queue name");
    for (int i = 0; i < name.length(); i++) {
      char c = name.charAt(i);
      if (Character.isISOControl(c) || c == '\u2028' || c == '\u2029') {
        throw new IllegalArgumentException("queue name has a control character or line break U+"
            + String.format("%04X", (int) c) + " at index " + i);
      }
    }
    if (name.codePoints().allMatch(QueueSpec::isInvisible)) {
      throw new IllegalArgumentException("queue name is blank (empty, or only white space or format characters)");
    }
    int first = name.codePointAt(0);
    int last = name.codePointBefore(name.length());
    if (isInvisible(first) || isInvisible(last)) {
      throw new IllegalArgumentException("queue name \"" + name + "\" starts or ends with white space or a format"
          + " character (U+" + String.format("%04X", isInvisible(first) ? first : last) + ")");
    }
    int unpaired = Utf16.unpairedSurrogateIndex(name);
    if (unpaired >= 0) {
      throw new IllegalArgumentException("queue name has an unpaired surrogate at index " + unpaired);
    }
    int bytes = name.getBytes(StandardCharsets.UTF_8).length;
    if (bytes > MAX_NAME_BYTES) {
      throw new IllegalArgumentException(
          "queue name is " + bytes + " bytes in UTF-8; the maximum is " + MAX_NAME_BYTES);
    }
    return name;
  }
}
