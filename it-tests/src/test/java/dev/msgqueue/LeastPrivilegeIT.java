package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.internal.publish.Publisher;
import dev.msgqueue.it.Await;
import dev.msgqueue.it.Migrations;
import dev.msgqueue.it.PostgresServer;
import dev.msgqueue.it.TestDatabase;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.postgresql.ds.PGSimpleDataSource;

// Kept in dev.msgqueue: reads Subscriber's package-private wake-up counter.
/**
 * The library under least privilege: a migration role applies the changelog and runs the shipped grants snippet
 * ({@value #GRANTS}); an application role holding only those grants (no CREATE on the schema, no TEMPORARY on the
 * database, not the tables' owner) runs the whole public API, and no input it passes through the API makes it run DDL.
 * Roles are cluster-wide, so both get a random suffix and are dropped afterwards.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class LeastPrivilegeIT {
  static final String GRANTS = "db/msgqueue/app-role-grants.sql";
  private static final String PASSWORD = "least-privilege";
  private static final String INSUFFICIENT_PRIVILEGE = "42501";

  private final String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 10);
  private final String migrator = "mq_migrator_" + suffix;
  private final String app = "mq_app_" + suffix;
  private final String appWithoutSequence = "mq_noseq_" + suffix;
  private TestDatabase db;
  private PGSimpleDataSource appDataSource;

  @BeforeAll
  void createRolesAndMigrate() throws Exception {
    db = TestDatabase.createEmpty("LeastPrivilegeIT");
    // Roles, schema and database privileges: DDL and DCL, which jOOQ does not model, hence plain SQL.
    try (Connection admin = db.connect(); Statement statement = admin.createStatement()) {
      statement.execute("CREATE ROLE " + migrator + " LOGIN PASSWORD '" + PASSWORD + "'");
      statement.execute("CREATE ROLE " + app + " LOGIN PASSWORD '" + PASSWORD + "'");
      statement.execute("CREATE ROLE " + appWithoutSequence + " LOGIN PASSWORD '" + PASSWORD + "'");
      // As on PostgreSQL 15+ by default, and stricter: nobody but the migrator may create objects or temp tables.
      statement.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC");
      statement.execute("REVOKE TEMPORARY ON DATABASE \"" + db.name() + "\" FROM PUBLIC");
      // The migration role owns the schema: it creates the tables and grants their use.
      statement.execute("ALTER SCHEMA public OWNER TO " + migrator);
    }
    try (Connection migration = dataSourceFor(migrator).getConnection()) {
      Migrations.update(migration);
      migration.setAutoCommit(true); // Liquibase leaves it off
      try (Statement statement = migration.createStatement()) {
        statement.execute(grantsSnippet().replace("msgqueue_app", app));
        // The grants of a service that applied them before they named the sequence.
        String withoutSequence = grantsSnippet().lines().filter(line -> !line.contains("ON SEQUENCE"))
            .collect(Collectors.joining("\n"));
        assertThat(withoutSequence).isNotEqualTo(grantsSnippet());
        statement.execute(withoutSequence.replace("msgqueue_app", appWithoutSequence));
      }
    }
    appDataSource = dataSourceFor(app);
  }

  @AfterAll
  void dropDatabaseAndRoles() throws SQLException {
    if (db == null) {
      return;
    }
    db.close(); // the roles own objects in it: drop it first
    try (Connection admin = PostgresServer.get().adminConnection(); Statement statement = admin.createStatement()) {
      statement.execute("DROP ROLE IF EXISTS " + app);
      statement.execute("DROP ROLE IF EXISTS " + appWithoutSequence);
      statement.execute("DROP ROLE IF EXISTS " + migrator);
    }
  }

  private PGSimpleDataSource dataSourceFor(String role) {
    PGSimpleDataSource dataSource = new PGSimpleDataSource();
    dataSource.setUrl(db.jdbcUrl());
    dataSource.setUser(role); // after setUrl, which would otherwise keep the URL's user
    dataSource.setPassword(PASSWORD);
    dataSource.setApplicationName("least-privilege");
    return dataSource;
  }

  private static String grantsSnippet() throws IOException {
    try (InputStream in = LeastPrivilegeIT.class.getClassLoader().getResourceAsStream(GRANTS)) {
      assertThat(in).as("the grants snippet %s on the classpath", GRANTS).isNotNull();
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  private DSLContext asApp() {
    return DSL.using(appDataSource, SQLDialect.POSTGRES);
  }

  @Test
  void theApplicationRoleIsNeitherSuperuserNorOwner() {
    DSLContext dsl = asApp();
    assertThat(dsl.fetchValue("SELECT current_user")).isEqualTo(app);
    assertThat(dsl.fetchValue("SELECT rolsuper OR rolcreatedb OR rolcreaterole FROM pg_roles WHERE rolname = {0}",
        app)).isEqualTo(false);
    assertThat(dsl.fetchValue("SELECT has_schema_privilege('public', 'CREATE')")).isEqualTo(false);
    assertThat(dsl.fetchValue("SELECT has_database_privilege(current_database(), 'TEMPORARY')")).isEqualTo(false);
    assertThat(dsl.fetchValue("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'MessageQueueItem'"))
        .isEqualTo(migrator);
  }

  @Test
  void withoutUsageOnTheSequenceLargeBatchesAreInsertedInstead() {
    MsgQueueRepository repository = MsgQueueRepository.create(dataSourceFor(appWithoutSequence),
        MsgQueueConfig.defaults());
    QueueSpec queue = QueueSpec.durable("batches-without-sequence");
    repository.bindQueue(queue);
    List<String> payloads = new ArrayList<>();
    for (int i = 0; i < Publisher.COPY_MIN_BATCH; i++) {
      payloads.add("{\"n\": " + i + "}");
    }

    List<Long> first = repository.publishBatch(queue, payloads);
    List<Long> second = repository.publishBatch(queue, payloads);

    assertThat(first).hasSize(payloads.size()).isSorted();
    assertThat(second).hasSize(payloads.size()).isSorted();
    assertThat(first.get(first.size() - 1)).isLessThan(second.get(0));
    assertThat(asApp().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(queue.name())))
        .isEqualTo(2 * payloads.size());
  }

  @Test
  void theWholeApiRunsWithOnlyTheGrants() throws Exception {
    MsgQueueConfig config = MsgQueueConfig.builder()
        .keepAliveInterval(Duration.ofMillis(50))
        .reapIdleThreshold(Duration.ofMillis(200))
        .build();
    MsgQueueRepository repository = MsgQueueRepository.create(appDataSource, config);

    QueueSpec orders = QueueSpec.durable("orders");
    repository.bindQueue(orders);
    long single = repository.publish(orders, "{\"n\": 1}");
    List<Long> batch = repository.publishBatch(orders, List.of("{\"n\": 2}", "{\"n\": 3}"));
    long inTransaction = asApp().transactionResult(tx -> repository.inTransaction(tx.dsl()).publish(orders, "{\"n\": 4}"));
    assertThatThrownBy(() -> asApp().transaction(tx -> {
      repository.inTransaction(tx.dsl()).publish(orders, "{\"n\": \"rolled back\"}");
      throw new IllegalStateException("roll back");
    })).hasMessage("roll back");

    // heal: an auto-deleted queue that does not exist is created by the publish, in autocommit and in a transaction
    long healed = repository.publish(QueueSpec.autoDeleted("healed"), "{\"n\": 5}");
    long healedInTransaction = asApp().transactionResult(
        tx -> repository.inTransaction(tx.dsl()).publish(QueueSpec.autoDeleted("healed-tx"), "{\"n\": 6}"));
    assertThat(asApp().fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.in("healed", "healed-tx"))).isEqualTo(2);

    // claim / ack (compatible mode), claim / release / re-claim / ack (lease mode)
    List<ClaimedMessage> claimed = repository.claim("orders", 2);
    assertThat(claimed).extracting(ClaimedMessage::id).containsExactly(single, batch.get(0));
    assertThat(repository.ack(claimed)).containsExactly(single, batch.get(0));
    ClaimedMessage leased = repository.claim("orders", 1, Duration.ofSeconds(30)).get(0);
    assertThat(leased.id()).isEqualTo(batch.get(1));
    assertThat(repository.release(leased, Duration.ZERO)).isTrue();
    List<ClaimedMessage> reclaimed = repository.claim("orders", 10, Duration.ofSeconds(30));
    assertThat(reclaimed).extracting(ClaimedMessage::id).containsExactly(batch.get(1), inTransaction);
    assertThat(repository.ack(reclaimed)).hasSize(2);
    assertThat(repository.claim("healed", 1)).extracting(ClaimedMessage::id).containsExactly(healed);
    assertThat(repository.claim("healed-tx", 1)).extracting(ClaimedMessage::id).containsExactly(healedInTransaction);
    assertThat(repository.keepAlive("orders")).isTrue();

    // lease extension, a failure past maxDeliveries into the dead-letter queue, inspection and re-publish
    long failing = repository.publish(orders, "{\"n\": \"fails\"}");
    ClaimedMessage held = repository.claim("orders", 1, Duration.ofSeconds(30)).get(0);
    assertThat(held.id()).isEqualTo(failing);
    ClaimedMessage extended = repository.extendLease(held, Duration.ofMinutes(1)).orElseThrow();
    RetryPolicy deadLetterAtOnce = RetryPolicy.builder("orders-dead-letters").maxDeliveries(1).build();
    assertThat(repository.fail(extended, new IllegalStateException("boom"), deadLetterAtOnce))
        .isEqualTo(FailureOutcome.DEAD_LETTERED);
    assertThat(repository.deadLetters("orders-dead-letters", 10)).extracting(DeadLetter::id).containsExactly(failing);
    assertThat(repository.republishDeadLetter(failing)).isEqualTo(RepublishOutcome.REPUBLISHED);
    ClaimedMessage republished = repository.claim("orders", 1).get(0);
    assertThat(republished.id()).isEqualTo(failing);
    assertThat(repository.ack(republished)).isTrue();

    // maintenance: expired items, then idle auto-deleted queues
    repository.publish(orders, "{\"n\": \"short-lived\"}", PublishOptions.defaults().withTtl(Duration.ofMillis(1)));
    QueueSpec idle = QueueSpec.autoDeleted("idle");
    repository.bindQueue(idle);
    Thread.sleep(400);
    assertThat(repository.cleanUpExpiredMessages()).isGreaterThanOrEqualTo(1);
    assertThat(repository.reapIdleQueues()).contains("idle");

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

    // Subscriber (lease mode) woken through a WakeupListener, both on the application role's connections
    Set<String> handled = ConcurrentHashMap.newKeySet();
    try (WakeupListener listener = WakeupListener.start(appDataSource::getConnection)) {
      awaitTrue(listener::isListening, "the LISTEN connection is up");
      try (Subscriber subscriber = Subscriber.builder(repository, QueueSpec.durable("events"),
              message -> handled.add(message.payload()))
          .mode(ConsumeMode.LEASE).lease(Duration.ofSeconds(30))
          .pollInterval(Duration.ofMinutes(1)) // so only a wake-up can deliver within the wait below
          .wakeups(listener)
          .start()) {
        // A batch large enough to go by COPY, which draws its ids from the sequence the grants name.
        List<String> payloads = new ArrayList<>();
        for (int i = 0; i < Publisher.COPY_MIN_BATCH; i++) {
          payloads.add("{\"event\": " + i + "}");
        }
        repository.publishBatch(QueueSpec.durable("events"), payloads);
        awaitTrue(() -> handled.size() == Publisher.COPY_MIN_BATCH, "every event handled");
        // The wake-up goes out after the publish returns, from the repository's wake-up thread: the subscriber's
        // first claim may have taken the events before it arrives, so wait for it rather than expect it already.
        awaitTrue(() -> subscriber.wakeups() > 0, "the publish's wake-up received through the LISTEN connection");
      }
    }
    assertThat(asApp().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq("events"))).isZero();
  }

  @Test
  void theApplicationRoleCannotRunDdl() {
    String catalogBefore = catalog();
    List<String> ddl = List.of(
        "CREATE TABLE evil (x int)",
        "CREATE TEMPORARY TABLE evil (x int)",
        "CREATE INDEX evil ON \"MessageQueueItem\" (\"payload\")",
        "CREATE FUNCTION evil() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "ALTER TABLE \"MessageQueueItem\" ADD COLUMN evil int",
        "DROP TABLE \"MessageQueueItem\"",
        "TRUNCATE \"MessageQueueItem\"",
        "CREATE TRIGGER evil BEFORE INSERT ON \"MessageQueue\" FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()",
        "ALTER TYPE \"MessageQueueItemStatus\" ADD VALUE 'EVIL'");
    for (String statement : ddl) {
      assertThatThrownBy(() -> asApp().execute(statement))
          .as(statement)
          .isInstanceOfSatisfying(DataAccessException.class,
              e -> assertThat(e.sqlState()).as(statement).isEqualTo(INSUFFICIENT_PRIVILEGE));
    }
    // Without a grant option PostgreSQL only warns ("no privileges were granted") and changes nothing.
    asApp().execute("GRANT ALL ON \"MessageQueueItem\" TO PUBLIC");
    asApp().execute("REVOKE ALL ON \"MessageQueueItem\" FROM " + migrator);
    assertThat(catalog()).isEqualTo(catalogBefore);
  }

  @Test
  void noInputThroughTheApiRunsDdl() {
    String catalogBefore = catalog();
    MsgQueueRepository repository = MsgQueueRepository.create(appDataSource, MsgQueueConfig.defaults());
    List<String> names = List.of(
        "'; DROP TABLE \"MessageQueueItem\"; --",
        "\"); CREATE TABLE evil (x int); --",
        "x'); ALTER TABLE \"MessageQueue\" ADD COLUMN evil int; --",
        "$$; TRUNCATE \"MessageQueueItem\"; $$",
        "msgqueue_wakeup; LISTEN x; CREATE TEMP TABLE t (x int)",
        "E'\\\\'; GRANT ALL ON \"MessageQueue\" TO PUBLIC; --");
    String payload = "{\"sql\": \"'); DROP TABLE \\\"MessageQueue\\\"; CREATE TABLE evil (x int); --\"}";
    for (String name : names) {
      repository.bindQueue(QueueSpec.autoDeleted(name));
      repository.publish(QueueSpec.autoDeleted(name), payload);
      repository.publishBatch(QueueSpec.durable(name), List.of(payload, payload));
      asApp().transaction(tx -> repository.inTransaction(tx.dsl()).publish(QueueSpec.durable(name), payload));
      repository.publish(QueueSpec.autoDeleted(name + " healed"), payload); // the heal path
      assertThat(repository.keepAlive(name)).isTrue();
      List<ClaimedMessage> claimed = repository.claim(name, 10, Duration.ofSeconds(30));
      assertThat(claimed).hasSize(4).allSatisfy(message -> {
        assertThat(message.queueName()).isEqualTo(name);
        assertThat(message.payload()).isEqualTo(payload);
      });
      assertThat(repository.release(claimed.get(0), Duration.ZERO)).isTrue();
      assertThat(repository.ack(claimed.subList(1, 4))).hasSize(3);
    }
    repository.cleanUpExpiredMessages();
    repository.reapIdleQueues();
    // A name PostgreSQL cannot store (NUL) is refused before any SQL.
    assertThatThrownBy(() -> repository.publish(QueueSpec.durable("a\u0000; DROP TABLE x"), payload))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(asApp().fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.in(names))).isEqualTo(names.size());
    assertThat(catalog()).isEqualTo(catalogBefore);
  }

  /**
   * Every object of the database's own schemas with its owner, definition and privileges: any DDL or DCL changes it.
   * Plain SQL: the catalogs are not among the generated tables.
   */
  private String catalog() {
    return db.dsl().fetch("""
        SELECT n.nspname, c.relname, c.relkind, pg_get_userbyid(c.relowner), c.relacl::text,
               (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
                  FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
               (SELECT count(*) FROM pg_trigger t WHERE t.tgrelid = c.oid)
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
         UNION ALL
        SELECT n.nspname, p.proname, 'f', pg_get_userbyid(p.proowner), p.proacl::text, NULL, NULL
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
         UNION ALL
        SELECT n.nspname, t.typname, 't', pg_get_userbyid(t.typowner),
               (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid),
               NULL, NULL
          FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
         WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
         UNION ALL
        SELECT nspname, NULL, 'n', pg_get_userbyid(nspowner), nspacl::text, NULL, NULL FROM pg_namespace
         ORDER BY 1, 2, 3
        """).format();
  }

  private static void awaitTrue(java.util.function.BooleanSupplier condition, String what) {
    Await.until(what, Duration.ofSeconds(30), condition);
  }
}
