package dev.msgqueue;

import java.time.Duration;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Decides, without any database round trip, which publish should refresh a queue's {@code "lastActive"}: the first one
 * after each keep-alive interval, in this process. The database statement is conditional on the row's age as well, so
 * across processes there is still at most one write per interval; this class only keeps the statement off the hot
 * path. Forgetting a queue is always safe (its next publish issues one statement that may write nothing), which is
 * what keeps the memory bounded.
 */
final class KeepAliveTracker {
  private final long intervalNanos;
  private final int maxTracked;
  private final Map<String, AtomicLong> nextDueNanos = new ConcurrentHashMap<>();

  KeepAliveTracker(Duration interval, int maxTracked) {
    this.intervalNanos = interval.toNanos();
    this.maxTracked = maxTracked;
  }

  /**
   * Whether the caller should issue the keep-alive statement for {@code queue} now. At most one caller per interval
   * gets {@code true}; it owns the refresh until the next interval.
   */
  boolean claimRefresh(String queue) {
    long now = System.nanoTime();
    AtomicLong due = nextDueNanos.get(queue);
    if (due == null) {
      makeRoom(now);
      due = nextDueNanos.computeIfAbsent(queue, name -> new AtomicLong(now));
    }
    long dueAt = due.get();
    return now - dueAt >= 0 && due.compareAndSet(dueAt, now + intervalNanos);
  }

  /** Records that {@code "lastActive"} was just written by another path (bind, heal). */
  void refreshed(String queue) {
    long next = System.nanoTime() + intervalNanos;
    AtomicLong due = nextDueNanos.get(queue);
    if (due == null) {
      makeRoom(next - intervalNanos);
      nextDueNanos.put(queue, new AtomicLong(next));
    } else {
      due.set(next);
    }
  }

  /** Forgets a queue, so that its next publish refreshes it. */
  void forget(String queue) {
    nextDueNanos.remove(queue);
  }

  int trackedQueues() {
    return nextDueNanos.size();
  }

  private void makeRoom(long now) {
    if (nextDueNanos.size() < maxTracked) {
      return;
    }
    // Queues overdue by a whole interval have not been published to since: idle, so forget them first.
    nextDueNanos.values().removeIf(due -> now - due.get() > intervalNanos);
    if (nextDueNanos.size() < maxTracked) {
      return;
    }
    // Still full of live queues: forget about a tenth. Each costs one extra, usually no-op, statement later.
    Iterator<String> names = nextDueNanos.keySet().iterator();
    int excess = nextDueNanos.size() - maxTracked + Math.max(1, maxTracked / 10);
    while (excess-- > 0 && names.hasNext()) {
      names.next();
      names.remove();
    }
  }
}
