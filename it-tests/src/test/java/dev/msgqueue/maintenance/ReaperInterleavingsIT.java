package dev.msgqueue.maintenance;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.internal.sql.MaintenanceStatements;
import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Semantic 7: the reaper against publishes and keep-alives, each interleaving stepped through with two sessions
 * and explicit transactions. Wherever the design claims "never waits", the waiting side runs under a 500 ms
 * lock_timeout, so a wait fails the test rather than passing slowly.
 *
 * <p>Every case ends with the message readable from its queue.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class ReaperInterleavingsIT {
  private static final Duration IDLE = Duration.ofHours(2);
  private static final String NEVER_WAIT = "-c lock_timeout=500";
  private final TestDatabase db;
  private final QueueRows rows;
  private final MsgQueueConfig config = MsgQueueConfig.defaults();
  private final MsgQueueRepository repository;
  private final MsgQueueRepository reaper;
  private final Session publisher;
  private final Session reaperSession;

  ReaperInterleavingsIT(TestDatabase db) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
    this.repository = MsgQueueRepository.create(db.dataSource(), config);
    this.reaper = MsgQueueRepository.create(db.dataSourceWithOptions(NEVER_WAIT), config);
    this.publisher = Session.open(db);
    this.reaperSession = Session.open(db);
  }

  @AfterEach
  void closeSessions() {
    publisher.close();
    reaperSession.close();
  }

  /** Binds through {@link #repository} (so its keep-alive is not due) and makes the queue look idle. */
  private QueueSpec idleQueue(String name) {
    QueueSpec spec = QueueSpec.autoDeleted(name);
    repository.bindQueue(spec);
    rows.makeIdle(name, IDLE);
    return spec;
  }

  private void assertReadableFromItsQueue(long id, String queue) {
    assertThat(rows.exists(queue)).as("queue %s exists", queue).isTrue();
    assertThat(rows.item(id)).as("message %d", id).isNotNull();
    assertThat(rows.item(id).getQueueId()).isEqualTo(queue);
  }

  @Test
  void a_publishCommittedBeforeTheReaperStartsHoldsTheQueue() {
    QueueSpec spec = idleQueue("case-a");
    long id = repository.publish(spec, "{}");

    assertThat(reaper.reapIdleQueues()).doesNotContain("case-a");

    assertReadableFromItsQueue(id, "case-a");
  }

  @Test
  void b_aPublishInFlightMakesTheReaperSkipTheQueueWithoutWaiting() {
    QueueSpec spec = idleQueue("case-b");
    long id = repository.inTransaction(publisher.dsl()).publish(spec, "{}");

    assertThat(reaper.reapIdleQueues()).doesNotContain("case-b");
    publisher.commit();
    assertThat(reaper.reapIdleQueues()).as("its message is unexpired").doesNotContain("case-b");

    assertReadableFromItsQueue(id, "case-b");
  }

  @Test
  void c_aPublishArrivingWhileTheReaperHoldsTheRowWaitsThenHeals() throws Exception {
    QueueSpec spec = idleQueue("case-c");
    List<String> locked = MaintenanceStatements.lockIdleQueues(reaperSession.dsl(), config.reapIdleThreshold(), 10);
    assertThat(locked).containsExactly("case-c");

    CompletableFuture<Long> publish = CompletableFuture.supplyAsync(
        () -> repository.inTransaction(publisher.dsl()).publish(spec, "{}"));
    publisher.awaitWaitingOnLock(db.dsl());
    assertThat(MaintenanceStatements.deleteEmptyQueues(reaperSession.dsl(), locked)).containsExactly("case-c");
    reaperSession.commit();
    long id = publish.get(20, TimeUnit.SECONDS);
    publisher.commit();

    assertReadableFromItsQueue(id, "case-c");
    assertThat(rows.queue("case-c").getLastActive()).isCloseTo(rows.serverUtcNow(), within(5, ChronoUnit.SECONDS));
  }

  @Test
  void c_autocommit_aPlainInsertArrivingWhileTheReaperHoldsTheRowWaitsThenHeals() throws Exception {
    QueueSpec spec = idleQueue("case-c-autocommit");
    List<String> locked = MaintenanceStatements.lockIdleQueues(reaperSession.dsl(), config.reapIdleThreshold(), 10);
    assertThat(locked).containsExactly("case-c-autocommit");

    // Outside a transaction the fast path is the plain insert: its foreign-key check waits, then fails with 23503.
    CompletableFuture<Long> publish = CompletableFuture.supplyAsync(() -> repository.publish(spec, "{}"));
    db.awaitSomeBackendWaitingOnLock();
    assertThat(MaintenanceStatements.deleteEmptyQueues(reaperSession.dsl(), locked))
        .containsExactly("case-c-autocommit");
    reaperSession.commit();
    long id = publish.get(20, TimeUnit.SECONDS);

    assertReadableFromItsQueue(id, "case-c-autocommit");
  }

  @Test
  void d_aPublishCommittedAfterTheReapersSnapshotButBeforeItsDeleteHoldsTheQueue() throws Exception {
    QueueSpec spec = idleQueue("case-d");
    long id = repository.inTransaction(publisher.dsl()).publish(spec, "{}");

    // The reaper's first statement takes its snapshot (the item is not visible) and then waits for the row lock.
    // Production skips locked rows instead; waiting here holds the window open deterministically.
    CompletableFuture<List<String>> candidates = CompletableFuture.supplyAsync(() ->
        MaintenanceStatements.idleQueues(reaperSession.dsl(), config.reapIdleThreshold(), 10).fetch(MESSAGE_QUEUE.NAME));
    reaperSession.awaitWaitingOnLock(db.dsl());
    publisher.commit();
    assertThat(candidates.get(20, TimeUnit.SECONDS)).as("stale: chosen before the item committed")
        .containsExactly("case-d");

    List<String> deleted = MaintenanceStatements.deleteEmptyQueues(reaperSession.dsl(), List.of("case-d"));
    reaperSession.commit();

    assertThat(deleted).isEmpty();
    assertReadableFromItsQueue(id, "case-d");
  }

  @Test
  void d_controlASingleStatementReaperOrphansTheMessageInTheSameInterleaving() throws Exception {
    QueueSpec spec = idleQueue("case-d-control");
    long id = repository.inTransaction(publisher.dsl()).publish(spec, "{}");

    // The obvious one-statement reaper: its NOT EXISTS is evaluated in a snapshot taken before the lock wait.
    CompletableFuture<Integer> naiveReap = CompletableFuture.supplyAsync(() -> reaperSession.dsl()
        .deleteFrom(MESSAGE_QUEUE)
        .where(MESSAGE_QUEUE.NAME.eq("case-d-control"))
        .and(MESSAGE_QUEUE.AUTO_DELETED.isTrue())
        .and(MESSAGE_QUEUE.LAST_ACTIVE.lt(ServerTime.utcNowMinus(config.reapIdleThreshold())))
        .andNotExists(DSL.selectOne().from(MESSAGE_QUEUE_ITEM)
            .where(MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(MESSAGE_QUEUE.NAME))
            .and(MESSAGE_QUEUE_ITEM.EXPIRES_AT.gt(ServerTime.utcNow())))
        .execute());
    reaperSession.awaitWaitingOnLock(db.dsl());
    publisher.commit();
    assertThat(naiveReap.get(20, TimeUnit.SECONDS)).isEqualTo(1);
    reaperSession.commit();

    assertThat(rows.item(id).getQueueId()).as("the race this design closes").isNull();
    assertThat(rows.unexpiredOrphans()).isEqualTo(1);
  }

  @Test
  void e1_aKeepAliveInFlightMakesTheReaperSkipTheQueueWithoutWaiting() {
    QueueSpec spec = idleQueue("case-e1");
    assertThat(repository.inTransaction(publisher.dsl()).keepAlive("case-e1")).isTrue();

    assertThat(reaper.reapIdleQueues()).doesNotContain("case-e1");
    publisher.commit();
    assertThat(reaper.reapIdleQueues()).as("now fresh").doesNotContain("case-e1");

    long id = repository.publish(spec, "{}");
    assertReadableFromItsQueue(id, "case-e1");
  }

  @Test
  void e2_aKeepAliveArrivingWhileTheReaperHoldsTheRowWritesNothingWithoutWaitingAndThePublishHeals() {
    QueueSpec spec = idleQueue("case-e2");
    List<String> locked = MaintenanceStatements.lockIdleQueues(reaperSession.dsl(), config.reapIdleThreshold(), 10);
    try (Session keepAlive = Session.open(db).lockTimeout(Duration.ofMillis(500))) {
      assertThat(repository.inTransaction(keepAlive.dsl()).keepAlive("case-e2")).isFalse();
      keepAlive.commit();
    }
    assertThat(MaintenanceStatements.deleteEmptyQueues(reaperSession.dsl(), locked)).containsExactly("case-e2");
    reaperSession.commit();

    long id = repository.publish(spec, "{}");
    assertReadableFromItsQueue(id, "case-e2");
  }

  @Test
  void e3_aThrottledKeepAliveInsideAPublishRacingTheReaperNeverWaits() {
    QueueSpec spec = QueueSpec.autoDeleted("case-e3");
    MsgQueueRepository fresh = MsgQueueRepository.create(db.dataSource(), config);
    fresh.bindQueue(spec);
    rows.makeIdle("case-e3", IDLE);
    MsgQueueRepository newReplica = MsgQueueRepository.create(db.dataSource(), config);
    // A new replica's first publish is due a keep-alive: it writes lastActive inside the publisher's transaction.
    long id = newReplica.inTransaction(publisher.dsl()).publish(spec, "{}");

    assertThat(reaper.reapIdleQueues()).doesNotContain("case-e3");
    publisher.commit();

    assertReadableFromItsQueue(id, "case-e3");
    assertThat(rows.queue("case-e3").getLastActive()).isCloseTo(rows.serverUtcNow(), within(5, ChronoUnit.SECONDS));
  }

  @Test
  void queuesThatAreNotAutoDeletedAreNeverReaped() {
    repository.bindQueue(QueueSpec.durable("durable-idle"));
    repository.bindQueue(new QueueSpec("non-durable-kept", false, false, false, null));
    rows.makeIdle("durable-idle", Duration.ofDays(30));
    rows.makeIdle("non-durable-kept", Duration.ofDays(30));

    assertThat(reaper.reapIdleQueues()).doesNotContain("durable-idle", "non-durable-kept");
    assertThat(rows.exists("durable-idle")).isTrue();
    assertThat(rows.exists("non-durable-kept")).isTrue();
  }
}
