package dev.msgqueue;

import java.time.Duration;
import java.util.Objects;

/**
 * Per-message options of a publish.
 *
 * @param ttl how long the message lives ({@code "expiresAt"} = now + ttl); {@code null} takes
 *     {@link MsgQueueConfig#defaultMessageTtl()}. Positive, at most {@link MsgQueueConfig#MAX_MESSAGE_LIFETIME}.
 * @param delay how long before the message may be read ({@code "readAfter"} = now + delay). Zero or positive, and
 *     shorter than the TTL (a message readable only after it expired could never be delivered).
 */
public record PublishOptions(Duration ttl, Duration delay) {
  private static final PublishOptions DEFAULTS = new PublishOptions(null, Duration.ZERO);

  public PublishOptions {
    Objects.requireNonNull(delay, "delay");
    if (ttl != null && (ttl.isNegative() || ttl.isZero() || ttl.compareTo(MsgQueueConfig.MAX_MESSAGE_LIFETIME) > 0)) {
      throw new IllegalArgumentException(
          "ttl must be positive and at most " + MsgQueueConfig.MAX_MESSAGE_LIFETIME + ", was " + ttl);
    }
    if (delay.isNegative() || delay.compareTo(MsgQueueConfig.MAX_MESSAGE_LIFETIME) > 0) {
      throw new IllegalArgumentException(
          "delay must be zero or positive and at most " + MsgQueueConfig.MAX_MESSAGE_LIFETIME + ", was " + delay);
    }
    if (ttl != null && delay.compareTo(ttl) >= 0) {
      throw new IllegalArgumentException("delay (" + delay + ") must be shorter than ttl (" + ttl + ")");
    }
  }

  /** No delay, the configured default TTL. */
  public static PublishOptions defaults() {
    return DEFAULTS;
  }

  public PublishOptions withTtl(Duration newTtl) {
    return new PublishOptions(Objects.requireNonNull(newTtl, "ttl"), delay);
  }

  public PublishOptions withDelay(Duration newDelay) {
    return new PublishOptions(ttl, newDelay);
  }

  /** The TTL to store, given the configured default; checks the delay against it. */
  Duration effectiveTtl(MsgQueueConfig config) {
    Duration effective = ttl != null ? ttl : config.defaultMessageTtl();
    if (delay.compareTo(effective) >= 0) {
      throw new IllegalArgumentException(
          "delay (" + delay + ") must be shorter than the default ttl (" + effective + ")");
    }
    return effective;
  }
}
