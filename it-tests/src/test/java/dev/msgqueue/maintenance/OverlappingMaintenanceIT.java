package dev.msgqueue.maintenance;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.HousekeepingRun;
import dev.msgqueue.HousekeepingRun.Outcome;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.internal.sql.MaintenanceStatements;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Two housekeepers working at once: after a replica's lock session dies, its tick goes on while another replica holds
 * the lock, so every maintenance act must be safe against a concurrent copy of itself and of the others. Each
 * interleaving below holds one act's transaction open on one connection while the other act runs in full on another
 * whose sessions fail any lock wait after 500 ms (a wait fails the test instead of passing slowly).
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class OverlappingMaintenanceIT {
  private static final Duration IDLE = Duration.ofHours(2);
  private final TestDatabase db;
  private final QueueRows rows;
  private final MsgQueueConfig config = MsgQueueConfig.defaults();
  private final MsgQueueRepository setup;
  /** The other replica: its sessions fail a lock wait after 500 ms. */
  private final MsgQueueRepository neverWaiting;

  OverlappingMaintenanceIT(TestDatabase db) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
    this.setup = MsgQueueRepository.create(db.dataSource(), config);
    this.neverWaiting = MsgQueueRepository.create(db.dataSourceWithOptions("-c lock_timeout=500"), config);
  }

  /** Idle auto-deleted queues, each holding {@code expiredEach} expired messages. */
  private List<String> idleQueues(String prefix, int count, int expiredEach) {
    List<String> names = IntStream.range(0, count).mapToObj(i -> prefix + "-" + i).toList();
    for (String name : names) {
      QueueSpec spec = QueueSpec.autoDeleted(name);
      setup.bindQueue(spec);
      if (expiredEach > 0) {
        setup.publishBatch(spec, IntStream.range(0, expiredEach).mapToObj(Integer::toString).toList());
        rows.expireItems(name);
      }
      rows.makeIdle(name, IDLE);
    }
    return names;
  }

  /** An idle auto-deleted queue that holds an unexpired message: never reaped. @return the message id */
  private long idleQueueWithALiveMessage(String name) {
    QueueSpec spec = QueueSpec.autoDeleted(name);
    setup.bindQueue(spec);
    long id = setup.publish(spec, "{\"live\": true}");
    rows.makeIdle(name, IDLE);
    return id;
  }

  @Test
  void twoReapersAtOnce_eachDeletesOtherQueues_noneWaits() {
    List<String> idle = idleQueues("reapers", 6, 1);
    long live = idleQueueWithALiveMessage("reapers-live");
    List<String> reapedByA;
    List<String> reapedByB;

    try (Session a = Session.open(db)) {
      List<String> lockedByA = MaintenanceStatements.lockIdleQueues(a.dsl(), config.reapIdleThreshold(), 3);
      assertThat(lockedByA).hasSize(3);
      reapedByB = neverWaiting.reapIdleQueues();
      MaintenanceStatements.cleanUpExpiredMessagesOf(a.dsl(), lockedByA, 100);
      reapedByA = MaintenanceStatements.deleteEmptyQueues(a.dsl(), lockedByA);
      a.commit();
    }

    assertThat(reapedByA).hasSize(3).doesNotContainAnyElementsOf(reapedByB);
    List<String> reaped = new ArrayList<>(reapedByA);
    reaped.addAll(reapedByB);
    assertThat(reaped).containsExactlyInAnyOrderElementsOf(idle);
    assertThat(rows.item(live).getQueueId()).isEqualTo("reapers-live");
    assertThat(rows.unexpiredOrphans()).isZero();
  }

  @Test
  void twoCleanupsAtOnce_eachDeletesOtherMessages_noneWaits() {
    QueueSpec spec = QueueSpec.durable("cleanups");
    setup.bindQueue(spec);
    setup.publishBatch(spec, IntStream.range(0, 10).mapToObj(Integer::toString).toList());
    rows.expireItems(spec.name());
    List<Long> live = setup.publishBatch(spec, IntStream.range(0, 5).mapToObj(Integer::toString).toList());
    int deletedByA;
    int deletedByB;

    try (Session a = Session.open(db)) {
      deletedByA = MaintenanceStatements.cleanUpExpiredMessages(a.dsl(), 4);
      deletedByB = neverWaiting.cleanUpExpiredMessages();
      a.commit();
    }

    assertThat(deletedByA).isEqualTo(4);
    assertThat(deletedByB).isEqualTo(6);
    assertThat(rows.itemsOf(spec.name())).isEqualTo(live.size());
    assertThat(live).allSatisfy(id -> assertThat(rows.item(id)).isNotNull());
  }

  @Test
  void aReaperWhileACleanupHoldsTheQueuesExpiredMessages_keepsTheQueueUntilTheNextRun() {
    List<String> idle = idleQueues("reaper-vs-cleanup", 1, 2);

    try (Session a = Session.open(db)) {
      assertThat(MaintenanceStatements.cleanUpExpiredMessages(a.dsl(), 100)).isEqualTo(2);
      assertThat(neverWaiting.reapIdleQueues()).as("still referenced by rows the cleanup holds").isEmpty();
      a.commit();
    }

    assertThat(rows.exists(idle.get(0))).isTrue();
    assertThat(neverWaiting.reapIdleQueues()).containsExactlyElementsOf(idle);
    assertThat(rows.unexpiredOrphans()).isZero();
  }

  @Test
  void aCleanupWhileAReaperHoldsQueues_deletesOnlyTheMessagesTheReaperLeaves() {
    List<String> idle = idleQueues("cleanup-vs-reaper", 2, 3);

    List<String> reapedByA;
    int deletedByB;
    try (Session a = Session.open(db)) {
      List<String> lockedByA = MaintenanceStatements.lockIdleQueues(a.dsl(), config.reapIdleThreshold(), 1);
      assertThat(MaintenanceStatements.cleanUpExpiredMessagesOf(a.dsl(), lockedByA, 100)).isEqualTo(3);
      deletedByB = neverWaiting.cleanUpExpiredMessages();
      reapedByA = MaintenanceStatements.deleteEmptyQueues(a.dsl(), lockedByA);
      a.commit();
    }

    assertThat(deletedByB).as("the other queue's three; the reaper's rows are skipped").isEqualTo(3);
    assertThat(reapedByA).hasSize(1);
    assertThat(neverWaiting.reapIdleQueues()).as("the other queue, now empty")
        .containsExactlyElementsOf(idle.stream().filter(q -> !reapedByA.contains(q)).toList());
    assertThat(rows.unexpiredOrphans()).isZero();
  }

  @Test
  void twoFailureRecordCleanupsAtOnce_eachDeletesOtherRecords_noneWaits() {
    // Failure records of messages that are gone (acked or deleted): what the cleanup's last step removes.
    for (long itemId = 1; itemId <= 5; itemId++) {
      db.dsl().insertInto(MESSAGE_QUEUE_ITEM_FAILURE)
          .set(MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID, -itemId)
          .set(MESSAGE_QUEUE_ITEM_FAILURE.FAILED_DELIVERIES, 1)
          .set(MESSAGE_QUEUE_ITEM_FAILURE.LAST_FAILED_AT, rows.serverUtcNow())
          .execute();
    }

    int deletedByB;
    try (Session a = Session.open(db)) {
      assertThat(MaintenanceStatements.deleteOrphanedFailures(a.dsl(), 2)).isEqualTo(2);
      deletedByB = neverWaiting.cleanUpExpiredMessages();
      a.commit();
    }

    assertThat(deletedByB).as("it deletes no message").isZero();
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM_FAILURE)).isZero();
  }

  @Test
  void twoHousekeepersTickingAtOnceWhilePublishing_loseNothingAndNeverFail() throws Exception {
    // Distinct lock keys: both replicas work every tick, as two do while one of them outlives its lock session.
    Housekeeper first = Housekeeper.builder(MsgQueueRepository.create(db.dataSource(), config))
        .advisoryLockKey(1).build();
    Housekeeper second = Housekeeper.builder(neverWaiting).advisoryLockKey(2).build();
    ConcurrentLinkedQueue<Long> livePublished = new ConcurrentLinkedQueue<>();
    ConcurrentLinkedQueue<HousekeepingRun> runs = new ConcurrentLinkedQueue<>();
    int rounds = 25;

    ExecutorService threads = Executors.newFixedThreadPool(3);
    try {
      List<Future<?>> work = new ArrayList<>();
      work.add(threads.submit(() -> {
        for (int round = 0; round < rounds; round++) {
          List<String> idle = idleQueues("stress-" + round, 4, 2);
          for (String queue : idle) {
            livePublished.add(setup.publish(QueueSpec.autoDeleted(queue), "{\"round\": " + round + "}"));
            rows.makeIdle(queue, IDLE);
          }
          idleQueues("stress-empty-" + round, 3, 2);
        }
      }));
      for (Housekeeper housekeeper : List.of(first, second)) {
        work.add(threads.submit(() -> {
          for (int tick = 0; tick < rounds; tick++) {
            runs.add(housekeeper.runOnce());
          }
        }));
      }
      for (Future<?> future : work) {
        future.get();
      }
    } finally {
      threads.shutdownNow();
    }
    runs.add(first.runOnce());

    assertThat(runs).allSatisfy(run -> assertThat(run.outcome()).as(run.toString()).isEqualTo(Outcome.COMPLETED));
    assertThat(livePublished).hasSize(rounds * 4);
    Set<Long> lostOrOrphaned = new HashSet<>();
    for (long id : livePublished) {
      MessageQueueItemRecord item = rows.item(id);
      if (item == null || item.getQueueId() == null) {
        lostOrOrphaned.add(id);
      }
    }
    assertThat(lostOrOrphaned).as("live messages lost or orphaned").isEmpty();
    assertThat(rows.unexpiredOrphans()).isZero();
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.EXPIRES_AT.le(rows.serverUtcNow())))
        .as("every expired message deleted by the last tick").isZero();
  }
}
