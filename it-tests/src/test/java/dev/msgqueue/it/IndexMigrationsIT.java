package dev.msgqueue.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import java.sql.Connection;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The changesets that add an index (the claim index, the idle-queue index, the last-active index): each rolls back, re-applies, and marks
 * itself ran where its index already exists.
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
      "msgqueue-008-message-queue-last-active-index, MessageQueue_lastActive_name_idx"})
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
}
