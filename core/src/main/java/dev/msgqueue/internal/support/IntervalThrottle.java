package dev.msgqueue.internal.support;

import java.time.Duration;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Lets one caller per key through per interval, without any database round trip: the first caller after each
 * interval gets {@code true}, every other caller {@code false}. The publish path uses one for the keep-alive (which
 * publish writes a queue's {@code "lastActive"}) and one for wake-ups (which publish sends a notification).
 *
 * <p>Forgetting a key is always safe for both uses (its next caller passes, and the statements it guards are
 * themselves conditional or idempotent), which is what keeps the memory bounded: at most {@code maxTracked} keys, idle
 * ones forgotten first.
 */
public final class IntervalThrottle {
  private final long intervalNanos;
  private final int maxTracked;
  private final Map<String, AtomicLong> nextDueNanos = new ConcurrentHashMap<>();

  public IntervalThrottle(Duration interval, int maxTracked) {
    this.intervalNanos = interval.toNanos();
    this.maxTracked = maxTracked;
  }

  /**
   * Whether the caller may act for {@code key} now. At most one caller per interval gets {@code true}; the next
   * interval starts with it.
   */
  public boolean tryPass(String key) {
    long now = System.nanoTime();
    AtomicLong due = nextDueNanos.get(key);
    if (due == null) {
      makeRoom(now);
      due = nextDueNanos.computeIfAbsent(key, name -> new AtomicLong(now));
    }
    long dueAt = due.get();
    return now - dueAt >= 0 && due.compareAndSet(dueAt, now + intervalNanos);
  }

  /** Starts a new interval for {@code key} now: the act was just done by another path (for a queue: bind, keep-alive, heal). */
  public void done(String key) {
    long next = System.nanoTime() + intervalNanos;
    AtomicLong due = nextDueNanos.get(key);
    if (due == null) {
      makeRoom(next - intervalNanos);
      nextDueNanos.put(key, new AtomicLong(next));
    } else {
      due.set(next);
    }
  }

  /** Forgets {@code key}, so that its next caller passes. */
  public void forget(String key) {
    nextDueNanos.remove(key);
  }

  public int trackedKeys() {
    return nextDueNanos.size();
  }

  private void makeRoom(long now) {
    if (nextDueNanos.size() < maxTracked) {
      return;
    }
    // Keys overdue by a whole interval have had no caller since: idle, so forget them first.
    nextDueNanos.values().removeIf(due -> now - due.get() > intervalNanos);
    if (nextDueNanos.size() < maxTracked) {
      return;
    }
    // Still full of live keys: forget about a tenth. Each costs one extra, usually no-op, statement later.
    Iterator<String> names = nextDueNanos.keySet().iterator();
    int excess = nextDueNanos.size() - maxTracked + Math.max(1, maxTracked / 10);
    while (excess-- > 0 && names.hasNext()) {
      names.next();
      names.remove();
    }
  }
}
