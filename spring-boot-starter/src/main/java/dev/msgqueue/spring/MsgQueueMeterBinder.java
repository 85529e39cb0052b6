package dev.msgqueue.spring;

import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.MicrometerMetrics;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;

/**
 * msgqueue's meters as a Micrometer {@link MeterBinder}: Spring Boot binds every {@code MeterBinder} bean to the
 * registries it creates (Actuator's included, on Boot 3 and 4 alike) whenever they are created, so no ordering between
 * auto-configurations decides whether the meters exist. The repository reports to one registry: bound again, the last
 * one wins (Boot binds to its composite registry when there are several). A publish inside a Spring-managed transaction
 * counts in {@code msgqueue.messages.published} once that transaction commits ({@link SpringCommitHook}).
 */
final class MsgQueueMeterBinder implements MeterBinder, AutoCloseable {
  private final MsgQueueRepository repository;
  private final int maxQueueTags;
  private final boolean queueGauges;
  private MicrometerMetrics bound;

  MsgQueueMeterBinder(MsgQueueRepository repository, int maxQueueTags, boolean queueGauges) {
    if (maxQueueTags < 1 || maxQueueTags > MicrometerMetrics.MAX_QUEUE_TAGS) {
      throw new IllegalArgumentException("invalid msgqueue.metrics.max-queue-tags: must be in [1, "
          + MicrometerMetrics.MAX_QUEUE_TAGS + "], was " + maxQueueTags);
    }
    this.repository = repository;
    this.maxQueueTags = maxQueueTags;
    this.queueGauges = queueGauges;
  }

  @Override
  public synchronized void bindTo(MeterRegistry registry) {
    bound = MicrometerMetrics.bind(registry, repository, maxQueueTags, queueGauges, new SpringCommitHook());
  }

  /** Stops recording; the meters stay in the registry. */
  @Override
  public synchronized void close() {
    if (bound != null) {
      bound.close();
    }
  }
}
