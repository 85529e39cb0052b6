package dev.msgqueue.spring;

import dev.msgqueue.ConsumeMode;
import dev.msgqueue.MicrometerMetrics;
import dev.msgqueue.MsgQueueConfig;
import java.time.Duration;
import java.util.function.Consumer;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * The {@code msgqueue.*} settings. Every repository setting left unset keeps the library default of
 * {@link MsgQueueConfig#defaults()}; every value is checked at startup by {@link MsgQueueConfig.Builder#build()}, so a
 * bad value fails the application's start with the setting's name and its allowed range.
 */
@ConfigurationProperties(prefix = "msgqueue")
public class MsgQueueProperties {
  /** How often a publishing or consuming service refreshes a queue's "lastActive" at most. */
  private Duration keepAliveInterval;
  /** How long an auto-deleted queue must be idle before the housekeeper reaps it. */
  private Duration reapIdleThreshold;
  /** The time to live of a message published without one. */
  private Duration defaultMessageTtl;
  /** The longest any single msgqueue statement may run before it is cancelled. */
  private Duration statementTimeout;
  /** The longest the housekeeping transactions wait for a row lock. */
  private Duration lockTimeout;
  /** Whether a publish notifies idle subscribers (NOTIFY), coalesced per queue per wake-up window. */
  private Boolean wakeupNotifications;
  /** The coalescing window of wake-up notifications per queue. */
  private Duration wakeupWindow;

  private final Listener listener = new Listener();
  private final Housekeeper housekeeper = new Housekeeper();
  private final Subscriber subscriber = new Subscriber();
  private final Metrics metrics = new Metrics();
  private final Console console = new Console();

  /** The repository configuration these properties describe. */
  public MsgQueueConfig toConfig() {
    try {
      MsgQueueConfig.Builder builder = MsgQueueConfig.builder();
      apply(keepAliveInterval, builder::keepAliveInterval);
      apply(reapIdleThreshold, builder::reapIdleThreshold);
      apply(defaultMessageTtl, builder::defaultMessageTtl);
      apply(statementTimeout, builder::statementTimeout);
      apply(lockTimeout, builder::lockTimeout);
      apply(wakeupNotifications, builder::wakeupNotifications);
      apply(wakeupWindow, builder::wakeupWindow);
      return builder.build();
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("invalid msgqueue.* configuration: " + e.getMessage(), e);
    }
  }

  private static <T> void apply(T value, Consumer<T> setter) {
    if (value != null) {
      setter.accept(value);
    }
  }

  public Duration getKeepAliveInterval() {
    return keepAliveInterval;
  }

  public void setKeepAliveInterval(Duration keepAliveInterval) {
    this.keepAliveInterval = keepAliveInterval;
  }

  public Duration getReapIdleThreshold() {
    return reapIdleThreshold;
  }

  public void setReapIdleThreshold(Duration reapIdleThreshold) {
    this.reapIdleThreshold = reapIdleThreshold;
  }

  public Duration getDefaultMessageTtl() {
    return defaultMessageTtl;
  }

  public void setDefaultMessageTtl(Duration defaultMessageTtl) {
    this.defaultMessageTtl = defaultMessageTtl;
  }

  public Duration getStatementTimeout() {
    return statementTimeout;
  }

  public void setStatementTimeout(Duration statementTimeout) {
    this.statementTimeout = statementTimeout;
  }

  public Duration getLockTimeout() {
    return lockTimeout;
  }

  public void setLockTimeout(Duration lockTimeout) {
    this.lockTimeout = lockTimeout;
  }

  public Boolean getWakeupNotifications() {
    return wakeupNotifications;
  }

  public void setWakeupNotifications(Boolean wakeupNotifications) {
    this.wakeupNotifications = wakeupNotifications;
  }

  public Duration getWakeupWindow() {
    return wakeupWindow;
  }

  public void setWakeupWindow(Duration wakeupWindow) {
    this.wakeupWindow = wakeupWindow;
  }

  public Listener getListener() {
    return listener;
  }

  public Housekeeper getHousekeeper() {
    return housekeeper;
  }

  public Subscriber getSubscriber() {
    return subscriber;
  }

  public Metrics getMetrics() {
    return metrics;
  }

  public Console getConsole() {
    return console;
  }

  /**
   * The operations console (the msgqueue-console module on the classpath, in a servlet web application): a page and
   * its JSON API under {@code path}, behind the service's Spring Security when it has it.
   */
  public static class Console {
    /** Whether to serve the console; off unless set, and only with msgqueue-console on the classpath. */
    private boolean enabled;
    /** Where the console is served, below the servlet context path: a path of its own, not ending in a slash. */
    private String path = "/msgqueue";
    /**
     * Whether the console may republish and purge dead letters (POST, CSRF-protected, each logged with the principal);
     * off unless set, so the console reads only.
     */
    private boolean actionsEnabled;
    /**
     * How old the queue counts may get before the console reads them again itself, when the housekeeper of this
     * service has not read them more recently (it does at each tick while the queue gauges are on).
     */
    private Duration statisticsMaxAge = Duration.ofMinutes(1);

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public String getPath() {
      return path;
    }

    public void setPath(String path) {
      this.path = path;
    }

    public boolean isActionsEnabled() {
      return actionsEnabled;
    }

    public void setActionsEnabled(boolean actionsEnabled) {
      this.actionsEnabled = actionsEnabled;
    }

    public Duration getStatisticsMaxAge() {
      return statisticsMaxAge;
    }

    public void setStatisticsMaxAge(Duration statisticsMaxAge) {
      this.statisticsMaxAge = statisticsMaxAge;
    }
  }

  /** msgqueue's Micrometer meters. */
  public static class Metrics {
    /**
     * How many queues get a {@code queue} tag of their own; the others are counted under {@code queue=_other}, so many
     * auto-deleted queues cannot flood the registry.
     */
    private int maxQueueTags = MicrometerMetrics.DEFAULT_MAX_QUEUE_TAGS;
    /**
     * Whether this replica has the queue gauges (msgqueue.queue.messages, msgqueue.queue.oldest.ready.age): its
     * housekeeper then reads the statistics of every queue each tick, a few milliseconds of database time (measured:
     * docs/scaling.md). A fleet of many replicas turns them off on all but a few; counters and timers stay everywhere.
     */
    private boolean queueGauges = true;

    public int getMaxQueueTags() {
      return maxQueueTags;
    }

    public void setMaxQueueTags(int maxQueueTags) {
      this.maxQueueTags = maxQueueTags;
    }

    public boolean isQueueGauges() {
      return queueGauges;
    }

    public void setQueueGauges(boolean queueGauges) {
      this.queueGauges = queueGauges;
    }
  }

  /**
   * msgqueue's own connections, outside the pool: the LISTEN connection that wakes subscribers at once after a
   * publish, and the health check's.
   */
  public static class Listener {
    /** Whether to hold a LISTEN connection; without it subscribers find messages by polling. */
    private boolean enabled = true;
    /**
     * The JDBC URL of the LISTEN connection and the health check; defaults to spring.datasource.url. Point it at the
     * database directly when the application's pool goes through PgBouncer in transaction mode, which cannot hold a
     * LISTEN.
     */
    private String url;
    /** The user of the LISTEN connection and the health check; defaults to spring.datasource.username. */
    private String username;
    /** The password of the LISTEN connection and the health check; defaults to spring.datasource.password. */
    private String password;

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public String getUrl() {
      return url;
    }

    public void setUrl(String url) {
      this.url = url;
    }

    public String getUsername() {
      return username;
    }

    public void setUsername(String username) {
      this.username = username;
    }

    public String getPassword() {
      return password;
    }

    public void setPassword(String password) {
      this.password = password;
    }
  }

  /** The housekeeper: reaps idle auto-deleted queues and deletes expired messages on an interval. */
  public static class Housekeeper {
    /** Whether this application runs the housekeeper (one replica works per tick; the others skip it). */
    private boolean enabled = true;
    /** How often the housekeeper runs. */
    private Duration interval = Duration.ofMinutes(1);

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public Duration getInterval() {
      return interval;
    }

    public void setInterval(Duration interval) {
      this.interval = interval;
    }
  }

  /** Defaults for the subscribers of {@link MsgQueueListener} methods; each annotation may override them. */
  public static class Subscriber {
    /** How many handlers of one listener run at once. */
    private Integer concurrency;
    /** The most messages one claim takes. */
    private Integer batchSize;
    /** How long an idle subscriber waits between claims when no wake-up comes. */
    private Duration pollInterval;
    /**
     * How listeners deliver: {@code transaction} (the default: at least once, a handler's writes through the
     * application's {@code DataSource} commit with the message's removal), {@code lease} or {@code at-most-once}.
     */
    private ConsumeMode mode;
    /** The lease of {@code lease} mode; unset means 30 s. Only with {@code mode: lease}. */
    private Duration lease;
    /** {@code transaction} mode: the longest a held transaction may stay idle (and on PostgreSQL 17 last). */
    private Duration transactionTimeout;
    /** The longest shutdown waits for a listener's in-flight handlers. */
    private Duration closeTimeout;

    public Integer getConcurrency() {
      return concurrency;
    }

    public void setConcurrency(Integer concurrency) {
      this.concurrency = concurrency;
    }

    public Integer getBatchSize() {
      return batchSize;
    }

    public void setBatchSize(Integer batchSize) {
      this.batchSize = batchSize;
    }

    public Duration getPollInterval() {
      return pollInterval;
    }

    public void setPollInterval(Duration pollInterval) {
      this.pollInterval = pollInterval;
    }

    public ConsumeMode getMode() {
      return mode;
    }

    public void setMode(ConsumeMode mode) {
      this.mode = mode;
    }

    public Duration getTransactionTimeout() {
      return transactionTimeout;
    }

    public void setTransactionTimeout(Duration transactionTimeout) {
      this.transactionTimeout = transactionTimeout;
    }

    public Duration getLease() {
      return lease;
    }

    public void setLease(Duration lease) {
      this.lease = lease;
    }

    public Duration getCloseTimeout() {
      return closeTimeout;
    }

    public void setCloseTimeout(Duration closeTimeout) {
      this.closeTimeout = closeTimeout;
    }
  }
}
