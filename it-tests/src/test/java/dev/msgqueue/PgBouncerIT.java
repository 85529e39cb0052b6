package dev.msgqueue;

import static dev.msgqueue.it.MessageIds.assertSameIds;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.internal.publish.Publisher;
import dev.msgqueue.it.Await;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.PgBouncer;
import dev.msgqueue.it.TestDatabase;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

// Kept in dev.msgqueue: reads Subscriber's package-private wake-up counter.
/**
 * The whole API through PgBouncer in transaction pooling mode (a test-owned PgBouncer in front of the test server),
 * in the supported setup: the repository and subscribers on a pool of PgBouncer connections with
 * {@code prepareThreshold=0}, the {@link WakeupListener}'s LISTEN connection directly to PostgreSQL (a LISTEN through
 * transaction pooling registers on whichever server connection ran it and is then lost to the client).
 *
 * <p>Tagged {@code pgbouncer}: it runs only when selected ({@code mvn verify -Dmsgqueue.pgbouncer=true}, as
 * {@code .ci/run} does), and then fails if PgBouncer is not installed.
 */
@Tag("pgbouncer")
@ExtendWith(MsgQueueDatabaseExtension.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PgBouncerIT {
  private static final int SERVER_CONNECTIONS = 3;
  private static final org.jooq.Table<org.jooq.Record> LEDGER = org.jooq.impl.DSL.table(org.jooq.impl.DSL.name("pgbouncerLedger"));
  private static final org.jooq.Field<Long> LEDGER_ID =
      org.jooq.impl.DSL.field(org.jooq.impl.DSL.name("pgbouncerLedger", "id"), Long.class);
  private final TestDatabase db;
  private PgBouncer bouncer;
  private HikariDataSource pooled;
  private HikariDataSource single;

  PgBouncerIT(TestDatabase db) {
    this.db = db;
  }

  @BeforeAll
  void startPgBouncer() {
    bouncer = PgBouncer.inFrontOf(db, SERVER_CONNECTIONS);
    pooled = pool(db.name(), 16);
    single = pool(db.name() + "_single", 4);
  }

  @AfterAll
  void stopPgBouncer() {
    if (pooled != null) {
      pooled.close();
      single.close();
    }
    if (bouncer != null) {
      bouncer.close();
    }
  }

  private HikariDataSource pool(String alias, int size) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(bouncer.jdbcUrl(alias));
    config.setMaximumPoolSize(size);
    config.setMinimumIdle(0);
    config.setPoolName("pgbouncer-" + alias);
    return new HikariDataSource(config);
  }

  private static MsgQueueRepository repository(HikariDataSource dataSource) {
    return MsgQueueRepository.create(dataSource, MsgQueueConfig.builder()
        .keepAliveInterval(Duration.ofMillis(50))
        .reapIdleThreshold(Duration.ofMillis(200))
        .build());
  }

  @Test
  void clientsShareServerConnectionsTransactionByTransaction() throws Exception {
    // Two client connections of the one-server-connection pool, both open at once, run on the same backend: that is
    // transaction pooling (in session pooling the second would wait for the first to disconnect).
    try (Connection first = single.getConnection(); Connection second = single.getConnection()) {
      assertThat(backendPid(second)).isEqualTo(backendPid(first));
    }
  }

  @Test
  void publishClaimAndMaintenanceThroughPgBouncer() throws Exception {
    MsgQueueRepository repository = repository(pooled);
    DSLContext viaBouncer = DSL.using(pooled, SQLDialect.POSTGRES);
    QueueSpec orders = QueueSpec.durable("orders");
    repository.bindQueue(orders);
    // Each statement shape runs well past pgjdbc's default prepareThreshold (5), where it would name a server-side
    // statement that the next transaction's server connection does not have.
    List<Long> published = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      published.add(repository.publish(orders, "{\"n\": " + i + "}"));
      published.addAll(repository.publishBatch(orders, List.of("{\"b\": " + i + "}", "{\"c\": " + i + "}")));
      int n = i;
      published.add(viaBouncer.transactionResult(
          tx -> repository.inTransaction(tx.dsl()).publish(orders, "{\"tx\": " + n + "}")));
    }
    assertThatThrownBy(() -> viaBouncer.transaction(tx -> {
      repository.inTransaction(tx.dsl()).publish(orders, "{\"rolled\": \"back\"}");
      throw new IllegalStateException("roll back");
    })).hasMessage("roll back");

    // A missing durable queue inside a caller's transaction raises the typed error and leaves the transaction usable.
    long afterMissing = viaBouncer.transactionResult(tx -> {
      TransactionalQueue inTx = repository.inTransaction(tx.dsl());
      assertThatThrownBy(() -> inTx.publish(QueueSpec.durable("missing"), "{}"))
          .isInstanceOf(QueueNotFoundException.class);
      return inTx.publish(orders, "{\"after\": \"missing\"}");
    });
    published.add(afterMissing);

    // heal, in autocommit and in a caller's transaction
    long healed = repository.publish(QueueSpec.autoDeleted("healed"), "{}");
    long healedInTx = viaBouncer.transactionResult(
        tx -> repository.inTransaction(tx.dsl()).publish(QueueSpec.autoDeleted("healed-tx"), "{}"));
    assertThat(repository.claim("healed", 5)).extracting(ClaimedMessage::id).containsExactly(healed);
    assertThat(repository.claim("healed-tx", 5)).extracting(ClaimedMessage::id).containsExactly(healedInTx);

    // claim / release / re-claim / ack in lease mode, and compatible-mode claims
    List<Long> handled = new ArrayList<>();
    boolean released = false;
    while (true) {
      List<ClaimedMessage> claimed = repository.claim("orders", 7, Duration.ofSeconds(30));
      if (claimed.isEmpty()) {
        break;
      }
      if (!released) {
        assertThat(repository.release(claimed.get(0), Duration.ZERO)).isTrue();
        claimed = claimed.subList(1, claimed.size());
        released = true;
      }
      assertThat(repository.ack(claimed)).hasSameSizeAs(claimed);
      claimed.forEach(message -> handled.add(message.id()));
      assertThat(repository.keepAlive("orders")).isTrue();
    }
    assertSameIds("handled vs published", published, handled);

    // maintenance
    for (int i = 0; i < 10; i++) {
      repository.publish(orders, "{}", PublishOptions.defaults().withTtl(Duration.ofMillis(1)));
    }
    repository.bindQueue(QueueSpec.autoDeleted("idle"));
    Thread.sleep(400);
    assertThat(repository.cleanUpExpiredMessages()).isEqualTo(10);
    assertThat(repository.reapIdleQueues()).contains("idle");
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.eq("idle"))).isZero();

    // the Housekeeper: its advisory lock, then both jobs
    repository.bindQueue(QueueSpec.autoDeleted("idle-for-housekeeper"));
    repository.publish(orders, "{\"n\": \"short-lived 2\"}", PublishOptions.defaults().withTtl(Duration.ofMillis(1)));
    Thread.sleep(400);
    try (Housekeeper housekeeper = Housekeeper.builder(repository).build()) {
      HousekeepingRun run = housekeeper.runOnce();
      assertThat(run.outcome()).as("%s", run).isEqualTo(HousekeepingRun.Outcome.COMPLETED);
      assertThat(run.reapedQueues()).isGreaterThanOrEqualTo(1);
      assertThat(run.deletedExpiredMessages()).isGreaterThanOrEqualTo(1);
    }
  }

  @Test
  void noSessionStateOutlivesATransaction() throws Exception {
    // Every call on the one-server-connection pool, so the server connection is shared with the observer below.
    MsgQueueRepository repository = repository(single);
    QueueSpec queue = QueueSpec.autoDeleted("session-state");
    repository.bindQueue(queue);
    repository.publish(queue, "{}");
    repository.publishBatch(queue, List.of("{}", "{}"));
    repository.publishBatch(queue, Collections.nCopies(Publisher.COPY_MIN_BATCH, "{}")); // by COPY: SET LOCAL
    DSL.using(single, SQLDialect.POSTGRES).transaction(tx -> repository.inTransaction(tx.dsl()).publish(queue, "{}"));
    repository.ack(repository.claim(queue.name(), 10, Duration.ofSeconds(30)));
    repository.keepAlive(queue.name());
    repository.cleanUpExpiredMessages(); // sets lock_timeout for its transaction
    repository.reapIdleQueues(); // likewise

    try (Connection observer = single.getConnection(); Statement statement = observer.createStatement();
         ResultSet settings = statement.executeQuery(
             "SELECT name FROM pg_settings WHERE source = 'session' AND name NOT IN"
                 + " ('application_name', 'client_encoding', 'DateStyle', 'IntervalStyle', 'TimeZone',"
                 + " 'standard_conforming_strings', 'extra_float_digits')")) {
      List<String> changed = new ArrayList<>();
      while (settings.next()) {
        changed.add(settings.getString(1));
      }
      assertThat(changed).as("session settings left on the shared server connection").isEmpty();
      try (ResultSet channels = statement.executeQuery("SELECT count(*) FROM pg_listening_channels()")) {
        channels.next();
        assertThat(channels.getInt(1)).as("LISTEN channels left on the shared server connection").isZero();
      }
    }
  }

  @Test
  void subscribersThroughPgBouncerWithTheListenerDirect() throws Exception {
    subscribersThroughPgBouncer(ConsumeMode.LEASE, "events");
  }

  /**
   * The held-transaction mode through PgBouncer in transaction pooling: one transaction per batch (its lock, the
   * handlers' writes, the delete), on whichever server connection PgBouncer lends it; its SET LOCAL limits end with it.
   */
  @Test
  void heldTransactionSubscribersThroughPgBouncer() throws Exception {
    subscribersThroughPgBouncer(ConsumeMode.TRANSACTION, "held-events");
  }

  private void subscribersThroughPgBouncer(ConsumeMode mode, String queueName) throws Exception {
    // The handlers' own table: DDL, which jOOQ's typed API does not cover for an ad-hoc table.
    db.dsl().execute("CREATE TABLE IF NOT EXISTS \"pgbouncerLedger\" (id bigint NOT NULL)");
    MsgQueueRepository repository = repository(pooled);
    QueueSpec queue = QueueSpec.durable(queueName);
    int publishers = 4;
    int perPublisher = 60;
    Map<Long, AtomicInteger> deliveries = new ConcurrentHashMap<>();
    Set<Long> published = ConcurrentHashMap.newKeySet();
    // The supported setup: LISTEN on a direct connection to PostgreSQL, everything else through PgBouncer.
    try (WakeupListener listener = WakeupListener.start(() -> DriverManager.getConnection(db.jdbcUrl()));
         Subscriber first = subscriber(repository, queue, listener, deliveries, mode);
         Subscriber second = subscriber(repository, queue, listener, deliveries, mode)) {
      awaitTrue(listener::isListening, "the LISTEN connection is up");
      ExecutorService executor = Executors.newFixedThreadPool(publishers);
      List<Future<?>> running = new ArrayList<>();
      for (int p = 0; p < publishers; p++) {
        int publisher = p;
        running.add(executor.submit(() -> {
          for (int i = 0; i < perPublisher; i++) {
            String payload = "{\"p\": " + publisher + ", \"i\": " + i + "}";
            if (i % 3 == 0) {
              published.addAll(repository.publishBatch(queue, List.of(payload, payload)));
            } else {
              published.add(repository.publish(queue, payload));
            }
          }
          return null;
        }));
      }
      for (Future<?> future : running) {
        future.get(60, TimeUnit.SECONDS);
      }
      executor.shutdown();
      awaitTrue(() -> deliveries.keySet().containsAll(published), "every published message handled");
      assertThat(first.wakeups() + second.wakeups()).as("wake-ups received").isPositive();
    }
    assertSameIds("delivered vs published", published, deliveries.keySet());
    List<Long> deliveredTwice = deliveries.entrySet().stream()
        .filter(delivery -> delivery.getValue().get() != 1).map(Map.Entry::getKey).sorted().toList();
    assertThat(deliveredTwice.size())
        .as("messages delivered more than once (first: %s)", deliveredTwice.stream().limit(10).toList()).isZero();
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(queueName))).isZero();
    if (mode == ConsumeMode.TRANSACTION) {
      assertThat(db.dsl().fetchCount(LEDGER, LEDGER_ID.in(published))).as("the handlers' writes, once each")
          .isEqualTo(published.size());
    }
  }

  private static Subscriber subscriber(MsgQueueRepository repository, QueueSpec queue, WakeupListener listener,
      Map<Long, AtomicInteger> deliveries, ConsumeMode mode) {
    Subscriber.Builder builder = mode == ConsumeMode.TRANSACTION
        ? Subscriber.builder(repository, queue, (message, transaction) -> {
          // A write of the handler's own in the held transaction: it commits with the message's removal.
          transaction.insertInto(LEDGER, LEDGER_ID).values(message.id()).execute();
          deliveries.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet();
        })
        : Subscriber.builder(repository, queue,
            message -> deliveries.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet())
            .mode(ConsumeMode.LEASE).lease(Duration.ofSeconds(60));
    return builder
        .concurrency(4)
        .batchSize(16)
        .pollInterval(Duration.ofSeconds(5))
        .wakeups(listener)
        .start();
  }

  private static int backendPid(Connection connection) throws Exception {
    try (Statement statement = connection.createStatement();
         ResultSet pid = statement.executeQuery("SELECT pg_backend_pid()")) {
      pid.next();
      return pid.getInt(1);
    }
  }

  private static void awaitTrue(BooleanSupplier condition, String what) {
    Await.until(what, Duration.ofSeconds(60), condition);
  }
}
