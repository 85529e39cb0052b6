package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.it.Await;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.UnaryOperator;
import java.util.stream.IntStream;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

// Kept in dev.msgqueue: reads Subscriber's package-private ack counter and closing state.
/**
 * The {@link Subscriber}'s ack statements against PostgreSQL: none carries more than {@code batchSize} receipts, and
 * one that fails (cancelled at the statement timeout while another transaction holds its rows, or its connection
 * terminated) is retried or its messages released, never left ASSIGNED. Every ack and release statement is seen
 * by a jOOQ listener on the repository's own context, which counts the receipts it carries (the length of its id
 * array) and can make it fail for real before it runs. The subscribers run in lease mode: the default mode's claims
 * take their messages, so it writes no ack statement (SubscriberPipelineIT asserts that).
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class SubscriberAckBoundsIT {
  /** A bound on liveness, not a speed claim: generous, since other builds share the machine. */
  private static final long AWAIT_SECONDS = 120;
  private static final Duration POLL = Duration.ofMillis(50);
  private static final Duration STATEMENT_TIMEOUT = Duration.ofMillis(300);
  /** Longer than any test: a message comes back only by a release, never by a lease running out. */
  private static final Duration LEASE = Duration.ofMinutes(10);

  private final TestDatabase db;
  private final HikariDataSource pool;
  private final ReceiptStatements statements = new ReceiptStatements();
  private final MsgQueueRepository repository;
  /**
   * Publishes the test's messages with the default timeouts: a 1,000-row insert can outlast the subscriber's short
   * statement timeout while other test classes load the server, and publishing is not what these tests time out.
   */
  private final MsgQueueRepository publisher;
  private final List<AutoCloseable> toClose = new ArrayList<>();

  SubscriberAckBoundsIT(TestDatabase db) {
    this.db = db;
    this.pool = db.pool(8);
    MsgQueueConfig config = MsgQueueConfig.builder()
        .statementTimeout(STATEMENT_TIMEOUT)
        .lockTimeout(STATEMENT_TIMEOUT)
        .build();
    this.repository = RepositoryFixture.listenedRepository(pool, statements, config);
    this.publisher = MsgQueueRepository.create(pool, MsgQueueConfig.builder().build());
  }

  @AfterEach
  void closeAll() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    pool.close();
  }

  @Test
  void aBacklogOfAcksIsSeveralStatementsOfAtMostBatchSizeReceipts() throws Exception {
    QueueSpec spec = QueueSpec.durable("backlog");
    List<Long> ids = publish(spec, 300);
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    CountDownLatch allHandled = new CountDownLatch(ids.size());
    // The first ack statement waits until every message is handled, so the other 300 - its own acks pile up behind
    // it: the backlog the flushes that follow must split.
    statements.beforeFirstAck = () -> assertThat(allHandled.await(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
    Subscriber subscriber = started(Subscriber.builder(repository, spec, message -> {
      handled.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet();
      allHandled.countDown();
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(4).batchSize(25).pollInterval(POLL).mode(ConsumeMode.LEASE).lease(LEASE));

    await("every message acked", () -> itemsOf(spec) == 0);
    subscriber.close();

    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isEqualTo(1));
    assertThat(statements.ackSizes).allSatisfy(size -> assertThat(size).isBetween(1, 25));
    assertThat(statements.ackSizes.stream().mapToInt(Integer::intValue).sum()).isEqualTo(ids.size());
    assertThat(statements.ackSizes).hasSizeGreaterThanOrEqualTo(ids.size() / 25);
    assertThat(subscriber.acked()).isEqualTo(ids.size());
  }

  @Test
  void closeFlushesABacklogInStatementsOfAtMostBatchSizeReceipts() throws Exception {
    QueueSpec spec = QueueSpec.durable("close-backlog");
    List<Long> ids = publish(spec, 120);
    CountDownLatch allHandled = new CountDownLatch(ids.size());
    AtomicReference<Subscriber> subscriber = new AtomicReference<>();
    // The housekeeper's first flush waits until every handler finished and close() began: close() flushes the rest.
    statements.beforeFirstAck = () -> {
      assertThat(allHandled.await(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
      await("close() called", () -> subscriber.get().isClosing());
    };
    subscriber.set(Subscriber.builder(repository, spec, message -> allHandled.countDown()).mode(ConsumeMode.AT_MOST_ONCE)
        .concurrency(4).batchSize(10).ackDelay(Duration.ofSeconds(1)).pollInterval(POLL).mode(ConsumeMode.LEASE).lease(LEASE).start());
    assertThat(allHandled.await(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
    assertThat(subscriber.get().close(Duration.ofSeconds(30))).isTrue();

    assertThat(itemsOf(spec)).isZero();
    assertThat(statements.ackSizes).allSatisfy(size -> assertThat(size).isBetween(1, 10));
    assertThat(statements.ackSizes.stream().mapToInt(Integer::intValue).sum()).isEqualTo(ids.size());
    assertThat(subscriber.get().acked()).isEqualTo(ids.size());
  }

  @Test
  void anAckCancelledAtTheStatementTimeoutIsRetriedAndItsMessagesDeletedOnce() throws Exception {
    QueueSpec spec = QueueSpec.durable("retried");
    List<Long> ids = publish(spec, 40);
    // Cancelled at the statement timeout twice, the third attempt finds the rows free.
    Map<Long, AtomicInteger> handled = handleAllWithFirstAckLocked(spec, 2);

    assertThat(statements.targetFailures.get()).isEqualTo(2);
    assertThat(statements.targetAttempts.get()).isEqualTo(3);
    assertThat(statements.releaseSizes).isEmpty();
    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isEqualTo(1));
    assertThat(statements.ackSizes).allSatisfy(size -> assertThat(size).isBetween(1, 10));
  }

  @Test
  void closeRetriesAnAckThatFailedAndReturnsOnceItSucceeds() throws Exception {
    QueueSpec spec = QueueSpec.durable("close-retries");
    List<Long> ids = publish(spec, 20);
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    CountDownLatch allHandled = new CountDownLatch(ids.size());
    AtomicReference<Subscriber> subscriber = new AtomicReference<>();
    try (RowLocker locker = new RowLocker(db.connect())) {
      // The first ack runs only once close() began, and its rows are locked for two attempts: close() is left with
      // a failed ack to retry (unless the housekeeper still gets to it first), and must return once it succeeds.
      statements.failFirstAck(2, locker);
      statements.beforeFirstAck = () -> await("close() called", () -> subscriber.get().isClosing());
      subscriber.set(Subscriber.builder(repository, spec, message -> {
        handled.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet();
        allHandled.countDown();
      }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(2).batchSize(20).ackDelay(Duration.ofSeconds(1)).pollInterval(POLL).mode(ConsumeMode.LEASE).lease(LEASE).start());
      toClose.add(subscriber.get());
      assertThat(allHandled.await(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
      assertThat(CompletableFuture.supplyAsync(() -> subscriber.get().close(Duration.ofSeconds(30)))
          .get(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
    }

    assertThat(statements.targetFailures.get()).isEqualTo(2);
    assertThat(statements.targetAttempts.get()).isEqualTo(3);
    assertThat(itemsOf(spec)).isZero();
    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isEqualTo(1));
  }

  @Test
  void anAckThatKeepsFailingHandsItsMessagesBackInsteadOfLeavingThemAssigned() throws Exception {
    QueueSpec spec = QueueSpec.durable("handed-back");
    List<Long> ids = publish(spec, 30);
    // Every ack attempt of the first batch is cancelled; the lock goes with the last, so the release succeeds.
    Map<Long, AtomicInteger> handled = handleAllWithFirstAckLocked(spec, 5);

    assertThat(statements.targetFailures.get()).isEqualTo(5);
    List<Long> target = statements.targetIds();
    assertThat(statements.releaseSizes).containsExactly(target.size());
    // Handed back, so delivered once more, then acked.
    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    handled.forEach((id, count) -> assertThat(count.get()).as("deliveries of %s", id)
        .isEqualTo(target.contains(id) ? 2 : 1));
  }

  @Test
  void leaseModeAnAckOnAKilledConnectionIsRetriedNotRedeliveredAfterTheLease() throws Exception {
    QueueSpec spec = QueueSpec.durable("lease-killed");
    List<Long> ids = publish(spec, 40);
    Map<Long, AtomicInteger> handled;
    try (Connection admin = db.connect()) {
      statements.killFirstAck(admin);
      // The lease outlasts the wait in handleAll: a message is acked by the retry, or the test fails.
      handled = handleAll(spec, builder -> builder.concurrency(2).batchSize(10).mode(ConsumeMode.LEASE).lease(Duration.ofMinutes(10)));
    }

    assertThat(statements.targetFailures.get()).isEqualTo(1);
    assertThat(statements.targetAttempts.get()).isEqualTo(2);
    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isEqualTo(1));
  }

  @Test
  void stressEveryFifthAckLosesItsConnectionAndNothingIsLostOrLeftAssigned() throws Exception {
    QueueSpec spec = QueueSpec.durable("ack-stress");
    List<Long> ids = publish(spec, 1_500);
    Map<Long, AtomicInteger> handled;
    try (Connection admin = db.connect()) {
      statements.killEveryNthFirstAttempt(5, admin);
      handled = handleAll(spec, builder -> builder.concurrency(8).batchSize(7));
    }

    assertThat(statements.targetFailures.get()).isGreaterThanOrEqualTo(10);
    assertThat(statements.ackSizes).allSatisfy(size -> assertThat(size).isBetween(1, 7));
    assertThat(statements.releaseSizes).isEmpty();
    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isEqualTo(1));
  }

  private List<Long> publish(QueueSpec spec, int count) {
    publisher.bindQueue(spec);
    List<Long> ids = new ArrayList<>();
    for (int from = 0; from < count; from += 1_000) {
      ids.addAll(publisher.publishBatch(spec,
          IntStream.range(from, Math.min(count, from + 1_000)).mapToObj(Integer::toString).toList()));
    }
    return ids;
  }

  /**
   * Runs a subscriber with {@code settings} until the queue is empty (every message acked, none left ASSIGNED or
   * PENDING), closes it, and returns how often each message was handled.
   */
  private Map<Long, AtomicInteger> handleAll(QueueSpec spec, UnaryOperator<Subscriber.Builder> settings)
      throws InterruptedException {
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    Subscriber subscriber = started(settings.apply(Subscriber.builder(repository, spec,
        message -> handled.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet()).mode(ConsumeMode.AT_MOST_ONCE)
        .pollInterval(POLL).mode(ConsumeMode.LEASE).lease(LEASE)));
    await("every message acked", () -> itemsOf(spec) == 0);
    subscriber.close();
    return handled;
  }

  /**
   * {@link #handleAll} (concurrency 2, batch 10) while another transaction locks the rows of the first ack statement
   * for its first {@code lockedAttempts} attempts, so each is cancelled at the statement timeout.
   */
  private Map<Long, AtomicInteger> handleAllWithFirstAckLocked(QueueSpec spec, int lockedAttempts) throws Exception {
    try (RowLocker locker = new RowLocker(db.connect())) {
      statements.failFirstAck(lockedAttempts, locker);
      return handleAll(spec, builder -> builder.concurrency(2).batchSize(10));
    }
  }

  private Subscriber started(Subscriber.Builder builder) {
    Subscriber subscriber = builder.start();
    toClose.add(subscriber);
    return subscriber;
  }

  /** Rows of the queue in any status: zero once every message was acked (none left ASSIGNED or PENDING). */
  private int itemsOf(QueueSpec spec) {
    return db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name()));
  }

  private static void await(String what, BooleanSupplier condition) {
    Await.until(what, Duration.ofSeconds(AWAIT_SECONDS), condition);
  }

  /** Something a test runs in the listener before a statement; may block or throw an assertion error. */
  @FunctionalInterface
  private interface Step {
    void run() throws Exception;
  }

  /** Another transaction holding FOR UPDATE locks on item rows, so a statement on them waits until it is cancelled. */
  private static final class RowLocker implements AutoCloseable {
    private final Connection connection;
    private boolean holding;

    RowLocker(Connection connection) throws SQLException {
      this.connection = connection;
      connection.setAutoCommit(false);
    }

    synchronized void lock(Long[] ids) throws SQLException {
      try (PreparedStatement lock = connection.prepareStatement(
          "SELECT id FROM \"MessageQueueItem\" WHERE id = ANY(?) FOR UPDATE")) {
        lock.setArray(1, connection.createArrayOf("bigint", ids));
        try (ResultSet rows = lock.executeQuery()) {
          int locked = 0;
          while (rows.next()) {
            locked++;
          }
          assertThat(locked).isEqualTo(ids.length);
        }
      }
      holding = true;
    }

    synchronized void unlock() throws SQLException {
      if (holding) {
        connection.commit();
        holding = false;
      }
    }

    @Override
    public void close() throws SQLException {
      unlock();
      connection.close();
    }
  }

  /**
   * Sees every receipt-carrying statement of the repository: acks ({@code DELETE ... USING unnest(ids, deadlines)})
   * and releases ({@code UPDATE ... SET status = 'PENDING' ... FROM unnest(...)}), with how many receipts each
   * carries. It can make attempts of one ack fail for real: by a row lock held until they are cancelled, or by
   * terminating the statement's connection just before it runs. The target is the first ack statement (or every n-th
   * new one), recognised again on its retries by its id array.
   */
  private static final class ReceiptStatements implements ExecuteListener {
    private static final long serialVersionUID = 1L;

    final List<Integer> ackSizes = new CopyOnWriteArrayList<>();
    final List<Integer> releaseSizes = new CopyOnWriteArrayList<>();
    final AtomicInteger targetAttempts = new AtomicInteger();
    final AtomicInteger targetFailures = new AtomicInteger();
    volatile Step beforeFirstAck;
    private final AtomicInteger newAcks = new AtomicInteger();
    private final Map<List<Long>, Boolean> targets = new ConcurrentHashMap<>();
    private volatile List<Long> firstTarget;
    private volatile int failuresWanted;
    private volatile RowLocker locker;
    private volatile Connection killer;
    private volatile int killEvery;

    void failFirstAck(int times, RowLocker rowLocker) {
      failuresWanted = times;
      locker = rowLocker;
    }

    void killFirstAck(Connection admin) {
      failuresWanted = 1;
      killer = admin;
    }

    void killEveryNthFirstAttempt(int n, Connection admin) {
      killEvery = n;
      killer = admin;
    }

    List<Long> targetIds() {
      return firstTarget;
    }

    @Override
    public void executeStart(ExecuteContext ctx) {
      if (isRelease(ctx)) {
        releaseSizes.add(idsOf(ctx).length);
        return;
      }
      if (!isAck(ctx)) {
        return;
      }
      Long[] ids = idsOf(ctx);
      ackSizes.add(ids.length);
      List<Long> key = List.of(ids);
      try {
        if (ackSizes.size() == 1 && beforeFirstAck != null) {
          beforeFirstAck.run();
        }
        if (killEvery > 0) {
          if (!targets.containsKey(key) && newAcks.incrementAndGet() % killEvery == 0) {
            targets.put(key, Boolean.TRUE);
            targetAttempts.incrementAndGet();
            kill(ctx);
          }
          return;
        }
        if (failuresWanted == 0) {
          return;
        }
        if (firstTarget == null) {
          firstTarget = key;
        }
        if (!firstTarget.equals(key)) {
          return;
        }
        int attempt = targetAttempts.incrementAndGet();
        if (attempt > failuresWanted) {
          return;
        }
        if (locker != null && attempt == 1) {
          locker.lock(ids);
        } else if (killer != null) {
          kill(ctx);
        }
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }

    @Override
    public void exception(ExecuteContext ctx) {
      if (!isAck(ctx)) {
        return;
      }
      List<Long> key = List.of(idsOf(ctx));
      boolean target = key.equals(firstTarget) || targets.containsKey(key);
      if (target && targetFailures.incrementAndGet() == failuresWanted && locker != null) {
        try {
          locker.unlock();
        } catch (SQLException e) {
          throw new IllegalStateException(e);
        }
      }
    }

    /** Terminates the statement's own backend and waits until it is gone, so the statement fails on a dead socket. */
    private void kill(ExecuteContext ctx) throws SQLException {
      int pid;
      try (Statement own = ctx.connection().createStatement();
          ResultSet row = own.executeQuery("SELECT pg_backend_pid()")) {
        row.next();
        pid = row.getInt(1);
      }
      synchronized (killer) {
        try (PreparedStatement terminate = killer.prepareStatement("SELECT pg_terminate_backend(?, 10000)")) {
          terminate.setInt(1, pid);
          try (ResultSet row = terminate.executeQuery()) {
            row.next();
            assertThat(row.getBoolean(1)).isTrue();
          }
        }
      }
    }

    private static boolean isAck(ExecuteContext ctx) {
      String sql = sqlOf(ctx);
      return sql.startsWith("delete from \"messagequeueitem\"") && sql.contains("unnest");
    }

    private static boolean isRelease(ExecuteContext ctx) {
      String sql = sqlOf(ctx);
      return sql.startsWith("update \"messagequeueitem\"") && sql.contains("unnest") && sql.contains("'pending'");
    }

    private static String sqlOf(ExecuteContext ctx) {
      return ctx.sql() == null ? "" : ctx.sql().toLowerCase(java.util.Locale.ROOT);
    }

    private static Long[] idsOf(ExecuteContext ctx) {
      return ctx.query().getBindValues().stream()
          .filter(Long[].class::isInstance)
          .map(Long[].class::cast)
          .findFirst()
          .orElseThrow(() -> new AssertionError("no id array in " + ctx.sql()));
    }
  }
}
