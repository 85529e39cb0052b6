package dev.msgqueue;

import java.time.Instant;
import java.util.List;
import java.util.Objects;

/**
 * The statistics of every queue from one read, as a {@link Housekeeper} tick reads them for the statistics gauges and
 * as {@link MsgQueueRepository#estimatedQueueStatistics()} returns them: exact while the message table holds at most
 * 50,000 messages (the planner's estimate), else estimated from a block sample of about 20,000 messages, so that one
 * read costs about the same at 10 million messages as at 50,000 for the same queues (a read has a row for every
 * queue, so its cost grows with their number).
 *
 * @param readAt when the read finished, on this JVM's clock
 * @param sampled whether the counts are estimates from a block sample (each scaled up by the sampled share of the
 *     table, the oldest ready age a lower bound) rather than exact counts
 * @param queues the statistics of every queue, in name order
 */
public record QueueStatisticsSnapshot(Instant readAt, boolean sampled, List<QueueStatistics> queues) {
  public QueueStatisticsSnapshot {
    Objects.requireNonNull(readAt, "readAt");
    queues = List.copyOf(queues);
  }
}
