package dev.msgqueue.it;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.jooq.DSLContext;
import org.jooq.JSONB;
import org.jooq.Record1;
import org.jooq.Record2;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The changelog: applies, is idempotent, rolls back, and recognises an existing production schema. */
class MigrationsIT {
  /** The production schema, as the existing service's own migrations created it. */
  static final String PRODUCTION_DDL = """
      CREATE TYPE "MessageQueueItemStatus" AS ENUM ('PENDING', 'ASSIGNED');
      CREATE TABLE "MessageQueue" (
        "name" TEXT NOT NULL,
        "lastActive" TIMESTAMP(3) DEFAULT CURRENT_TIMESTAMP,
        "durable" BOOLEAN NOT NULL DEFAULT true,
        "autoDeleted" BOOLEAN NOT NULL DEFAULT false,
        "exclusive" BOOLEAN NOT NULL DEFAULT false,
        "exclusiveConsumerId" UUID,
        CONSTRAINT "MessageQueue_pkey" PRIMARY KEY ("name"));
      CREATE TABLE "MessageQueueItem" (
        "id" BIGINT NOT NULL GENERATED ALWAYS AS IDENTITY,
        "payload" JSONB NOT NULL,
        "readAfter" TIMESTAMP(3),
        "expiresAt" TIMESTAMP(3),
        "queueId" TEXT,
        "status" "MessageQueueItemStatus" NOT NULL DEFAULT 'PENDING',
        CONSTRAINT "MessageQueueItem_pkey" PRIMARY KEY ("id"));
      CREATE INDEX "MessageQueueItem_expiresAt_queueId_readAfter_status_id_idx"
        ON "MessageQueueItem"("expiresAt", "queueId", "readAfter", "status", "id");
      ALTER TABLE "MessageQueueItem" ADD CONSTRAINT "MessageQueueItem_queueId_fkey" FOREIGN KEY ("queueId")
        REFERENCES "MessageQueue"("name") ON DELETE SET NULL ON UPDATE CASCADE;
      """;

  /**
   * The changesets that drop a leftover invalid index before building it: on a database without one (a fresh one
   * among them) their precondition marks them ran.
   */
  static final List<String> LEFTOVER_INDEX_DROPS =
      List.of("msgqueue-008-drop-invalid-claim-index", "msgqueue-009-drop-invalid-idle-index",
          "msgqueue-010-drop-invalid-last-active-index");

  @Test
  void appliesToAnEmptyDatabaseAndASecondUpdateChangesNothing() throws SQLException {
    try (TestDatabase db = TestDatabase.createEmpty("migrate-empty"); Connection connection = db.connect()) {
      List<String> notices = new ArrayList<>();
      withServerNotices(notices, () -> Migrations.update(connection));
      List<String> firstRun = changeLog(db.dsl());
      String schemaAfterFirst = schemaFingerprint(db.dsl());

      Migrations.update(connection);

      assertAppliedFresh(firstRun);
      assertThat(changeLog(db.dsl())).isEqualTo(firstRun);
      assertThat(schemaFingerprint(db.dsl())).isEqualTo(schemaAfterFirst);
      assertThat(tableNames(db.dsl())).contains("MessageQueue", "MessageQueueItem");
      // No statement of the changelog draws a notice from the server (DROP ... IF EXISTS of nothing, say), which
      // Liquibase logs (a warning in a Spring Boot service's log) at every service's first start.
      assertThat(notices).isEmpty();
    }
  }

  @Test
  void aDatabaseMigratedBeforeThePreconditionsUpdatesWithoutAChecksumError() throws SQLException {
    String expected = referenceSchema();
    try (TestDatabase db = TestDatabase.createEmpty("migrate-earlier"); Connection connection = db.connect()) {
      Migrations.update(connection, "db/changelog/msgqueue-before-preconditions/db.changelog-master.xml");
      // The checksums those databases hold, which the edited changesets keep valid.
      assertThat(checksums(db.dsl())).containsEntry("msgqueue-005-message-queue-item-claim-index",
          "9:53d2224ffb9aaca8d2baa27eb0dc228c").containsEntry("msgqueue-007-message-queue-idle-index",
          "9:f4a77e5367a71486f47bc44f9c73da8d");

      Migrations.update(connection);

      assertThat(changeLog(db.dsl())).endsWith("msgqueue-008-drop-invalid-claim-index MARK_RAN",
          "msgqueue-009-drop-invalid-idle-index MARK_RAN", "msgqueue-010-drop-invalid-last-active-index MARK_RAN",
          "msgqueue-011-message-queue-last-active-index EXECUTED");
      assertThat(schemaFingerprint(db.dsl())).isEqualTo(expected);
      Migrations.update(connection);
      assertThat(changeLog(db.dsl())).doesNotHaveDuplicates();
    }
  }

  @Test
  void rollsBackToAnEmptySchema() throws SQLException {
    try (TestDatabase db = TestDatabase.createEmpty("migrate-rollback"); Connection connection = db.connect()) {
      Migrations.update(connection);
      int changeSets = changeLog(db.dsl()).size();

      Migrations.rollback(connection, changeSets);

      assertThat(tableNames(db.dsl())).doesNotContain("MessageQueue", "MessageQueueItem");
      assertThat(db.dsl().fetchCount(table(name("pg_catalog", "pg_type")),
          field(name("typname")).eq("MessageQueueItemStatus"))).isZero();
      assertThat(changeLog(db.dsl())).isEmpty();

      Migrations.update(connection);
      assertThat(tableNames(db.dsl())).contains("MessageQueue", "MessageQueueItem");
    }
  }

  @Test
  void overAnExistingProductionSchemaIsANoOpThatKeepsItsRows() throws SQLException {
    try (TestDatabase db = TestDatabase.createEmpty("migrate-production");
        Connection connection = db.connect()) {
      try (Statement statement = connection.createStatement()) {
        statement.execute(PRODUCTION_DDL);
      }
      DSLContext dsl = db.dsl();
      dsl.insertInto(MESSAGE_QUEUE).set(MESSAGE_QUEUE.NAME, "existing").execute();
      dsl.insertInto(MESSAGE_QUEUE_ITEM)
          .set(MESSAGE_QUEUE_ITEM.PAYLOAD, JSONB.valueOf("{\"kept\": true}"))
          .set(MESSAGE_QUEUE_ITEM.QUEUE_ID, "existing")
          .execute();
      String before = schemaFingerprint(dsl);

      Migrations.update(connection);

      assertThat(changeLog(dsl)).startsWith(
          "msgqueue-001-item-status-enum MARK_RAN",
          "msgqueue-002-message-queue-table MARK_RAN",
          "msgqueue-003-message-queue-item-table MARK_RAN",
          "msgqueue-004-message-queue-item-expiry-index MARK_RAN");
      // Every production column, index and constraint is exactly as it was; later changesets may only add.
      assertThat(schemaFingerprint(dsl).lines().toList()).containsAll(before.lines().toList());
      assertThat(dsl.fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq("existing"))).isEqualTo(1);
    }
  }

  @Test
  void aServiceIncludesTheChangelogFromItsOwn() throws SQLException {
    try (TestDatabase db = TestDatabase.createEmpty("migrate-include"); Connection connection = db.connect()) {
      Migrations.update(connection, "db/changelog/service/service-changelog.xml");

      assertThat(tableNames(db.dsl())).contains("MessageQueue", "MessageQueueItem", "orders");
      assertThat(changeLog(db.dsl())).contains("msgqueue-003-message-queue-item-table EXECUTED",
          "service-001-orders EXECUTED");
      // The same changesets through our master file afterwards: recognised as already applied.
      Migrations.update(connection);
      assertThat(changeLog(db.dsl())).doesNotHaveDuplicates();
    }
  }

  @Test
  void twoServicesMigratingAtOnceAreSerializedByLiquibasesLock(@TempDir Path tmp) throws Exception {
    String expected = referenceSchema();
    try (TestDatabase db = TestDatabase.createEmpty("migrate-concurrent")) {
      // Liquibase's own tables exist (any earlier deploy created them); the schema itself does not.
      try (Connection connection = db.connect()) {
        Migrations.update(connection);
        Migrations.rollback(connection, changeLog(db.dsl()).size());
      }

      List<LiquibaseCli> services = startTwoServices(db, tmp);

      for (LiquibaseCli service : services) {
        assertThat(service.exitCode()).as("both services start; output:%n%s", service.output()).isZero();
      }
      assertAppliedFresh(changeLog(db.dsl()));
      assertThat(schemaFingerprint(db.dsl())).isEqualTo(expected);
    }
  }

  @Test
  void twoServicesMigratingAFreshDatabaseAtOnceEndWithOneCorrectSchema(@TempDir Path tmp) throws Exception {
    String expected = referenceSchema();
    try (TestDatabase db = TestDatabase.createEmpty("migrate-fresh-concurrent")) {
      List<LiquibaseCli> services = startTwoServices(db, tmp);
      int failed = 0;
      for (LiquibaseCli service : services) {
        failed += service.exitCode() == 0 ? 0 : 1;
      }
      // On a database without Liquibase's own tables both services may race to create them, before Liquibase's lock
      // exists to serialize anything; a service that loses that race succeeds when it starts again.
      assertThat(failed).isLessThanOrEqualTo(1);
      if (failed == 1) {
        try (Connection connection = db.connect()) {
          Migrations.update(connection);
        }
      }

      assertAppliedFresh(changeLog(db.dsl()));
      assertThat(schemaFingerprint(db.dsl())).isEqualTo(expected);
    }
  }

  private static String referenceSchema() {
    try (TestDatabase reference = TestDatabase.createMigrated("migrate-reference")) {
      return schemaFingerprint(reference.dsl());
    }
  }

  /** Two "services" (separate JVMs running the Liquibase CLI) migrate the same database at once. */
  private static List<LiquibaseCli> startTwoServices(TestDatabase db, Path tmp) throws Exception {
    return List.of(LiquibaseCli.update(db.jdbcUrl(), tmp.resolve("service-a.out")),
        LiquibaseCli.update(db.jdbcUrl(), tmp.resolve("service-b.out")));
  }

  /** Every changeset ran once, each EXECUTED but the leftover-index drops, which found nothing to drop. */
  static void assertAppliedFresh(List<String> changeLog) {
    assertThat(changeLog).hasSizeGreaterThanOrEqualTo(4).doesNotHaveDuplicates();
    for (String row : changeLog) {
      String id = row.substring(0, row.indexOf(' '));
      assertThat(row).isEqualTo(id + (LEFTOVER_INDEX_DROPS.contains(id) ? " MARK_RAN" : " EXECUTED"));
    }
  }

  /**
   * Runs {@code update} and adds to {@code notices} what Liquibase logs meanwhile of the server's notices (here
   * through its UI service at INFO, in a Spring Boot service as a warning of its executor), and any warning.
   */
  static void withServerNotices(List<String> notices, Runnable update) {
    Logger liquibase = Logger.getLogger("liquibase");
    Handler handler = new Handler() {
      @Override
      public void publish(LogRecord record) {
        String message = String.valueOf(record.getMessage());
        // PostgreSQL's notice for DROP ... IF EXISTS of nothing ends so, whatever the object.
        if (record.getLevel().intValue() >= Level.WARNING.intValue() || message.endsWith("does not exist, skipping")) {
          notices.add(message);
        }
      }

      @Override
      public void flush() { }

      @Override
      public void close() { }
    };
    liquibase.addHandler(handler);
    try {
      update.run();
    } finally {
      liquibase.removeHandler(handler);
    }
  }

  /** Each changeset's stored checksum, by id. */
  static Map<String, String> checksums(DSLContext dsl) {
    return dsl.select(field(name("id"), String.class), field(name("md5sum"), String.class))
        .from(table(name("databasechangelog")))
        .fetchMap(Record2::value1, Record2::value2);
  }

  /** Changesets in execution order, as "id EXECTYPE". */
  static List<String> changeLog(DSLContext dsl) {
    if (!tableNames(dsl).contains("databasechangelog")) {
      return List.of();
    }
    return dsl.select(field(name("id"), String.class), field(name("exectype"), String.class))
        .from(table(name("databasechangelog")))
        .orderBy(field(name("orderexecuted")))
        .fetch(row -> row.value1() + " " + row.value2());
  }

  static List<String> tableNames(DSLContext dsl) {
    return dsl.select(field(name("table_name"), String.class))
        .from(table(name("information_schema", "tables")))
        .where(field(name("table_schema")).eq(org.jooq.impl.DSL.currentSchema()))
        .fetch(Record1::value1);
  }

  /** Columns with types, defaults and nullability, constraints and indexes of the two tables. */
  static String schemaFingerprint(DSLContext dsl) {
    String columns = dsl.select(field(name("table_name")), field(name("column_name")), field(name("data_type")),
            field(name("udt_name")), field(name("column_default")), field(name("is_nullable")),
            field(name("is_identity")), field(name("datetime_precision")))
        .from(table(name("information_schema", "columns")))
        .where(field(name("table_name"), String.class).in("MessageQueue", "MessageQueueItem"))
        .orderBy(field(name("table_name")), field(name("ordinal_position")))
        .fetch().formatCSV();
    String indexes = dsl.select(field(name("indexname")), field(name("indexdef")))
        .from(table(name("pg_catalog", "pg_indexes")))
        .where(field(name("tablename"), String.class).in("MessageQueue", "MessageQueueItem"))
        .orderBy(field(name("indexname")))
        .fetch().formatCSV();
    String constraints = dsl.select(field(name("conname")), org.jooq.impl.DSL.function("pg_get_constraintdef",
            String.class, field(name("oid"))))
        .from(table(name("pg_catalog", "pg_constraint")))
        .where(field(name("conname"), String.class).like("MessageQueue%"))
        .orderBy(field(name("conname")))
        .fetch().formatCSV();
    return columns + indexes + constraints;
  }
}
