package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The chain migrations -> typed tables -> core -> PostgreSQL, end to end. */
class EndToEndSmokeIT extends RepositoryFixture {
  EndToEndSmokeIT(TestDatabase db) {
    super(db);
  }

  @Test
  void bindPublishAndReadBack() {
    QueueSpec spec = QueueSpec.durable("smoke");
    repository.bindQueue(spec);

    long id = repository.publish(spec, "{\"hello\": \"world\", \"n\": 1}");

    MessageQueueItemRecord item = db.dsl().selectFrom(MESSAGE_QUEUE_ITEM).where(MESSAGE_QUEUE_ITEM.ID.eq(id)).fetchOne();
    assertThat(item).isNotNull();
    assertThat(item.getQueueId()).isEqualTo("smoke");
    assertThat(item.getStatus()).isEqualTo(MessageQueueItemStatus.PENDING);
    assertThat(item.getPayload().data()).isEqualTo("{\"n\": 1, \"hello\": \"world\"}");
    assertThat(item.getExpiresAt()).isAfter(item.getReadAfter());
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.eq("smoke"))).isEqualTo(1);
  }

  @Test
  void batchIdsFollowPayloadOrder() {
    QueueSpec spec = QueueSpec.durable("smoke-batch");
    repository.bindQueue(spec);

    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3", "4", "5"));

    assertThat(ids).hasSize(5).isSorted();
    List<String> payloads = db.dsl().select(MESSAGE_QUEUE_ITEM.PAYLOAD).from(MESSAGE_QUEUE_ITEM)
        .where(MESSAGE_QUEUE_ITEM.ID.in(ids)).orderBy(MESSAGE_QUEUE_ITEM.ID)
        .fetch(record -> record.value1().data());
    assertThat(payloads).containsExactly("1", "2", "3", "4", "5");
  }
}
