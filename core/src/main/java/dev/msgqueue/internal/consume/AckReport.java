package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.internal.support.MsgQueueEvents;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** How an ack is reported: per queue (an ack's messages usually share one), its duration with the first's queue. */
public final class AckReport {
  private AckReport() { }

  public static void report(MsgQueueEvents events, Collection<ClaimedMessage> messages, List<Long> acked, long nanos) {
    String first = messages.iterator().next().queueName();
    if (messages.stream().allMatch(m -> m.queueName().equals(first))) {
      events.acked(first, acked.size(), nanos);
      return;
    }
    Set<Long> ackedIds = new HashSet<>(acked);
    Map<String, Integer> perQueue = new HashMap<>();
    for (ClaimedMessage message : messages) {
      if (ackedIds.remove(message.id())) {
        perQueue.merge(message.queueName(), 1, Integer::sum);
      }
    }
    perQueue.forEach((queue, count) -> events.acked(queue, count, queue.equals(first) ? nanos : 0));
  }
}
