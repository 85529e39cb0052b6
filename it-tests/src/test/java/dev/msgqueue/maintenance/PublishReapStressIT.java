package dev.msgqueue.maintenance;

import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.PublishOptions;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.internal.publish.Publisher;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A bounded stress run (about 8 s) of the interleavings the deterministic tests pin down one by one: publishers that
 * go quiet long enough for their queues to be reaped and come back, against a reaper and cleanup looping without
 * pause. No publish may fail and no unexpired message may ever be orphaned.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class PublishReapStressIT {
  private static final Duration RUN = Duration.ofSeconds(Long.getLong("msgqueue.stress.seconds", 8));
  private static final Duration QUIET_SLOT = Duration.ofMillis(1500);

  @Test
  void publishersComingAndGoingAgainstALoopingReaperLoseNothing(TestDatabase db) throws Exception {
    MsgQueueConfig config = MsgQueueConfig.builder()
        .keepAliveInterval(Duration.ofMillis(100)).reapIdleThreshold(Duration.ofMillis(400)).build();
    MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), config);
    QueueRows rows = new QueueRows(db.dsl());
    PublishOptions shortLived = PublishOptions.defaults().withTtl(Duration.ofMillis(150));
    List<String> copied = Collections.nCopies(Publisher.COPY_MIN_BATCH, "{}");
    Instant begin = Instant.now();
    Instant end = begin.plus(RUN);
    AtomicInteger published = new AtomicInteger();
    AtomicInteger orphanScans = new AtomicInteger();
    AtomicInteger orphansSeen = new AtomicInteger();
    Map<String, Integer> reapsPerQueue = new ConcurrentHashMap<>();

    ExecutorService pool = Executors.newFixedThreadPool(10);
    try {
      List<Future<?>> tasks = new ArrayList<>();
      for (int thread = 0; thread < 8; thread++) {
        int queue = thread % 4;
        QueueSpec spec = QueueSpec.autoDeleted("stress-" + queue);
        tasks.add(pool.submit(() -> {
          ThreadLocalRandom random = ThreadLocalRandom.current();
          while (Instant.now().isBefore(end)) {
            // Both publishers of a queue go quiet in the same slots (queues take turns), long past the reap
            // threshold and the TTL, so the reaper deletes the queue and the next burst heals it.
            long slot = Duration.between(begin, Instant.now()).toMillis() / QUIET_SLOT.toMillis();
            if ((slot + queue) % 2 == 1) {
              Thread.sleep(25);
              continue;
            }
            int kind = random.nextInt(8);
            if (kind == 0) {
              repository.publishBatch(spec, copied, shortLived); // by COPY unless its keep-alive is due
              published.addAndGet(copied.size());
            } else if (kind < 3) {
              repository.publishBatch(spec, List.of("1", "2", "3"), shortLived);
              published.addAndGet(3);
            } else {
              repository.publish(spec, "{}", shortLived);
              published.incrementAndGet();
            }
            Thread.sleep(random.nextInt(0, 30));
          }
          return null;
        }));
      }
      tasks.add(pool.submit(() -> {
        while (Instant.now().isBefore(end)) {
          repository.reapIdleQueues().forEach(name -> reapsPerQueue.merge(name, 1, Integer::sum));
          repository.cleanUpExpiredMessages();
        }
        return null;
      }));
      tasks.add(pool.submit(() -> {
        while (Instant.now().isBefore(end)) {
          orphansSeen.addAndGet(rows.unexpiredOrphans());
          orphanScans.incrementAndGet();
          Thread.sleep(20);
        }
        return null;
      }));
      for (Future<?> task : tasks) {
        task.get(RUN.toSeconds() + 60, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }

    int reaps = reapsPerQueue.values().stream().mapToInt(Integer::intValue).sum();
    System.out.printf("stress: %d published, %d reaps (and as many heals or fewer), %d orphan scans%n",
        published.get(), reaps, orphanScans.get());
    assertThat(orphansSeen.get()).as("unexpired orphans seen over %d scans", orphanScans.get()).isZero();
    assertThat(published.get()).isPositive();
    assertThat(reaps).as("queues went idle and were reaped, so publishes healed them").isPositive();
  }
}
