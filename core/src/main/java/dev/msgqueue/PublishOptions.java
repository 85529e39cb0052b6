package dev.msgqueue;

import dev.msgqueue.internal.support.Arguments;
import java.time.Duration;

/**
 * Per-message options of a publish.
 *
 * @param ttl how long the message lives ({@code "expiresAt"} = now + ttl); {@code null} takes
 *     {@link MsgQueueConfig#defaultMessageTtl()}. Positive, at most {@link MsgQueueConfig#MAX_MESSAGE_LIFETIME}.
 * @param delay how long before the message may be read ({@code "readAfter"} = now + delay). Zero or positive, at
 *     most {@link MsgQueueConfig#MAX_MESSAGE_LIFETIME}, and shorter than the TTL (a message readable only after it expired could never be delivered).
 */
public record PublishOptions(Duration ttl, Duration delay) {
  private static final PublishOptions DEFAULTS = new PublishOptions(null, Duration.ZERO);

  public PublishOptions {
    if (ttl != null) {
      Arguments.requirePositiveAtMost(ttl, "ttl", MsgQueueConfig.MAX_MESSAGE_LIFETIME);
    }
    Arguments.requireWithin(delay, "delay", Duration.ZERO, MsgQueueConfig.MAX_MESSAGE_LIFETIME);
    if (ttl != null && delay.compareTo(ttl) >= 0) {
      throw new IllegalArgumentException("delay (" + delay + ") must be shorter than ttl (" + ttl + ")");
    }
  }

  /** No delay, the configured default TTL. */
  public static PublishOptions defaults() {
    return DEFAULTS;
  }

  /** These options with TTL {@code newTtl} (not null: to take the default TTL, use {@link #defaults()}). */
  public PublishOptions withTtl(Duration newTtl) {
    return new PublishOptions(Arguments.requireNonNull(newTtl, "ttl"), delay);
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
