package dev.msgqueue.example.orders;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.msgqueue.MessageQueueRepository;
import dev.msgqueue.QueueSpec;
import org.jooq.DSLContext;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/** Places an order and publishes its "to ship" message in the same transaction: both commit, or neither. */
@Service
public class OrderService {
  static final QueueSpec SHIPPING = QueueSpec.durable("shipping");

  private final DSLContext dsl;
  private final MessageQueueRepository queues;

  public OrderService(DSLContext dsl, MessageQueueRepository queues) {
    this.dsl = dsl;
    this.queues = queues;
  }

  /**
   * Stores the order and publishes it for shipping.
   *
   * @throws IllegalStateException for an order of nothing, after both writes: the transaction rolls back, and with it
   *     the message
   */
  @Transactional
  public long placeOrder(String item, int quantity) {
    long orderId = dsl.insertInto(table(name("orders")))
        .columns(field(name("item"), String.class), field(name("quantity"), Integer.class))
        .values(item, quantity)
        .returningResult(field(name("id"), Long.class))
        .fetchOne()
        .value1();
    queues.publish(SHIPPING, "{\"orderId\": " + orderId + ", \"quantity\": " + quantity + "}");
    if (quantity <= 0) {
      throw new IllegalStateException("an order of nothing: order " + orderId + " is rolled back");
    }
    return orderId;
  }
}
