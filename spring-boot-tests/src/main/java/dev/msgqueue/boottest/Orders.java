package dev.msgqueue.boottest;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.HousekeepingRun;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import org.jooq.DSLContext;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/** Publishes in the caller's transaction, as a service does next to its own writes. */
@Service
public class Orders {
  private final MsgQueueRepository queues;
  private final Housekeeper housekeeper;
  private final DSLContext dsl;

  public Orders(MsgQueueRepository queues, Housekeeper housekeeper, DSLContext dsl) {
    this.queues = queues;
    this.housekeeper = housekeeper;
    this.dsl = dsl;
  }

  /** Publishes {@code order} to {@link BootService#ORDERS}; the message exists once this transaction commits. */
  @Transactional
  public long place(String order) {
    return queues.publish(QueueSpec.durable(BootService.ORDERS), order);
  }

  /** Publishes {@code order} to {@link BootService#FULFIL}; the message exists once this transaction commits. */
  @Transactional
  public long fulfil(String order) {
    return queues.publish(QueueSpec.durable(BootService.FULFIL), order);
  }

  /** Publishes {@code order} to {@code queue} (auto-deleted); the message exists once this transaction commits. */
  @Transactional
  public long placeOn(String queue, String order) {
    return queues.publish(QueueSpec.autoDeleted(queue), order);
  }

  /**
   * Publishes {@code order} to {@code queue} (auto-deleted), optionally runs the housekeeper and the reaper, then
   * fails, so the transaction rolls back: the failure says whether the message was visible inside it.
   */
  @Transactional
  public void placeThenFail(String queue, String order, boolean housekeeping) {
    long id = queues.publish(QueueSpec.autoDeleted(queue), order);
    HousekeepingRun.Outcome outcome = null;
    if (housekeeping) {
      outcome = housekeeper.runOnce().outcome();
      queues.reapIdleQueues();
    }
    boolean visible = dsl.fetchExists(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.eq(id));
    throw new OrderFailed(id, visible, outcome);
  }

  /** Rolls back {@link #placeThenFail}'s transaction. */
  public static final class OrderFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final long id;
    final boolean visibleInTransaction;
    final HousekeepingRun.Outcome housekeeping;

    OrderFailed(long id, boolean visibleInTransaction, HousekeepingRun.Outcome housekeeping) {
      super("order failed after publishing message " + id);
      this.id = id;
      this.visibleInTransaction = visibleInTransaction;
      this.housekeeping = housekeeping;
    }
  }
}
