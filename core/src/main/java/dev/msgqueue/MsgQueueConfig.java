package dev.msgqueue;

import dev.msgqueue.internal.support.Arguments;
import java.time.Duration;

/**
 * Tuning of a {@link MsgQueueRepository}. Build with {@link #builder()}: each value is checked against its bounds
 * when set, and against the others by {@link Builder#build()}. Every duration has an upper bound (a constant of this
 * class), so that no setting can overflow the arithmetic or the SQL timestamps it feeds.
 *
 * @param keepAliveInterval how often publishing refreshes an auto-deleted queue's {@code "lastActive"}: at most one
 *     parent-row write per queue per interval, across threads and service replicas. At most a quarter of
 *     {@code reapIdleThreshold}, so a queue in use is refreshed several times before it could count as idle.
 *     Positive, at most {@link #MAX_KEEP_ALIVE_INTERVAL}.
 * @param reapIdleThreshold how long an auto-deleted queue must be idle ({@code "lastActive"} older than this) before
 *     the reaper may delete it (and then only if it holds no unexpired message). Positive, at most
 *     {@link #MAX_REAP_IDLE_THRESHOLD}.
 * @param reapBatchSize how many queues the reaper deletes per transaction
 * @param cleanupBatchSize how many expired messages {@link MsgQueueRepository#cleanUpExpiredMessages()} deletes per
 *     transaction
 * @param defaultMessageTtl a message's time to live when {@link PublishOptions} name none. Positive, at most
 *     {@link #MAX_MESSAGE_LIFETIME}.
 * @param maxPayloadBytes the largest payload accepted, in UTF-8 bytes of its JSON text
 * @param maxTrackedQueues how many queues' keep-alive deadlines one repository remembers; past this it forgets the
 *     least recently due ones (forgetting costs at most one extra no-op keep-alive statement)
 * @param statementTimeout the longest any statement msgqueue issues may run, lock waits included (at least 100 ms;
 *     checked every 50 ms), at most {@link #MAX_STATEMENT_TIMEOUT}; past it the statement is cancelled and
 *     {@link MsgQueueTimeoutException} thrown
 * @param lockTimeout the longest a statement may wait for a lock in the transactions msgqueue runs itself (reaper,
 *     cleanup), as PostgreSQL's {@code lock_timeout}; at most {@code statementTimeout}
 * @param wakeupNotifications whether a publish sends a (coalesced) PostgreSQL NOTIFY so idle subscribers claim at
 *     once; when off, subscribers find messages by polling only
 * @param wakeupWindow the coalescing window of those notifications: at most one per queue per window per repository
 *     (share one repository per service). Subscribers also re-claim once this long after a wake-up, to pick up the
 *     messages whose notification was coalesced away. Positive, at most {@link #MAX_WAKEUP_WINDOW}.
 * @param publishCoalescing whether concurrent single-message publishes in autocommit to the same queue (same spec,
 *     delay and TTL) from different threads of one repository are combined into one statement and one commit (group
 *     commit): a publish that finds none in flight goes out at once; those arriving meanwhile go out together next.
 *     Publishes in a caller's transaction are never combined.
 * @param maintenanceDutyCycle the largest share of its running time the reaper and the cleanup spend in their batches:
 *     after a batch that took {@code t}, a job pauses {@code t × (1 − d) / d} before its next, so that a long tick
 *     (a backlog of expired messages or idle queues) leaves the server's CPU and WAL flushes to publishers and
 *     consumers between batches. 1 runs the batches back to back; 0.5 (the default) pauses as long as each batch took,
 *     doubling a long tick's duration. In (0, 1].
 */
public record MsgQueueConfig(
    Duration keepAliveInterval,
    Duration reapIdleThreshold,
    int reapBatchSize,
    int cleanupBatchSize,
    Duration defaultMessageTtl,
    int maxPayloadBytes,
    int maxTrackedQueues,
    Duration statementTimeout,
    Duration lockTimeout,
    boolean wakeupNotifications,
    Duration wakeupWindow,
    boolean publishCoalescing,
    double maintenanceDutyCycle) {

  /** The largest payload this library accepts at all: PostgreSQL's jsonb limit is far above, but memory is not. */
  public static final int PAYLOAD_BYTES_CEILING = 64 * 1024 * 1024;
  /** The longest TTL, delay, release delay or lease a message may have. */
  public static final Duration MAX_MESSAGE_LIFETIME = Duration.ofDays(365);
  /** The longest {@link #reapIdleThreshold()}. */
  public static final Duration MAX_REAP_IDLE_THRESHOLD = Duration.ofDays(365);
  /** The longest {@link #keepAliveInterval()} (a quarter of the longest idle threshold). */
  public static final Duration MAX_KEEP_ALIVE_INTERVAL = MAX_REAP_IDLE_THRESHOLD.dividedBy(4);
  /** The shortest {@link #statementTimeout()}: the deadline watchdog checks every 50 ms. */
  public static final Duration MIN_STATEMENT_TIMEOUT = Duration.ofMillis(100);
  /** The longest {@link #statementTimeout()} and {@link #lockTimeout()}. */
  public static final Duration MAX_STATEMENT_TIMEOUT = Duration.ofHours(1);
  /** The longest {@link #wakeupWindow()}. */
  public static final Duration MAX_WAKEUP_WINDOW = Duration.ofHours(1);

  public MsgQueueConfig {
    Arguments.requirePositiveAtMost(keepAliveInterval, "keepAliveInterval", MAX_KEEP_ALIVE_INTERVAL);
    Arguments.requirePositiveAtMost(reapIdleThreshold, "reapIdleThreshold", MAX_REAP_IDLE_THRESHOLD);
    if (keepAliveInterval.compareTo(reapIdleThreshold.dividedBy(4)) > 0) {
      throw new IllegalArgumentException("keepAliveInterval (" + keepAliveInterval
          + ") must be at most a quarter of reapIdleThreshold (" + reapIdleThreshold + ")");
    }
    Arguments.requirePositiveAtMost(defaultMessageTtl, "defaultMessageTtl", MAX_MESSAGE_LIFETIME);
    Arguments.requireWithin(reapBatchSize, "reapBatchSize", 1, 10_000);
    Arguments.requireWithin(cleanupBatchSize, "cleanupBatchSize", 1, 100_000);
    Arguments.requireWithin(maxPayloadBytes, "maxPayloadBytes", 2, PAYLOAD_BYTES_CEILING);
    Arguments.requireWithin(maxTrackedQueues, "maxTrackedQueues", 16, 10_000_000);
    Arguments.requireWithin(statementTimeout, "statementTimeout", MIN_STATEMENT_TIMEOUT, MAX_STATEMENT_TIMEOUT);
    Arguments.requirePositiveAtMost(lockTimeout, "lockTimeout", MAX_STATEMENT_TIMEOUT);
    if (lockTimeout.compareTo(statementTimeout) > 0) {
      throw new IllegalArgumentException("lockTimeout (" + lockTimeout + ") must be at most statementTimeout ("
          + statementTimeout + ")");
    }
    Arguments.requirePositiveAtMost(wakeupWindow, "wakeupWindow", MAX_WAKEUP_WINDOW);
    Arguments.requirePositiveAtMost(maintenanceDutyCycle, "maintenanceDutyCycle", 1.0);
  }

  /**
   * The defaults: keep-alive 5 min, reap after 1 h idle in batches of 100, TTL 5 min, payloads up to 1 MiB,
   * statements bounded to 30 s and lock waits in msgqueue's own transactions to 5 s, wake-up notifications on with a
   * 50 ms coalescing window, maintenance batches at most half of a job's running time.
   */
  public static MsgQueueConfig defaults() {
    return builder().build();
  }

  public static Builder builder() {
    return new Builder();
  }

  /** Builds a {@link MsgQueueConfig}; unset values keep their defaults. */
  public static final class Builder {
    private Duration keepAliveInterval = Duration.ofMinutes(5);
    private Duration reapIdleThreshold = Duration.ofHours(1);
    private int reapBatchSize = 100;
    private int cleanupBatchSize = 1_000;
    private Duration defaultMessageTtl = Duration.ofMinutes(5);
    private int maxPayloadBytes = 1024 * 1024;
    private int maxTrackedQueues = 10_000;
    private Duration statementTimeout = Duration.ofSeconds(30);
    private Duration lockTimeout = Duration.ofSeconds(5);
    private boolean wakeupNotifications = true;
    private Duration wakeupWindow = Duration.ofMillis(50);
    private boolean publishCoalescing = true;
    private double maintenanceDutyCycle = 0.5;

    private Builder() { }

    /** @throws IllegalArgumentException unless positive and at most {@link MsgQueueConfig#MAX_KEEP_ALIVE_INTERVAL} */
    public Builder keepAliveInterval(Duration value) {
      this.keepAliveInterval = Arguments.requirePositiveAtMost(value, "keepAliveInterval", MAX_KEEP_ALIVE_INTERVAL);
      return this;
    }

    /** @throws IllegalArgumentException unless positive and at most {@link MsgQueueConfig#MAX_REAP_IDLE_THRESHOLD} */
    public Builder reapIdleThreshold(Duration value) {
      this.reapIdleThreshold = Arguments.requirePositiveAtMost(value, "reapIdleThreshold", MAX_REAP_IDLE_THRESHOLD);
      return this;
    }

    public Builder reapBatchSize(int value) {
      this.reapBatchSize = value;
      return this;
    }

    public Builder cleanupBatchSize(int value) {
      this.cleanupBatchSize = value;
      return this;
    }

    /** @throws IllegalArgumentException unless positive and at most {@link MsgQueueConfig#MAX_MESSAGE_LIFETIME} */
    public Builder defaultMessageTtl(Duration value) {
      this.defaultMessageTtl = Arguments.requirePositiveAtMost(value, "defaultMessageTtl", MAX_MESSAGE_LIFETIME);
      return this;
    }

    public Builder maxPayloadBytes(int value) {
      this.maxPayloadBytes = value;
      return this;
    }

    public Builder maxTrackedQueues(int value) {
      this.maxTrackedQueues = value;
      return this;
    }

    /** @throws IllegalArgumentException unless in [{@link MsgQueueConfig#MIN_STATEMENT_TIMEOUT}, {@link MsgQueueConfig#MAX_STATEMENT_TIMEOUT}] */
    public Builder statementTimeout(Duration value) {
      this.statementTimeout =
          Arguments.requireWithin(value, "statementTimeout", MIN_STATEMENT_TIMEOUT, MAX_STATEMENT_TIMEOUT);
      return this;
    }

    /** @throws IllegalArgumentException unless positive and at most {@link MsgQueueConfig#MAX_STATEMENT_TIMEOUT} */
    public Builder lockTimeout(Duration value) {
      this.lockTimeout = Arguments.requirePositiveAtMost(value, "lockTimeout", MAX_STATEMENT_TIMEOUT);
      return this;
    }

    public Builder wakeupNotifications(boolean value) {
      this.wakeupNotifications = value;
      return this;
    }

    /** @throws IllegalArgumentException unless positive and at most {@link MsgQueueConfig#MAX_WAKEUP_WINDOW} */
    public Builder wakeupWindow(Duration value) {
      this.wakeupWindow = Arguments.requirePositiveAtMost(value, "wakeupWindow", MAX_WAKEUP_WINDOW);
      return this;
    }

    public Builder publishCoalescing(boolean value) {
      this.publishCoalescing = value;
      return this;
    }

    /** @throws IllegalArgumentException unless in (0, 1] */
    public Builder maintenanceDutyCycle(double value) {
      this.maintenanceDutyCycle = Arguments.requirePositiveAtMost(value, "maintenanceDutyCycle", 1.0);
      return this;
    }

    /**
     * Checks the values against each other (each one was checked when set).
     *
     * @throws IllegalArgumentException naming the first invalid value
     */
    public MsgQueueConfig build() {
      return new MsgQueueConfig(keepAliveInterval, reapIdleThreshold, reapBatchSize, cleanupBatchSize,
          defaultMessageTtl, maxPayloadBytes, maxTrackedQueues, statementTimeout, lockTimeout, wakeupNotifications,
          wakeupWindow, publishCoalescing, maintenanceDutyCycle);
    }
  }
}
