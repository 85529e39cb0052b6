package dev.msgqueue;

import dev.msgqueue.internal.support.Arguments;
import dev.msgqueue.internal.support.MsgQueueEvents;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.MultiGauge;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Micrometer meters for a {@link MsgQueueRepository}, its views, its {@link Subscriber}s and its
 * {@link Housekeeper}s. Micrometer is an optional dependency of msgqueue: this is the only class that uses it, and it
 * is loaded only when a service calls {@link #bind}.
 *
 * <p>Meters (base units: seconds, messages), tagged {@code queue} unless noted:
 * <ul>
 *   <li>counters {@code msgqueue.messages.published}, {@code .claimed}, {@code .acked}, {@code .released},
 *       {@code .redelivered}, {@code .dead.lettered}; {@code msgqueue.queues.healed} (a reaped auto-deleted queue
 *       re-created by a publish); {@code msgqueue.handler.failures}; {@code msgqueue.messages.unresolved} (messages
 *       of an at-most-once take whose commit went unanswered and whose outcome could not be learned: lost if it
 *       committed; alert on any). {@code msgqueue.messages.published} counts a
 *       publish when it commits: at once in autocommit, after the caller's transaction commits where the binding's
 *       {@link CommitHook} sees that transaction (the Spring Boot starter's: Spring-managed transactions), never for
 *       one that rolls back. A publish inside a transaction the hook cannot see (your own jOOQ or JDBC transaction,
 *       bound without a hook) counts when its statement succeeds, rolled back or not;
 *       {@code msgqueue.queues.reaped} and {@code msgqueue.messages.expired.deleted} (untagged);
 *   <li>timers {@code msgqueue.publish} (every publish call, committed or not), {@code msgqueue.claim} (empty claims
 *       included), {@code msgqueue.ack}, {@code msgqueue.handler};
 *   <li>gauges {@code msgqueue.queue.messages} (tag {@code state}: {@code ready}, {@code delayed},
 *       {@code in.flight}, {@code expired}) and {@code msgqueue.queue.oldest.ready.age} (seconds), refreshed by each
 *       {@link Housekeeper} tick, never by a scrape: exact ({@link MsgQueueRepository#queueStatistics()}) while the
 *       message table holds at most 50,000 messages, estimates from a block sample above (counts scaled from about
 *       20,000 sampled messages; the age that of the oldest ready message sampled, so a lower bound). Not
 *       registered, and not read, where bound without them
 *       ({@link #bind(MeterRegistry, MsgQueueRepository, int, boolean)}).
 * </ul>
 *
 * <p><b>Bounded tags.</b> The first {@code maxQueueTags} queue names seen get their own {@code queue} tag; every
 * other queue is counted under {@value #OTHER_QUEUES} (its gauges: the sum of the counts, the largest age), so
 * thousands of auto-deleted tenant queues cannot flood the registry.
 */
public final class MicrometerMetrics implements AutoCloseable {
  /** How many queues get their own tag when {@link #bind(MeterRegistry, MsgQueueRepository)} names no bound. */
  public static final int DEFAULT_MAX_QUEUE_TAGS = 100;
  /** The most queues that may get their own tag. */
  public static final int MAX_QUEUE_TAGS = 10_000;
  /** The {@code queue} tag value of every queue past the bound. */
  public static final String OTHER_QUEUES = "_other";

  private final MeterRegistry registry;
  private final MsgQueueRepository repository;
  private final int maxQueueTags;
  private final boolean queueGauges;
  private final CommitHook commitHook;
  private final Map<String, String> queueTags = new ConcurrentHashMap<>();
  private final Map<String, QueueMeters> meters = new ConcurrentHashMap<>();
  private final Counter reaped;
  private final Counter expiredDeleted;
  private final MultiGauge messagesByState;
  private final MultiGauge oldestReadyAge;

  private MicrometerMetrics(MeterRegistry registry, MsgQueueRepository repository, int maxQueueTags,
      boolean queueGauges, CommitHook commitHook) {
    this.registry = registry;
    this.repository = repository;
    this.maxQueueTags = maxQueueTags;
    this.queueGauges = queueGauges;
    this.commitHook = commitHook;
    this.reaped = Counter.builder("msgqueue.queues.reaped").baseUnit("queues")
        .description("idle auto-deleted queues the reaper deleted").register(registry);
    this.expiredDeleted = Counter.builder("msgqueue.messages.expired.deleted").baseUnit("messages")
        .description("expired messages the cleanup deleted").register(registry);
    this.messagesByState = MultiGauge.builder("msgqueue.queue.messages").baseUnit("messages")
        .description("messages per queue and state, as of the last housekeeping tick").register(registry);
    this.oldestReadyAge = MultiGauge.builder("msgqueue.queue.oldest.ready.age").baseUnit("seconds")
        .description("how long the longest-waiting ready message has been readable, as of the last housekeeping tick")
        .register(registry);
  }

  /** Binds with {@link #DEFAULT_MAX_QUEUE_TAGS}; see {@link #bind(MeterRegistry, MsgQueueRepository, int)}. */
  public static MicrometerMetrics bind(MeterRegistry registry, MsgQueueRepository repository) {
    return bind(registry, repository, DEFAULT_MAX_QUEUE_TAGS);
  }

  /**
   * Registers msgqueue's meters in {@code registry} and starts recording what {@code repository} (and every view,
   * subscriber and housekeeper of it) does. Binding again replaces the previous binding.
   *
   * @param maxQueueTags how many queues get their own {@code queue} tag, in [1, {@value #MAX_QUEUE_TAGS}]
   * @throws IllegalArgumentException for a null argument or a bound out of range
   */
  public static MicrometerMetrics bind(MeterRegistry registry, MsgQueueRepository repository, int maxQueueTags) {
    return bind(registry, repository, maxQueueTags, true);
  }

  /**
   * {@link #bind(MeterRegistry, MsgQueueRepository, int)}, with or without the queue gauges
   * ({@code msgqueue.queue.messages}, {@code msgqueue.queue.oldest.ready.age}). With them, each {@link Housekeeper}
   * tick of this repository reads the statistics of every queue (measured: docs/scaling.md): every replica that binds
   * them pays that each tick, so a fleet of many replicas binds them on a few and the counters and timers everywhere.
   *
   * @param queueGauges whether to register the queue gauges and read the statistics they show each tick
   * @throws IllegalArgumentException for a null argument or a bound out of range
   */
  public static MicrometerMetrics bind(
      MeterRegistry registry, MsgQueueRepository repository, int maxQueueTags, boolean queueGauges) {
    return bind(registry, repository, maxQueueTags, queueGauges, CommitHook.IMMEDIATE);
  }

  /**
   * {@link #bind(MeterRegistry, MsgQueueRepository, int, boolean)}, counting {@code msgqueue.messages.published}
   * through {@code commitHook}: a publish inside a transaction the hook sees counts once that transaction commits.
   *
   * @throws IllegalArgumentException for a null argument or a bound out of range
   */
  public static MicrometerMetrics bind(MeterRegistry registry, MsgQueueRepository repository, int maxQueueTags,
      boolean queueGauges, CommitHook commitHook) {
    Arguments.requireNonNull(registry, "registry");
    Arguments.requireNonNull(repository, "repository");
    Arguments.requireWithin(maxQueueTags, "maxQueueTags", 1, MAX_QUEUE_TAGS);
    Arguments.requireNonNull(commitHook, "commitHook");
    MicrometerMetrics metrics = new MicrometerMetrics(registry, repository, maxQueueTags, queueGauges, commitHook);
    repository.context().events().reportTo(metrics.new Sink());
    return metrics;
  }

  /** Stops recording (the repository reports to no one again); the meters stay in the registry. */
  @Override
  public void close() {
    repository.context().events().reportTo(MsgQueueEvents.NONE);
  }

  /** The {@code queue} tag value for {@code queue}: its name while fewer than the bound have one, else the rest's. */
  String queueTag(String queue) {
    String tag = queueTags.get(queue);
    if (tag != null) {
      return tag;
    }
    if (queueTags.size() >= maxQueueTags) {
      return OTHER_QUEUES;
    }
    // Racing threads may overshoot the bound by a few entries; it stays bounded by bound + threads.
    return queueTags.computeIfAbsent(queue, name -> name);
  }

  private QueueMeters metersOf(String queue) {
    return meters.computeIfAbsent(queueTag(queue), tag -> new QueueMeters(registry, Tags.of("queue", tag)));
  }

  private void statistics(List<QueueStatistics> all) {
    Map<String, long[]> counts = new LinkedHashMap<>();
    Map<String, Duration> ages = new LinkedHashMap<>();
    for (QueueStatistics queue : all) {
      String tag = queueTag(queue.queue());
      long[] sum = counts.computeIfAbsent(tag, t -> new long[4]);
      sum[0] += queue.ready();
      sum[1] += queue.delayed();
      sum[2] += queue.inFlight();
      sum[3] += queue.expired();
      ages.merge(tag, queue.oldestReadyAge(), (a, b) -> a.compareTo(b) >= 0 ? a : b);
    }
    String[] states = {"ready", "delayed", "in.flight", "expired"};
    List<MultiGauge.Row<?>> countRows = new ArrayList<>();
    counts.forEach((tag, sum) -> {
      for (int i = 0; i < states.length; i++) {
        countRows.add(MultiGauge.Row.of(Tags.of("queue", tag, "state", states[i]), sum[i]));
      }
    });
    List<MultiGauge.Row<?>> ageRows = new ArrayList<>();
    ages.forEach((tag, age) -> ageRows.add(MultiGauge.Row.of(Tags.of("queue", tag), age.toNanos() / 1e9)));
    messagesByState.register(countRows, true);
    oldestReadyAge.register(ageRows, true);
  }

  private static final class QueueMeters {
    final Counter published;
    final Counter healed;
    final Counter claimed;
    final Counter acked;
    final Counter released;
    final Counter redelivered;
    final Counter deadLettered;
    final Counter unresolved;
    final Counter handlerFailures;
    final Timer publish;
    final Timer claim;
    final Timer ack;
    final Timer handler;

    QueueMeters(MeterRegistry registry, Tags tags) {
      published = counter(registry, "msgqueue.messages.published", "messages", tags);
      healed = counter(registry, "msgqueue.queues.healed", "queues", tags);
      claimed = counter(registry, "msgqueue.messages.claimed", "messages", tags);
      acked = counter(registry, "msgqueue.messages.acked", "messages", tags);
      released = counter(registry, "msgqueue.messages.released", "messages", tags);
      redelivered = counter(registry, "msgqueue.messages.redelivered", "messages", tags);
      deadLettered = counter(registry, "msgqueue.messages.dead.lettered", "messages", tags);
      unresolved = counter(registry, "msgqueue.messages.unresolved", "messages", tags);
      handlerFailures = counter(registry, "msgqueue.handler.failures", "messages", tags);
      publish = Timer.builder("msgqueue.publish").tags(tags).register(registry);
      claim = Timer.builder("msgqueue.claim").tags(tags).register(registry);
      ack = Timer.builder("msgqueue.ack").tags(tags).register(registry);
      handler = Timer.builder("msgqueue.handler").tags(tags).register(registry);
    }

    private static Counter counter(MeterRegistry registry, String name, String unit, Tags tags) {
      return Counter.builder(name).baseUnit(unit).tags(tags).register(registry);
    }
  }

  /** The repository's event sink: one meter update per event, never throwing. */
  private final class Sink implements MsgQueueEvents {
    @Override
    public void published(String queue, int messages, long nanos) {
      QueueMeters m = metersOf(queue);
      m.publish.record(nanos, TimeUnit.NANOSECONDS);
      Runnable count = () -> m.published.increment(messages);
      try {
        commitHook.afterCommit(count);
      } catch (RuntimeException e) {
        count.run(); // a hook that cannot defer: counted as if no transaction were observed
      }
    }

    @Override
    public void healed(String queue) {
      metersOf(queue).healed.increment();
    }

    @Override
    public void claimed(String queue, int messages, long nanos) {
      QueueMeters m = metersOf(queue);
      m.claimed.increment(messages);
      m.claim.record(nanos, TimeUnit.NANOSECONDS);
    }

    @Override
    public void acked(String queue, int messages, long nanos) {
      QueueMeters m = metersOf(queue);
      m.acked.increment(messages);
      if (nanos > 0) {
        m.ack.record(nanos, TimeUnit.NANOSECONDS);
      }
    }

    @Override
    public void released(String queue) {
      metersOf(queue).released.increment();
    }

    @Override
    public void redelivered(String queue, int messages) {
      metersOf(queue).redelivered.increment(messages);
    }

    @Override
    public void deadLettered(String queue, int messages) {
      metersOf(queue).deadLettered.increment(messages);
    }

    @Override
    public void takeUnresolved(String queue, int messages) {
      metersOf(queue).unresolved.increment(messages);
    }

    @Override
    public void handled(String queue, long nanos, boolean failed) {
      QueueMeters m = metersOf(queue);
      m.handler.record(nanos, TimeUnit.NANOSECONDS);
      if (failed) {
        m.handlerFailures.increment();
      }
    }

    @Override
    public void reaped(int queues) {
      reaped.increment(queues);
    }

    @Override
    public void expiredDeleted(int messages) {
      expiredDeleted.increment(messages);
    }

    @Override
    public boolean wantsStatistics() {
      return queueGauges;
    }

    @Override
    public void statistics(List<QueueStatistics> all) {
      MicrometerMetrics.this.statistics(Objects.requireNonNull(all));
    }
  }
}
