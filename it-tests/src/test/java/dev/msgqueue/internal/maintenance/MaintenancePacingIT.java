package dev.msgqueue.internal.maintenance;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.IntStream;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

// In the maintenance package: builds the jobs with a pacing whose clock and sleep the test owns.
/**
 * The pause between maintenance batches against PostgreSQL: it comes after a batch has committed (a second
 * connection sees the batch's rows gone while the job pauses, so the pause holds no lock), never after the last
 * batch, and an interrupt during it stops the job with what it committed so far.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class MaintenancePacingIT {
  private static final long BATCH_NANOS = 5_000_000;

  private final TestDatabase db;
  private final QueueRows rows;
  private final MsgQueueConfig config = MsgQueueConfig.builder()
      .cleanupBatchSize(10).reapBatchSize(10).maintenanceDutyCycle(0.25).build();
  private final MsgQueueRepository repository;
  /** Every read of the pacing's clock is 5 ms after the previous one: each batch "takes" 5 ms. */
  private final AtomicLong clock = new AtomicLong();
  private final List<Long> pauses = new ArrayList<>();
  /** What a second connection saw at each pause: messages (cleanup) or queues (reaper) left. */
  private final List<Integer> leftAtPause = new ArrayList<>();

  MaintenancePacingIT(TestDatabase db) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
    this.repository = MsgQueueRepository.create(db.dataSource(), config);
  }

  /** The tests of this class share its database: each starts from empty tables. */
  @BeforeEach
  void emptyTables() {
    db.dsl().deleteFrom(MESSAGE_QUEUE_ITEM).execute();
    db.dsl().deleteFrom(MESSAGE_QUEUE).execute();
  }

  @AfterEach
  void clearInterrupt() {
    Thread.interrupted();
  }

  private BatchPacing pacing(BatchPacing.Sleeper atPause) {
    return new BatchPacing(config.maintenanceDutyCycle(), () -> clock.addAndGet(BATCH_NANOS), nanos -> {
      pauses.add(nanos);
      atPause.sleep(nanos);
    });
  }

  /** The jobs' connections: a pool, as a repository's own connections are. */
  private DSLContext jobs() {
    return DSL.using(db.dataSource(), SQLDialect.POSTGRES);
  }

  private void expiredMessages(String queue, int count) {
    QueueSpec spec = QueueSpec.durable(queue);
    repository.bindQueue(spec);
    repository.publishBatch(spec, IntStream.range(0, count).mapToObj(Integer::toString).toList());
    rows.expireItems(queue);
  }

  @Test
  void theCleanupPausesAfterEachCommittedFullBatchAndNotAfterTheLast() {
    expiredMessages("paced", 25);
    ExpiredMessageCleanup cleanup = new ExpiredMessageCleanup(jobs(), config,
        pacing(nanos -> leftAtPause.add(rows.itemsOf("paced"))));

    assertThat(cleanup.deleteExpired()).isEqualTo(25);

    // Batches of 10, 10 and 5: a pause after each full one, three times its 5 ms (duty cycle 0.25).
    assertThat(pauses).containsExactly(3 * BATCH_NANOS, 3 * BATCH_NANOS);
    assertThat(leftAtPause).containsExactly(15, 5);
    assertThat(rows.itemsOf("paced")).isZero();
  }

  @Test
  void anInterruptDuringTheCleanupsPauseStopsItWithTheFirstBatchCommitted() {
    expiredMessages("interrupted", 25);
    ExpiredMessageCleanup cleanup = new ExpiredMessageCleanup(jobs(), config, pacing(nanos -> {
      throw new InterruptedException();
    }));

    assertThat(cleanup.deleteExpired()).isEqualTo(10);

    // The interrupt is kept for the caller; cleared here (Thread.interrupted), so that the count below can wait for a
    // pooled connection: an interrupted thread's wait in the pool fails at once.
    assertThat(Thread.interrupted()).isTrue();
    assertThat(rows.itemsOf("interrupted")).isEqualTo(15);
  }

  @Test
  void theReaperPausesAfterEachCommittedFullBatchAndNotAfterTheLast() {
    for (int i = 0; i < 25; i++) {
      String name = "idle-" + i;
      rows.insertQueue(name, false, true);
      rows.makeIdle(name, Duration.ofHours(2));
    }
    IdleQueueReaper reaper = new IdleQueueReaper(jobs(), config,
        pacing(nanos -> leftAtPause.add(db.dsl().fetchCount(MESSAGE_QUEUE))));

    assertThat(reaper.reap()).hasSize(25);

    assertThat(pauses).containsExactly(3 * BATCH_NANOS, 3 * BATCH_NANOS);
    assertThat(leftAtPause).containsExactly(15, 5);
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE)).isZero();
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM)).isZero();
  }
}
