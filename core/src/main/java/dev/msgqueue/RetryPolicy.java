package dev.msgqueue;

import dev.msgqueue.internal.support.Arguments;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.DoubleSupplier;

/**
 * What {@link MsgQueueRepository#fail} does with a message whose handler failed (lease mode): retry it after an
 * exponential backoff with jitter, or, once it has been delivered {@code maxDeliveries} times, move it to the
 * dead-letter queue. Build with {@link #builder(String)}; every value is validated on construction.
 *
 * <p>The backoff after the n-th failed delivery (n = 1, 2, ...) is
 * {@code min(maxBackoff, initialBackoff * multiplier^(n-1))}, then shortened by a random fraction of at most
 * {@code jitter}, so that messages failing together do not come back together: drawn uniformly from
 * {@code [b * (1 - jitter), b]}, rounded to whole milliseconds (the timestamps' precision).
 *
 * @param initialBackoff the backoff after the first failed delivery: in [0, {@code maxBackoff}]
 * @param multiplier how much each further failure multiplies the backoff: in [1, 100]
 * @param maxBackoff the longest backoff: at most {@link MsgQueueConfig#MAX_MESSAGE_LIFETIME}
 * @param jitter the largest fraction by which a backoff is randomly shortened: in [0, 1]
 * @param maxDeliveries how many deliveries a message gets: the failure of the last one (or its lease running out)
 *     dead-letters it. In [1, {@value #MAX_DELIVERIES_CEILING}]; 1 dead-letters at the first failure.
 * @param deadLetterQueue the durable queue dead letters move to: a valid queue name. msgqueue creates it (durable,
 *     never reaped) with the first dead letter if it does not exist, and makes an existing auto-deleted queue of that
 *     name durable.
 * @param deadLetterTtl how long a dead letter is kept before {@link MsgQueueRepository#cleanUpExpiredMessages()}
 *     removes it: positive, at most {@link MsgQueueConfig#MAX_MESSAGE_LIFETIME}
 */
public record RetryPolicy(
    Duration initialBackoff,
    double multiplier,
    Duration maxBackoff,
    double jitter,
    int maxDeliveries,
    String deadLetterQueue,
    Duration deadLetterTtl) {

  /** The most deliveries a policy may allow. */
  public static final int MAX_DELIVERIES_CEILING = 1_000;
  /** The largest backoff multiplier. */
  public static final double MAX_MULTIPLIER = 100.0;

  public RetryPolicy {
    Arguments.requireNonNull(initialBackoff, "initialBackoff");
    Arguments.requireNonNull(maxBackoff, "maxBackoff");
    Arguments.requireNonNull(deadLetterTtl, "deadLetterTtl");
    if (maxBackoff.isNegative() || maxBackoff.compareTo(MsgQueueConfig.MAX_MESSAGE_LIFETIME) > 0) {
      throw new IllegalArgumentException(
          "maxBackoff must be in [0, " + MsgQueueConfig.MAX_MESSAGE_LIFETIME + "], was " + maxBackoff);
    }
    if (initialBackoff.isNegative() || initialBackoff.compareTo(maxBackoff) > 0) {
      throw new IllegalArgumentException(
          "initialBackoff must be in [0, maxBackoff (" + maxBackoff + ")], was " + initialBackoff);
    }
    if (!(multiplier >= 1.0 && multiplier <= MAX_MULTIPLIER)) {
      throw new IllegalArgumentException("multiplier must be in [1, " + MAX_MULTIPLIER + "], was " + multiplier);
    }
    if (!(jitter >= 0.0 && jitter <= 1.0)) {
      throw new IllegalArgumentException("jitter must be in [0, 1], was " + jitter);
    }
    Arguments.requireWithin(maxDeliveries, "maxDeliveries", 1, MAX_DELIVERIES_CEILING);
    requireValidDeadLetterQueue(deadLetterQueue);
    if (deadLetterTtl.isNegative() || deadLetterTtl.isZero()
        || deadLetterTtl.compareTo(MsgQueueConfig.MAX_MESSAGE_LIFETIME) > 0) {
      throw new IllegalArgumentException("deadLetterTtl must be positive and at most "
          + MsgQueueConfig.MAX_MESSAGE_LIFETIME + ", was " + deadLetterTtl);
    }
  }

  private static String requireValidDeadLetterQueue(String name) {
    try {
      return QueueSpec.requireValidName(name);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("deadLetterQueue: " + e.getMessage(), e);
    }
  }

  /**
   * A builder with the defaults: backoff 1 s doubling up to 5 min with 20% jitter, 5 deliveries, dead letters kept
   * 14 days in {@code deadLetterQueue}.
   */
  public static Builder builder(String deadLetterQueue) {
    return new Builder(deadLetterQueue);
  }

  /** The defaults of {@link #builder(String)}. */
  public static RetryPolicy defaults(String deadLetterQueue) {
    return builder(deadLetterQueue).build();
  }

  /**
   * The backoff after the {@code failedDeliveries}-th failed delivery, before jitter: {@code min(maxBackoff,
   * initialBackoff * multiplier^(failedDeliveries-1))}.
   */
  Duration backoffCeiling(int failedDeliveries) {
    if (failedDeliveries < 1) {
      throw new IllegalArgumentException("failedDeliveries must be at least 1, was " + failedDeliveries);
    }
    // In doubles: the power overflows long nanoseconds long before the cap applies; the cap keeps the result exact.
    double nanos = initialBackoff.toNanos() * Math.pow(multiplier, failedDeliveries - 1);
    return nanos >= maxBackoff.toNanos() ? maxBackoff : Duration.ofNanos((long) nanos);
  }

  /**
   * The backoff after the {@code failedDeliveries}-th failed delivery (1, 2, ...), jittered at random and rounded to
   * milliseconds: how long a failed message waits before it is delivered again.
   *
   * @throws IllegalArgumentException if {@code failedDeliveries} is below 1
   */
  public Duration backoff(int failedDeliveries) {
    return backoff(failedDeliveries, () -> ThreadLocalRandom.current().nextDouble());
  }

  /**
   * The backoff after the {@code failedDeliveries}-th failed delivery, jittered with {@code random} (uniform in
   * [0, 1)) and rounded to milliseconds.
   */
  Duration backoff(int failedDeliveries, DoubleSupplier random) {
    double ceilingMillis = backoffCeiling(failedDeliveries).toNanos() / 1e6;
    double drawn = ceilingMillis * (1.0 - jitter * random.getAsDouble());
    return Duration.ofMillis(Math.round(drawn));
  }

  /** Builds a {@link RetryPolicy}; unset values keep their defaults. */
  public static final class Builder {
    private final String deadLetterQueue;
    private Duration initialBackoff = Duration.ofSeconds(1);
    private double multiplier = 2.0;
    private Duration maxBackoff = Duration.ofMinutes(5);
    private double jitter = 0.2;
    private int maxDeliveries = 5;
    private Duration deadLetterTtl = Duration.ofDays(14);

    private Builder(String deadLetterQueue) {
      this.deadLetterQueue = requireValidDeadLetterQueue(deadLetterQueue);
    }

    public Builder initialBackoff(Duration value) {
      this.initialBackoff = Arguments.requireNonNull(value, "initialBackoff");
      return this;
    }

    public Builder multiplier(double value) {
      this.multiplier = value;
      return this;
    }

    public Builder maxBackoff(Duration value) {
      this.maxBackoff = Arguments.requireNonNull(value, "maxBackoff");
      return this;
    }

    public Builder jitter(double value) {
      this.jitter = value;
      return this;
    }

    public Builder maxDeliveries(int value) {
      this.maxDeliveries = value;
      return this;
    }

    public Builder deadLetterTtl(Duration value) {
      this.deadLetterTtl = Arguments.requireNonNull(value, "deadLetterTtl");
      return this;
    }

    /** @throws IllegalArgumentException naming the first invalid value */
    public RetryPolicy build() {
      return new RetryPolicy(initialBackoff, multiplier, maxBackoff, jitter, maxDeliveries, deadLetterQueue,
          deadLetterTtl);
    }
  }
}
