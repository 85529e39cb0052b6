package dev.msgqueue.internal.consume;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Claimed messages waiting for a handler, oldest claim first, with their count: the {@link Claimer} reads the count
 * on every decision to claim, and {@link ConcurrentLinkedQueue#size()} walks the whole queue.
 */
final class ReadyMessages {
  private final ConcurrentLinkedQueue<Held> messages = new ConcurrentLinkedQueue<>();
  /** Incremented before an add and decremented after a poll: never below the queue's length. */
  private final AtomicInteger count = new AtomicInteger();

  void add(Held message) {
    count.incrementAndGet();
    messages.add(message);
  }

  /** @return the oldest waiting message, or null if none waits */
  Held poll() {
    Held message = messages.poll();
    if (message != null) {
      count.decrementAndGet();
    }
    return message;
  }

  boolean isEmpty() {
    return messages.isEmpty();
  }

  /** How many wait, counting one being added right now. */
  int count() {
    return count.get();
  }
}
