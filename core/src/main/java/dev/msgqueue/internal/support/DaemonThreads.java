package dev.msgqueue.internal.support;

import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The threads msgqueue starts: daemon threads named {@code msgqueue-...}, so they never keep a JVM alive and show
 * whose they are in a thread dump. Each has an owner that stops it ({@code close()} of the type that started it).
 */
public final class DaemonThreads {
  private DaemonThreads() { }

  /** An unstarted daemon thread called {@code name}. */
  public static Thread newThread(String name, Runnable body) {
    Thread thread = new Thread(body, name);
    thread.setDaemon(true);
    return thread;
  }

  /** A factory of daemon threads called {@code prefix-1}, {@code prefix-2}, ... */
  public static ThreadFactory numbered(String prefix) {
    AtomicInteger counter = new AtomicInteger();
    return body -> newThread(prefix + "-" + counter.incrementAndGet(), body);
  }
}
