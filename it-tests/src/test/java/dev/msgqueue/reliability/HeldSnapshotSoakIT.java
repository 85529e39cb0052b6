package dev.msgqueue.reliability;

import static dev.msgqueue.it.MessageIds.assertSameIds;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.it.RestartablePostgres;
import dev.msgqueue.it.TestDatabase;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.jooq.DSLContext;
import org.junit.jupiter.api.Test;

/**
 * Steady publish and consume while another session holds a REPEATABLE READ snapshot, on a server the test owns
 * (autovacuum on, naptime 1 s): claim latency and throughput before, during and after the snapshot, and the item
 * table's and its indexes' size and dead rows over time. Three phases of {@code msgqueue.soak.phaseSeconds} (default
 * 15) each; asserted: nothing lost, the held snapshot keeps dead rows from being removed, and once it is released
 * vacuum removes them. Figures are printed (and kept in docs/reliability.md), never asserted.
 */
class HeldSnapshotSoakIT {
  private static final Duration PHASE = Duration.ofSeconds(Long.getLong("msgqueue.soak.phaseSeconds", 15));
  private static final String QUEUE = "soak";

  private record Sample(String phase, long atMillis, long tableBytes, long indexBytes, long deadRows, long liveRows) { }

  private record Claim(String phase, long nanos, int messages) { }

  private final List<Sample> samples = new CopyOnWriteArrayList<>();
  private final List<Claim> claims = Collections.synchronizedList(new ArrayList<>());
  private final List<Throwable> threadFailures = new CopyOnWriteArrayList<>();
  private volatile String phase = "before";
  private volatile boolean sampling = true;
  private volatile boolean publishing = true;
  // Set by the publisher after its last publishBatch returned and its ids were recorded.
  private final CountDownLatch publisherStopped = new CountDownLatch(1);

  @Test
  void vacuumCatchesUpOnceAHeldSnapshotIsReleased() throws Exception {
    try (RestartablePostgres server = RestartablePostgres.start("autovacuum_naptime = 1");
         TestDatabase db = TestDatabase.createMigrated(server.server(), "HeldSnapshotSoak")) {
      MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
      QueueSpec queue = QueueSpec.durable(QUEUE);
      repository.bindQueue(queue);
      Set<Long> published = ConcurrentHashMap.newKeySet();
      Set<Long> handled = ConcurrentHashMap.newKeySet();
      long start = System.nanoTime();
      Thread publisher = start("soak-publisher", () -> {
        try {
          while (publishing) {
            List<String> batch = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
              batch.add("{\"n\": " + i + ", \"pad\": \"" + "x".repeat(200) + "\"}");
            }
            published.addAll(repository.publishBatch(queue, batch));
            sleep(20); // ~500 messages/s
          }
        } finally {
          publisherStopped.countDown();
        }
      });
      Thread consumer = start("soak-consumer", () -> {
        while (true) {
          // Read before the claim: an empty claim after the publisher stopped means every committed message (and so
          // every recorded id) has been claimed and acked. Comparing counts instead can stop between a batch's
          // commit and the publisher recording its ids.
          boolean publisherDone = publisherStopped.getCount() == 0;
          long before = System.nanoTime();
          List<ClaimedMessage> claimed = repository.claim(QUEUE, 20, Duration.ofSeconds(30));
          claims.add(new Claim(phase, System.nanoTime() - before, claimed.size()));
          if (claimed.isEmpty()) {
            if (publisherDone) {
              return;
            }
            sleep(5);
            continue;
          }
          handled.addAll(repository.ack(claimed));
        }
      });
      DSLContext observer = db.dsl();
      Thread sampler = start("soak-sampler", () -> {
        while (sampling) {
          samples.add(sample(observer, phase, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)));
          sleep(1_000);
        }
      });

      sleep(PHASE.toMillis());
      long deadBeforeSnapshot = sample(observer, phase, 0).deadRows();
      try (Connection holder = db.connect()) {
        holder.setAutoCommit(false);
        holder.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
        try (Statement statement = holder.createStatement()) {
          statement.executeQuery("SELECT count(*) FROM \"MessageQueue\"").close(); // takes the snapshot
        }
        phase = "during";
        sleep(PHASE.toMillis());
        long deadWhileHeld = sample(observer, phase, 0).deadRows();
        assertThat(deadWhileHeld).as("dead rows pile up behind the held snapshot").isGreaterThan(deadBeforeSnapshot);
        holder.commit();
      }
      phase = "after";
      long released = System.nanoTime();
      sleep(PHASE.toMillis());
      long cleanedAfter = -1;
      while (System.nanoTime() - released < TimeUnit.SECONDS.toNanos(120)) {
        Sample now = sample(observer, phase, 0);
        if (now.deadRows() < Math.max(1_000, now.liveRows())) {
          cleanedAfter = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - released);
          break;
        }
        sleep(500);
      }
      publishing = false;
      sampling = false;
      for (Thread thread : List.of(publisher, consumer, sampler)) {
        thread.join(60_000);
        assertThat(thread.isAlive()).as("%s stopped within 60 s", thread.getName()).isFalse();
      }
      report(cleanedAfter);
      assertThat(threadFailures).as("exceptions in the soak's threads").isEmpty();
      assertSameIds("handled vs published", published, handled);
      assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM)).as("messages left in the table").isZero();
      assertThat(cleanedAfter).as("vacuum removed the dead rows within 120 s of the snapshot's release").isNotNegative();
    }
  }

  private static Sample sample(DSLContext dsl, String phase, long atMillis) {
    // Size functions and the statistics view: no generated table for them, hence plain SQL.
    org.jooq.Record row = dsl.resultQuery("""
        SELECT pg_relation_size('"MessageQueueItem"'), pg_indexes_size('"MessageQueueItem"'),
               n_dead_tup, n_live_tup
          FROM pg_stat_user_tables WHERE relname = 'MessageQueueItem'
        """).fetchSingle();
    return new Sample(phase, atMillis, row.get(0, Long.class), row.get(1, Long.class), row.get(2, Long.class),
        row.get(3, Long.class));
  }

  private void report(long cleanedAfterMillis) {
    System.out.printf("soak: phases of %d s; dead rows removed %d ms after the snapshot was released%n",
        PHASE.toSeconds(), cleanedAfterMillis);
    for (String name : List.of("before", "during", "after")) {
      List<Claim> inPhase;
      synchronized (claims) {
        inPhase = claims.stream().filter(claim -> claim.phase().equals(name) && claim.messages() > 0).toList();
      }
      long[] nanos = inPhase.stream().mapToLong(Claim::nanos).sorted().toArray();
      long messages = inPhase.stream().mapToLong(Claim::messages).sum();
      List<Sample> phaseSamples = samples.stream().filter(sample -> sample.phase().equals(name)).toList();
      Sample first = phaseSamples.isEmpty() ? null : phaseSamples.get(0);
      Sample last = phaseSamples.isEmpty() ? null : phaseSamples.get(phaseSamples.size() - 1);
      System.out.printf("soak: %-6s claimed %6d msgs (%5d/s), claim p50 %6.2f ms p99 %6.2f ms;"
              + " table %s -> %s kB, indexes %s -> %s kB, dead rows %s -> %s%n",
          name, messages, messages / Math.max(1, PHASE.toSeconds()), percentile(nanos, 0.50), percentile(nanos, 0.99),
          first == null ? "?" : first.tableBytes() / 1024, last == null ? "?" : last.tableBytes() / 1024,
          first == null ? "?" : first.indexBytes() / 1024, last == null ? "?" : last.indexBytes() / 1024,
          first == null ? "?" : first.deadRows(), last == null ? "?" : last.deadRows());
    }
  }

  private static double percentile(long[] sorted, double p) {
    if (sorted.length == 0) {
      return Double.NaN;
    }
    return sorted[Math.min(sorted.length - 1, (int) Math.floor(p * sorted.length))] / 1e6;
  }

  private Thread start(String name, Runnable body) {
    Thread thread = new Thread(() -> {
      try {
        body.run();
      } catch (Throwable failure) {
        threadFailures.add(failure);
      }
    }, name);
    thread.setDaemon(true);
    thread.start();
    return thread;
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
