package dev.msgqueue.it;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.msgqueue.jooq.Keys;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import java.util.Arrays;
import org.jooq.DSLContext;
import org.jooq.JSONB;
import org.jooq.Record;
import org.jooq.impl.SQLDataType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The generated typed tables against the live, migrated catalog; and the FK rule the design defends against. */
@ExtendWith(MsgQueueDatabaseExtension.class)
class SchemaIT {
  private final DSLContext dsl;

  SchemaIT(TestDatabase db) {
    this.dsl = db.dsl();
  }

  @Test
  void payloadIsJsonbInBothTheCatalogAndTheTypedTable() {
    assertThat(column("MessageQueueItem", "payload").get("udt_name")).isEqualTo("jsonb");
    assertThat(MESSAGE_QUEUE_ITEM.PAYLOAD.getDataType().getSQLDataType()).isEqualTo(SQLDataType.JSONB);
    assertThat(MESSAGE_QUEUE_ITEM.PAYLOAD.getDataType().nullable()).isFalse();
  }

  @Test
  void idIsAnIdentityBigintInBothTheCatalogAndTheTypedTable() {
    Record id = column("MessageQueueItem", "id");
    assertThat(id.get("data_type")).isEqualTo("bigint");
    assertThat(id.get("is_identity")).isEqualTo("YES");
    assertThat(id.get("identity_generation")).isEqualTo("ALWAYS");
    assertThat(MESSAGE_QUEUE_ITEM.ID.getDataType().identity()).isTrue();
    assertThat(MESSAGE_QUEUE_ITEM.ID.getType()).isEqualTo(Long.class);
  }

  @Test
  void statusEnumLabelsMatchTheGeneratedEnum() {
    assertThat(column("MessageQueueItem", "status").get("udt_name")).isEqualTo("MessageQueueItemStatus");
    var labels = dsl.select(field(name("e", "enumlabel"), String.class))
        .from(table(name("pg_catalog", "pg_enum")).as("e"))
        .join(table(name("pg_catalog", "pg_type")).as("t"))
        .on(field(name("t", "oid")).eq(field(name("e", "enumtypid"))))
        .where(field(name("t", "typname")).eq("MessageQueueItemStatus"))
        .orderBy(field(name("e", "enumsortorder")))
        .fetch(record -> record.value1());
    assertThat(labels).containsExactly("PENDING", "ASSIGNED")
        .isEqualTo(Arrays.stream(MessageQueueItemStatus.values()).map(MessageQueueItemStatus::getLiteral).toList());
  }

  @Test
  void foreignKeyDeletesSetNullInTheCatalogAndIsKnownToTheTypedTables() {
    String deleteRule = dsl.select(field(name("delete_rule"), String.class))
        .from(table(name("information_schema", "referential_constraints")))
        .where(field(name("constraint_name")).eq("MessageQueueItem_queueId_fkey"))
        .fetchSingle().value1();
    assertThat(deleteRule).isEqualTo("SET NULL");
    assertThat(MESSAGE_QUEUE_ITEM.getReferences()).hasSize(1);
    assertThat(MESSAGE_QUEUE_ITEM.getReferences().get(0).getKey()).isEqualTo(Keys.MESSAGEQUEUE_PKEY);
    assertThat(MESSAGE_QUEUE_ITEM.getReferences().get(0).getFields()).containsExactly(MESSAGE_QUEUE_ITEM.QUEUE_ID);
  }

  @Test
  void deletingAQueueOrphansItsItems() {
    dsl.insertInto(MESSAGE_QUEUE).set(MESSAGE_QUEUE.NAME, "doomed").execute();
    long id = dsl.insertInto(MESSAGE_QUEUE_ITEM)
        .set(MESSAGE_QUEUE_ITEM.PAYLOAD, JSONB.valueOf("{}"))
        .set(MESSAGE_QUEUE_ITEM.QUEUE_ID, "doomed")
        .returning(MESSAGE_QUEUE_ITEM.ID).fetchSingle().getId();

    dsl.deleteFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq("doomed")).execute();

    var item = dsl.selectFrom(MESSAGE_QUEUE_ITEM).where(MESSAGE_QUEUE_ITEM.ID.eq(id)).fetchSingle();
    assertThat(item.getQueueId()).as("ON DELETE SET NULL: the orphan the design must prevent").isNull();
  }

  @Test
  void testSessionsRunInUtc() {
    String zone = dsl.select(function("current_setting", String.class, inline("TimeZone"))).fetchSingle().value1();
    assertThat(zone).isIn("UTC", "Etc/UTC");
  }

  private Record column(String tableName, String columnName) {
    return dsl.select(field(name("data_type")), field(name("udt_name")), field(name("is_identity")),
            field(name("identity_generation")))
        .from(table(name("information_schema", "columns")))
        .where(field(name("table_name")).eq(tableName))
        .and(field(name("column_name")).eq(columnName))
        .fetchSingle();
  }
}
