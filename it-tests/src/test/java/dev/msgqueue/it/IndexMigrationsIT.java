package dev.msgqueue.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The changesets that add an index (the claim index, the idle-queue index, the last-active index): each rolls back,
 * re-applies, marks itself ran where its index already exists, and builds it over a leftover invalid index of its
 * name.
 */
class IndexMigrationsIT {
  // pg_indexes and databasechangelog are not msgqueue tables, so they have no generated classes.
  private static int indexCount(DSLContext dsl, String index) {
    return dsl.fetchCount(table(name("pg_indexes")), field(name("indexname")).eq(index));
  }

  /** How many changesets a rollback must undo to reach {@code changeSet} (later changesets come off first). */
  private static int changeSetsFrom(DSLContext dsl, String changeSet) {
    Field<Integer> order = field(name("orderexecuted"), Integer.class);
    Integer changeSetOrder = dsl.select(order).from(table(name("databasechangelog")))
        .where(field(name("id")).eq(changeSet)).fetchSingle().value1();
    return dsl.fetchCount(table(name("databasechangelog")), order.ge(changeSetOrder));
  }

  @ParameterizedTest
  @CsvSource({
      "msgqueue-005-message-queue-item-claim-index, MessageQueueItem_queueId_id_idx",
      "msgqueue-007-message-queue-idle-index, MessageQueue_lastActive_autoDeleted_idx",
      "msgqueue-011-message-queue-last-active-index, MessageQueue_lastActive_name_idx"})
  void rollsBackAndReappliesAndToleratesAnExistingIndex(String changeSet, String index) throws Exception {
    try (TestDatabase db = TestDatabase.createMigrated("index-migration")) {
      assertThat(indexCount(db.dsl(), index)).isOne();

      try (Connection connection = db.connect()) {
        Migrations.rollback(connection, changeSetsFrom(db.dsl(), changeSet));
      }
      assertThat(indexCount(db.dsl(), index)).isZero();

      try (Connection connection = db.connect()) {
        Migrations.update(connection);
      }
      assertThat(indexCount(db.dsl(), index)).isOne();

      // A database that already has the index (built by hand) but no record of the changeset: marked ran, no error.
      db.dsl().deleteFrom(table(name("databasechangelog")))
          .where(field(name("id")).eq(changeSet)).execute();
      try (Connection connection = db.connect()) {
        Migrations.update(connection);
      }
      assertThat(indexCount(db.dsl(), index)).isOne();
      assertThat(db.dsl().fetchCount(table(name("databasechangelog")),
          field(name("id")).eq(changeSet)
              .and(field(name("exectype")).eq("MARK_RAN")))).isOne();
    }
  }

  @ParameterizedTest
  @CsvSource({
      "msgqueue-008-drop-invalid-claim-index, MessageQueueItem_queueId_id_idx, MessageQueueItem, queueId",
      "msgqueue-009-drop-invalid-idle-index, MessageQueue_lastActive_autoDeleted_idx, MessageQueue, durable",
      "msgqueue-010-drop-invalid-last-active-index, MessageQueue_lastActive_name_idx, MessageQueue, durable"})
  void aLeftoverInvalidIndexIsDroppedAndBuiltAgain(String dropChangeSet, String index, String table, String column)
      throws Exception {
    try (TestDatabase db = TestDatabase.createEmpty("index-leftover"); Connection connection = db.connect();
         Statement statement = connection.createStatement()) {
      statement.execute(MigrationsIT.PRODUCTION_DDL);
      statement.execute("INSERT INTO \"MessageQueue\" (name) VALUES ('a'), ('b')");
      statement.execute("INSERT INTO \"MessageQueueItem\" (payload, \"queueId\") VALUES ('{}', 'a'), ('{}', 'a')");
      // A concurrent build that failed (here on duplicate keys) leaves an INVALID index under its name.
      assertThatThrownBy(() -> statement.execute("CREATE UNIQUE INDEX CONCURRENTLY \"" + index + "\" ON \""
          + table + "\" (\"" + column + "\")")).isInstanceOf(SQLException.class);
      assertThat(isValid(db.dsl(), index)).isFalse();

      Migrations.update(connection);

      assertThat(isValid(db.dsl(), index)).isTrue();
      assertThat(db.dsl().fetchCount(table(name("databasechangelog")),
          field(name("id")).eq(dropChangeSet).and(field(name("exectype")).eq("EXECUTED")))).isOne();
    }
  }

  /** Whether {@code index} exists and is valid (the one the changelog builds, not the failed leftover). */
  private static boolean isValid(DSLContext dsl, String index) {
    Field<Boolean> valid = field(name("i", "indisvalid"), Boolean.class);
    Boolean result = dsl.select(valid)
        .from(table(name("pg_catalog", "pg_index")).as("i"))
        .join(table(name("pg_catalog", "pg_class")).as("c"))
        .on(field(name("c", "oid")).eq(field(name("i", "indexrelid"))))
        .where(field(name("c", "relname")).eq(index))
        .fetchOne(valid);
    return Boolean.TRUE.equals(result);
  }
}
