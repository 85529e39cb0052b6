package dev.msgqueue.internal.support;

import dev.msgqueue.QueueStatistics;
import java.util.List;

/**
 * What msgqueue reports as it works, one call per event, for metrics. The default does nothing, so core needs no
 * metrics library; {@code MicrometerMetrics} is the one implementation, loaded only when a service binds it.
 * Implementations must be cheap and must not throw.
 */
public interface MsgQueueEvents {
  MsgQueueEvents NONE = new MsgQueueEvents() { };

  /** A publish stored {@code messages} messages in {@code queue}, taking {@code nanos}. */
  default void published(String queue, int messages, long nanos) { }

  /** A publish re-created the reaped auto-deleted {@code queue}. */
  default void healed(String queue) { }

  /** A claim on {@code queue} took {@code messages} messages (possibly none), taking {@code nanos}. */
  default void claimed(String queue, int messages, long nanos) { }

  /** An ack deleted {@code messages} messages of {@code queue}, taking {@code nanos}. */
  default void acked(String queue, int messages, long nanos) { }

  /** A release released one message of {@code queue}. */
  default void released(String queue) { }

  /**
   * The commit of an at-most-once take of {@code messages} messages of {@code queue} went unanswered and its outcome
   * could not be learned: they are lost if it committed, and in the queue still if it did not.
   */
  default void takeUnresolved(String queue, int messages) { }

  /** A claim took {@code messages} messages of {@code queue} that had been claimed before. */
  default void redelivered(String queue, int messages) { }

  /** {@code messages} messages of {@code queue} were moved to its dead letters. */
  default void deadLettered(String queue, int messages) { }

  /** A subscriber's handler ran on a message of {@code queue} for {@code nanos}, and failed if {@code failed}. */
  default void handled(String queue, long nanos, boolean failed) { }

  /** The reaper deleted {@code queues} idle queues. */
  default void reaped(int queues) { }

  /** The cleanup deleted {@code messages} expired messages. */
  default void expiredDeleted(int messages) { }

  /** Whether {@link #statistics} is wanted: the housekeeper reads the statistics only then. */
  default boolean wantsStatistics() {
    return false;
  }

  /** The statistics of every queue, read by a housekeeper tick. */
  default void statistics(List<QueueStatistics> all) { }
}
