package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.it.Await;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import java.sql.DriverManager;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

// Kept in dev.msgqueue: reads Subscriber's shared thread prefix.
/**
 * Many subscribers of one repository under light traffic: 200 queues, each with its own subscriber, a few messages a
 * second published to random queues for a minute. The library's threads for them (shared workers, the timer, the
 * shared handler threads and the wake-up listener) stay at or under 100 throughout, sampled every 100 ms, and every
 * message is handled exactly once. The delay from publish to handler is printed, not asserted: the benchmark measures
 * speed.
 */
class LightTrafficThreadsIT extends RepositoryFixture {
  private static final int QUEUES = 200;
  private static final int MESSAGES_PER_SECOND = Integer.getInteger("msgqueue.light.rate", 5);
  private static final Duration RUN = Duration.ofSeconds(Long.getLong("msgqueue.light.seconds", 60));
  private static final int MAX_LIBRARY_THREADS = 100;

  LightTrafficThreadsIT(TestDatabase db) {
    super(db, 16);
  }

  @Test
  void twoHundredSubscribersOnAFewMessagesASecondKeepAtMostAHundredThreadsAndHandleEveryMessage() throws Exception {
    WakeupListener wakeups = closeLater(WakeupListener.start(() -> DriverManager.getConnection(db.jdbcUrl())));
    Await.until("the listener connected", Duration.ofSeconds(60), wakeups::isListening);
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    Map<Long, Long> publishedAt = new ConcurrentHashMap<>();
    List<Long> delaysMicros = java.util.Collections.synchronizedList(new ArrayList<>());
    List<Subscriber> subscribers = new ArrayList<>();
    for (int i = 0; i < QUEUES; i++) {
      subscribers.add(closeLater(Subscriber.builder(repository, QueueSpec.durable("light-" + i), message -> {
        long now = System.nanoTime();
        if (handled.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet() == 1) {
          Long at = publishedAt.get(message.id());
          if (at != null) {
            delaysMicros.add(TimeUnit.NANOSECONDS.toMicros(now - at));
          }
        }
      }).wakeups(wakeups).start()));
    }
    String workers = subscribers.get(0).sharedThreadPrefix() + "-";
    String handlers = workers.replace("msgqueue-consume-", "msgqueue-handler-");
    AtomicInteger mostThreads = new AtomicInteger();
    Set<Long> published = ConcurrentHashMap.newKeySet();

    long end = System.nanoTime() + RUN.toNanos();
    long nextPublish = System.nanoTime();
    long nextSample = System.nanoTime();
    long gapNanos = TimeUnit.SECONDS.toNanos(1) / MESSAGES_PER_SECOND;
    while (System.nanoTime() < end) {
      long now = System.nanoTime();
      if (now >= nextPublish) {
        QueueSpec target = QueueSpec.durable("light-" + ThreadLocalRandom.current().nextInt(QUEUES));
        long before = System.nanoTime();
        long id = repository.publish(target, "{}");
        publishedAt.put(id, before);
        published.add(id);
        nextPublish += gapNanos;
      }
      if (now >= nextSample) {
        mostThreads.accumulateAndGet(libraryThreads(workers, handlers), Math::max);
        nextSample += TimeUnit.MILLISECONDS.toNanos(100);
      }
      Thread.sleep(5); // pacing the publisher and the sampler, not a timing assertion
    }
    Await.until("every published message handled", Duration.ofSeconds(120),
        () -> handled.keySet().containsAll(published));
    mostThreads.accumulateAndGet(libraryThreads(workers, handlers), Math::max);

    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(published);
    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isOne());
    assertThat(mostThreads.get()).as("library threads of %d subscribers", QUEUES)
        .isLessThanOrEqualTo(MAX_LIBRARY_THREADS);
    List<Long> sorted = new ArrayList<>(delaysMicros);
    sorted.sort(null);
    System.out.printf("LightTrafficThreadsIT: %d messages, most library threads %d, publish-to-handler p50 %.1f ms,"
            + " p99 %.1f ms, max %.1f ms%n", published.size(), mostThreads.get(),
        sorted.get(sorted.size() / 2) / 1000.0, sorted.get((int) Math.ceil(sorted.size() * 0.99) - 1) / 1000.0,
        sorted.get(sorted.size() - 1) / 1000.0);
  }

  /** The threads of this repository's subscribers, and the wake-up listener's. */
  private static int libraryThreads(String workers, String handlers) {
    int count = 0;
    for (Thread thread : Thread.getAllStackTraces().keySet()) {
      String name = thread.getName();
      if (name.startsWith(workers) || name.startsWith(handlers)) {
        count++;
      }
    }
    return count + 1;
  }
}
