package dev.msgqueue.it;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.cast;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;

import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import dev.msgqueue.jooq.tables.records.MessageQueueRecord;
import java.time.Duration;
import java.time.LocalDateTime;
import org.jooq.DSLContext;
import org.jooq.impl.SQLDataType;

/**
 * Reads and arranges queue rows for tests, through the typed tables, with the server-clock expressions core writes
 * its timestamps with.
 */
public final class QueueRows {
  private final DSLContext dsl;

  public QueueRows(DSLContext dsl) {
    this.dsl = dsl;
  }

  public MessageQueueRecord queue(String name) {
    return dsl.selectFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq(name)).fetchOne();
  }

  public boolean exists(String name) {
    return queue(name) != null;
  }

  /** The row version's creating transaction: changes exactly when the row is written. */
  public String rowVersion(String name) {
    return dsl.select(cast(field(name("xmin")), SQLDataType.VARCHAR))
        .from(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq(name)).fetchSingle().value1();
  }

  /** Inserts a queue row as another service might write it, attributes as given, not exclusive. */
  public void insertQueue(String name, boolean durable, boolean autoDeleted) {
    dsl.insertInto(MESSAGE_QUEUE)
        .set(MESSAGE_QUEUE.NAME, name)
        .set(MESSAGE_QUEUE.DURABLE, durable)
        .set(MESSAGE_QUEUE.AUTO_DELETED, autoDeleted)
        .set(MESSAGE_QUEUE.EXCLUSIVE, false)
        .execute();
  }

  /** Makes the queue look idle for {@code idleFor}, as if nothing had touched it since. */
  public void makeIdle(String name, Duration idleFor) {
    dsl.update(MESSAGE_QUEUE)
        .set(MESSAGE_QUEUE.LAST_ACTIVE, ServerTime.utcNowMinus(idleFor))
        .where(MESSAGE_QUEUE.NAME.eq(name))
        .execute();
  }

  /** Makes every item of the queue expired. */
  public void expireItems(String name) {
    dsl.update(MESSAGE_QUEUE_ITEM)
        .set(MESSAGE_QUEUE_ITEM.EXPIRES_AT, ServerTime.utcNowMinus(Duration.ofSeconds(1)))
        .where(MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(name))
        .execute();
  }

  /** Makes the lease of every claimed item of the queue run out: each is claimable again, as a redelivery. */
  public void leasesRunOut(String name) {
    dsl.update(MESSAGE_QUEUE_ITEM)
        .set(MESSAGE_QUEUE_ITEM.READ_AFTER, ServerTime.utcNowMinus(Duration.ofSeconds(1)))
        .where(MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(name))
        .and(MESSAGE_QUEUE_ITEM.STATUS.eq(MessageQueueItemStatus.ASSIGNED))
        .execute();
  }

  public MessageQueueItemRecord item(long id) {
    return dsl.selectFrom(MESSAGE_QUEUE_ITEM).where(MESSAGE_QUEUE_ITEM.ID.eq(id)).fetchOne();
  }

  public int itemsOf(String name) {
    return dsl.fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(name));
  }

  /** Items of the queue claimed and not yet acked or released. */
  public int assignedOf(String name) {
    return dsl.fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(name)
        .and(MESSAGE_QUEUE_ITEM.STATUS.eq(MessageQueueItemStatus.ASSIGNED)));
  }

  /** Items of the queue waiting for a claim: PENDING. A claim of the default mode takes (deletes) what it claims. */
  public int pendingOf(String name) {
    return dsl.fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(name)
        .and(MESSAGE_QUEUE_ITEM.STATUS.eq(MessageQueueItemStatus.PENDING)));
  }

  /** Unexpired items whose queue was deleted under them: what must never exist. */
  public int unexpiredOrphans() {
    return dsl.fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.isNull()
        .and(MESSAGE_QUEUE_ITEM.EXPIRES_AT.gt(ServerTime.utcNow())));
  }

  public LocalDateTime serverUtcNow() {
    return dsl.select(ServerTime.utcNow()).fetchSingle().value1();
  }
}
