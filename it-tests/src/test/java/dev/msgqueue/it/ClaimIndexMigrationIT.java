package dev.msgqueue.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import java.sql.Connection;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.junit.jupiter.api.Test;

/** The claim-index changeset: rolls back, re-applies, and marks itself ran where the index already exists. */
class ClaimIndexMigrationIT {
  private static final String INDEX = "MessageQueueItem_queueId_id_idx";

  // pg_indexes and databasechangelog are not msgqueue tables, so they have no generated classes.
  private static int indexCount(DSLContext dsl) {
    return dsl.fetchCount(table(name("pg_indexes")), field(name("indexname")).eq(INDEX));
  }

  /** How many changesets a rollback must undo to reach the claim index (later changesets come off first). */
  private static int changeSetsFromClaimIndexOn(DSLContext dsl) {
    Field<Integer> order = field(name("orderexecuted"), Integer.class);
    Integer claimIndexOrder = dsl.select(order).from(table(name("databasechangelog")))
        .where(field(name("id")).eq("msgqueue-005-message-queue-item-claim-index")).fetchSingle().value1();
    return dsl.fetchCount(table(name("databasechangelog")), order.ge(claimIndexOrder));
  }

  @Test
  void rollsBackAndReappliesAndToleratesAnExistingIndex() throws Exception {
    try (TestDatabase db = TestDatabase.createMigrated("claim-index-migration")) {
      assertThat(indexCount(db.dsl())).isOne();

      try (Connection connection = db.connect()) {
        Migrations.rollback(connection, changeSetsFromClaimIndexOn(db.dsl()));
      }
      assertThat(indexCount(db.dsl())).isZero();

      try (Connection connection = db.connect()) {
        Migrations.update(connection);
      }
      assertThat(indexCount(db.dsl())).isOne();

      // A database that already has the index (built by hand) but no record of the changeset: marked ran, no error.
      db.dsl().deleteFrom(table(name("databasechangelog")))
          .where(field(name("id")).eq("msgqueue-005-message-queue-item-claim-index")).execute();
      try (Connection connection = db.connect()) {
        Migrations.update(connection);
      }
      assertThat(indexCount(db.dsl())).isOne();
      assertThat(db.dsl().fetchCount(table(name("databasechangelog")),
          field(name("id")).eq("msgqueue-005-message-queue-item-claim-index")
              .and(field(name("exectype")).eq("MARK_RAN")))).isOne();
    }
  }
}
