package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.msgqueue.HousekeepingRun.Outcome;
import dev.msgqueue.it.Await;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.TestDatabase;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.stream.IntStream;
import org.jooq.Record2;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

// Kept in dev.msgqueue: reads Housekeeper's package-private lock hook and termination state.
/** The housekeeper: one replica works per tick, failures do not stop the schedule, close() stops its thread. */
@ExtendWith(MsgQueueDatabaseExtension.class)
class HousekeeperIT {
  private static final Duration IDLE = Duration.ofHours(2);
  private final TestDatabase db;
  private final QueueRows rows;
  private final MsgQueueConfig config = MsgQueueConfig.defaults();

  HousekeeperIT(TestDatabase db) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
  }

  private List<String> idleQueues(String prefix, int count) {
    MsgQueueRepository binder = MsgQueueRepository.create(db.dataSource(), config);
    List<String> names = IntStream.range(0, count).mapToObj(i -> prefix + "-" + i).toList();
    names.forEach(queue -> binder.bindQueue(QueueSpec.autoDeleted(queue)));
    names.forEach(queue -> rows.makeIdle(queue, IDLE));
    return names;
  }

  private int expiredMessages(String queue, int count) {
    MsgQueueRepository publisher = MsgQueueRepository.create(db.dataSource(), config);
    QueueSpec spec = QueueSpec.durable(queue);
    publisher.bindQueue(spec);
    publisher.publishBatch(spec, IntStream.range(0, count).mapToObj(Integer::toString).toList());
    rows.expireItems(queue);
    return count;
  }

  @Test
  void twoReplicasTickingTogether_onlyOneWorks_theOtherSkipsWithoutWaiting() throws Exception {
    List<String> idle = idleQueues("replicas", 3);
    int expired = expiredMessages("replicas-expired", 4);
    CountDownLatch holding = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    MsgQueueRepository replicaA = MsgQueueRepository.create(db.dataSource(), config);
    // Replica B's sessions fail any lock wait after 500 ms, so a wait would fail the test rather than pass slowly.
    MsgQueueRepository replicaB =
        MsgQueueRepository.create(db.dataSourceWithOptions("-c lock_timeout=500"), config);
    Housekeeper a = Housekeeper.builder(replicaA).whileHoldingLock(() -> {
      holding.countDown();
      awaitLatch(release);
    }).build();
    Housekeeper b = Housekeeper.builder(replicaB).build();

    CompletableFuture<HousekeepingRun> tickA = CompletableFuture.supplyAsync(a::runOnce);
    assertThat(holding.await(20, TimeUnit.SECONDS)).as("A holds the lock").isTrue();
    HousekeepingRun tickB = b.runOnce();

    assertThat(tickB.outcome()).isEqualTo(Outcome.SKIPPED);
    assertThat(tickA).as("B returned while A still held the lock: it did not wait").isNotDone();
    assertThat(idle).allSatisfy(queue -> assertThat(rows.exists(queue)).isTrue());
    assertThat(b.lastRun()).contains(tickB);
    release.countDown();

    HousekeepingRun runA = tickA.get(30, TimeUnit.SECONDS);
    assertThat(runA.outcome()).isEqualTo(Outcome.COMPLETED);
    assertThat(runA.reapedQueues()).isEqualTo(idle.size());
    assertThat(runA.deletedExpiredMessages()).isEqualTo(expired);
    assertThat(idle).allSatisfy(queue -> assertThat(rows.exists(queue)).isFalse());

    HousekeepingRun nextB = b.runOnce();
    assertThat(nextB.outcome()).as("the lock is free once A's tick ended").isEqualTo(Outcome.COMPLETED);
    assertThat(nextB.reapedQueues()).isZero();
  }

  @Test
  void aTickWhoseConnectionIsKilledFailsAndTheNextTickWorks() {
    MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), config);
    AtomicBoolean killNext = new AtomicBoolean(true);
    Housekeeper housekeeper = Housekeeper.builder(repository).whileHoldingLock(() -> {
      if (killNext.getAndSet(false)) {
        terminateLockHolder();
      }
    }).build();

    HousekeepingRun failed = housekeeper.runOnce();
    assertThat(failed.outcome()).isEqualTo(Outcome.FAILED);
    assertThat(failed.failure()).isNotBlank();
    assertThat(housekeeper.consecutiveFailures()).isEqualTo(1);

    List<String> idle = idleQueues("after-failure", 2);
    HousekeepingRun next = housekeeper.runOnce();
    assertThat(next.outcome()).isEqualTo(Outcome.COMPLETED);
    assertThat(next.reapedQueues()).isEqualTo(idle.size());
    assertThat(housekeeper.consecutiveFailures()).isZero();
    assertThat(housekeeper.lastRun()).contains(next);
  }

  @Test
  void theLockTransactionHoldsNoSnapshotWhileTheJobsRun() {
    List<String> idle = idleQueues("no-snapshot", 2);
    MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), config);
    AtomicReference<Record2<String, String>> holderSeen = new AtomicReference<>();
    Housekeeper housekeeper = Housekeeper.builder(repository).whileHoldingLock(() -> {
      var activity = table(name("pg_catalog", "pg_stat_activity"));
      var pid = field(name("pid"), Integer.class);
      holderSeen.set(db.dsl()
          .select(field(name("state"), String.class), field(name("backend_xmin")).cast(String.class))
          .from(activity).where(pid.eq(lockHolderPid())).fetchSingle());
    }).build();

    HousekeepingRun run = housekeeper.runOnce();

    assertThat(run.outcome()).isEqualTo(Outcome.COMPLETED);
    assertThat(run.reapedQueues()).isEqualTo(idle.size());
    assertThat(holderSeen.get().value1()).isEqualTo("idle in transaction");
    // A snapshot kept by the lock transaction would hold back the xmin horizon of the whole database for the tick.
    assertThat(holderSeen.get().value2()).as("backend_xmin of the lock transaction").isNull();
  }

  @Test
  void theScheduleTicksOnItsOwnThreadAndCloseStopsIt() throws Exception {
    List<String> idle = idleQueues("scheduled", 2);
    MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), config);
    Housekeeper housekeeper = Housekeeper.builder(repository)
        .interval(Housekeeper.MIN_INTERVAL).firstRunJitter(Duration.ZERO).build().start();
    assertThat(housekeeper.isRunning()).isTrue();

    await("a scheduled tick reaped the idle queues", () -> idle.stream().noneMatch(rows::exists));
    await("a second tick", () -> housekeeper.lastRun().map(HousekeepingRun::reapedQueues).orElse(-1) == 0);
    housekeeper.close();

    assertThat(housekeeper.isRunning()).isFalse();
    assertThat(housekeeper.isTerminated()).as("its thread has ended").isTrue();
    HousekeepingRun last = housekeeper.lastRun().orElseThrow();
    List<String> later = idleQueues("after-close", 1);
    Thread.sleep(Housekeeper.MIN_INTERVAL.multipliedBy(3).toMillis());
    assertThat(housekeeper.lastRun()).as("no tick after close").contains(last);
    assertThat(rows.exists(later.get(0))).isTrue();
    assertThatThrownBy(housekeeper::start).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void aRepositoryOnASingleConnectionIsRefused() throws Exception {
    try (Connection connection = db.connect()) {
      MsgQueueRepository single = MsgQueueRepository.create(DSL.using(connection, SQLDialect.POSTGRES), config);
      assertThatThrownBy(() -> Housekeeper.builder(single)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("single connection");
    }
  }

  /** The backend holding the housekeeping lock: the one advisory lock granted in this test's database. */
  private int lockHolderPid() {
    var locks = table(name("pg_catalog", "pg_locks"));
    var databases = table(name("pg_catalog", "pg_database"));
    var pid = field(name("pg_locks", "pid"), Integer.class);
    List<Integer> holder = db.dsl().select(pid).from(locks)
        .where(field(name("pg_locks", "locktype"), String.class).eq("advisory"))
        .and(field(name("pg_locks", "granted"), Boolean.class).isTrue())
        .and(field(name("pg_locks", "database")).eq(DSL.select(field(name("pg_database", "oid"))).from(databases)
            .where(field(name("pg_database", "datname"), String.class).eq(db.name()))))
        .fetch(pid);
    assertThat(holder).hasSize(1);
    return holder.get(0);
  }

  /** Terminates the backend holding the housekeeping lock and waits until it is gone. */
  private void terminateLockHolder() {
    var activity = table(name("pg_catalog", "pg_stat_activity"));
    var pid = field(name("pid"), Integer.class);
    int holder = lockHolderPid();
    db.dsl().select(function("pg_terminate_backend", Boolean.class, DSL.val(holder))).fetch();
    await("the terminated lock holder gone", () -> db.dsl().fetchCount(activity, pid.eq(holder)) == 0);
  }

  private static void awaitLatch(CountDownLatch latch) {
    try {
      assertThat(latch.await(30, TimeUnit.SECONDS)).isTrue();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private static void await(String what, BooleanSupplier condition) {
    Await.until(what, Duration.ofSeconds(30), condition);
  }
}
