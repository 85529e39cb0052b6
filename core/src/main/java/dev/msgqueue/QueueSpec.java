package dev.msgqueue;

import java.nio.charset.StandardCharsets;
import java.util.UUID;

/**
 * A named queue and the attributes it is bound with. Publishing to an auto-deleted queue that the reaper removed
 * re-creates it with these attributes; publishing to a missing queue that is not auto-deleted fails with
 * {@link QueueNotFoundException}.
 *
 * <p>Names are validated on construction: not blank, at most {@value #MAX_NAME_BYTES} bytes in UTF-8, no control
 * characters, no leading or trailing white space, and well-formed Unicode.
 *
 * @param name the queue's name, its primary key
 * @param durable whether the queue is durable (stored as given; msgqueue does not act on it)
 * @param autoDeleted whether the reaper may delete the queue once it is idle and holds no unexpired message
 * @param exclusive whether the queue belongs to one consumer
 * @param exclusiveConsumerId the owning consumer of an exclusive queue; required exactly when {@code exclusive}
 */
public record QueueSpec(String name, boolean durable, boolean autoDeleted, boolean exclusive, UUID exclusiveConsumerId) {
  /** The longest queue name accepted, in UTF-8 bytes. */
  public static final int MAX_NAME_BYTES = 255;

  public QueueSpec {
    requireValidName(name);
    if (exclusive && exclusiveConsumerId == null) {
      throw new IllegalArgumentException("queue \"" + name + "\" is exclusive but has no exclusiveConsumerId");
    }
    if (!exclusive && exclusiveConsumerId != null) {
      throw new IllegalArgumentException("queue \"" + name + "\" has an exclusiveConsumerId but is not exclusive");
    }
  }

  /**
   * The index of the first UTF-16 surrogate without its partner, or -1: such text has no UTF-8 form, so PostgreSQL
   * rejects it.
   */
  static int unpairedSurrogateIndex(String text) {
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < text.length() && Character.isLowSurrogate(text.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        return i;
      }
    }
    return -1;
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
    if (name.isBlank()) {
      throw new IllegalArgumentException("queue name is blank");
    }
    if (!name.equals(name.strip())) {
      throw new IllegalArgumentException("queue name \"" + name + "\" has leading or trailing white space");
    }
    for (int i = 0; i < name.length(); i++) {
      char c = name.charAt(i);
      if (Character.isISOControl(c)) {
        throw new IllegalArgumentException(
            "queue name has a control character U+" + String.format("%04X", (int) c) + " at index " + i);
      }
    }
    int unpaired = unpairedSurrogateIndex(name);
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
