package dev.msgqueue.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.util.HashMap;
import java.util.Map;

/**
 * The CPU time msgqueue's own threads (every thread the library starts is named {@code msgqueue-...}) spent since
 * {@link #start()}: a Subscriber's claims, handlers and acks run on them, so this is its client-side cost. Threads
 * that started after {@link #start()} count from zero; read it while they are alive (a thread that ended is gone from
 * the JVM's accounting).
 */
final class LibraryThreadsCpu {
  static final String THREAD_PREFIX = "msgqueue-";
  private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

  private final Map<Long, Long> atStart;

  private LibraryThreadsCpu(Map<Long, Long> atStart) {
    this.atStart = atStart;
  }

  static LibraryThreadsCpu start() {
    return new LibraryThreadsCpu(libraryThreadCpuNanos());
  }

  /** Nanoseconds of CPU the library's live threads spent since {@link #start()}. */
  long nanosSinceStart() {
    long total = 0;
    for (Map.Entry<Long, Long> thread : libraryThreadCpuNanos().entrySet()) {
      total += thread.getValue() - atStart.getOrDefault(thread.getKey(), 0L);
    }
    return total;
  }

  private static Map<Long, Long> libraryThreadCpuNanos() {
    Map<Long, Long> cpu = new HashMap<>();
    for (ThreadInfo info : THREADS.getThreadInfo(THREADS.getAllThreadIds())) {
      if (info == null || !info.getThreadName().startsWith(THREAD_PREFIX)) {
        continue;
      }
      long nanos = THREADS.getThreadCpuTime(info.getThreadId());
      if (nanos >= 0) { // -1: the thread ended in between
        cpu.put(info.getThreadId(), nanos);
      }
    }
    return cpu;
  }
}
