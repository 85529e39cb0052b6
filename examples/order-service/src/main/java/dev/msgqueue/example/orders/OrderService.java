package dev.msgqueue.example.orders;

import static dev.msgqueue.example.orders.OrderTables.ORDERS;
import static dev.msgqueue.example.orders.OrderTables.ORDER_ID;
import static dev.msgqueue.example.orders.OrderTables.ORDER_ITEM;
import static dev.msgqueue.example.orders.OrderTables.ORDER_PLACED_AT;
import static dev.msgqueue.example.orders.OrderTables.ORDER_QUANTITY;
import static dev.msgqueue.example.orders.OrderTables.ORDER_SHIPPED_AT;
import static dev.msgqueue.example.orders.OrderTables.ORDER_STATUS;
import static dev.msgqueue.example.orders.OrderTables.STOCK;
import static dev.msgqueue.example.orders.OrderTables.STOCK_AVAILABLE;
import static dev.msgqueue.example.orders.OrderTables.STOCK_ITEM;
import static org.jooq.impl.DSL.coalesce;
import static org.jooq.impl.DSL.currentOffsetDateTime;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import java.util.Optional;
import org.jooq.DSLContext;
import org.jooq.Record;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/** Places orders and ships them; a placed order's shipping message commits with it, or neither does. */
@Service
public class OrderService {
  static final String SHIPPING_QUEUE = "shipping";
  static final QueueSpec SHIPPING = QueueSpec.durable(SHIPPING_QUEUE);
  static final int MAX_QUANTITY = 1_000;

  private final DSLContext dsl;
  private final MsgQueueRepository queues;
  private final ObjectMapper json;

  public OrderService(DSLContext dsl, MsgQueueRepository queues, ObjectMapper json) {
    this.dsl = dsl;
    this.queues = queues;
    this.json = json;
    // A durable queue must exist before the first publish; the listener binds it too, but it starts after the web
    // server, so an order placed in between would find no queue.
    queues.bindQueue(SHIPPING);
  }

  /**
   * Stores the order, publishes its shipping message and reserves its stock, in one transaction.
   *
   * @throws InvalidOrderException for a blank item or a quantity outside 1 to 1,000, before any SQL
   * @throws UnknownItemException for an item the stock does not list, before anything is written
   * @throws OutOfStockException when the stock is short: the order and its message roll back
   */
  @Transactional
  public Order place(String item, int quantity) {
    if (item == null || item.isBlank() || item.length() > 100) {
      throw new InvalidOrderException("item must be 1 to 100 characters, not blank");
    }
    if (quantity < 1 || quantity > MAX_QUANTITY) {
      throw new InvalidOrderException("quantity must be 1 to " + MAX_QUANTITY + ", not " + quantity);
    }
    if (!dsl.fetchExists(STOCK, STOCK_ITEM.eq(item))) {
      throw new UnknownItemException(item);
    }
    Order order = dsl.insertInto(ORDERS)
        .set(ORDER_ITEM, item)
        .set(ORDER_QUANTITY, quantity)
        .set(ORDER_STATUS, OrderStatus.PLACED)
        .returningResult(ORDER_ID, ORDER_ITEM, ORDER_QUANTITY, ORDER_STATUS, ORDER_PLACED_AT, ORDER_SHIPPED_AT)
        .fetchSingle(OrderService::toOrder);
    queues.publish(SHIPPING, toJson(new ShippingMessage(order.id())));
    // Reserved last so that a short stock shows the guarantee: the order and the message published above roll back
    // together.
    int reserved = dsl.update(STOCK)
        .set(STOCK_AVAILABLE, STOCK_AVAILABLE.minus(quantity))
        .where(STOCK_ITEM.eq(item).and(STOCK_AVAILABLE.ge(quantity)))
        .execute();
    if (reserved == 0) {
      throw new OutOfStockException(item, quantity);
    }
    return order;
  }

  /** The order, if there is one with this id. */
  @Transactional(readOnly = true)
  public Optional<Order> find(long orderId) {
    return dsl.select(ORDER_ID, ORDER_ITEM, ORDER_QUANTITY, ORDER_STATUS, ORDER_PLACED_AT, ORDER_SHIPPED_AT)
        .from(ORDERS)
        .where(ORDER_ID.eq(orderId))
        .fetchOptional(OrderService::toOrder);
  }

  /**
   * Marks the order shipped. Idempotent, as a lease-mode handler must be: a redelivered message keeps the first
   * shipping time.
   *
   * @throws IllegalStateException when there is no such order (the message is redelivered after its lease)
   */
  @Transactional
  public void ship(long orderId) {
    int updated = dsl.update(ORDERS)
        .set(ORDER_STATUS, OrderStatus.SHIPPED)
        .set(ORDER_SHIPPED_AT, coalesce(ORDER_SHIPPED_AT, currentOffsetDateTime()))
        .where(ORDER_ID.eq(orderId))
        .execute();
    if (updated == 0) {
      throw new IllegalStateException("no order " + orderId + " to ship");
    }
  }

  private String toJson(ShippingMessage message) {
    try {
      return json.writeValueAsString(message);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  private static Order toOrder(Record row) {
    return new Order(row.get(ORDER_ID), row.get(ORDER_ITEM), row.get(ORDER_QUANTITY), row.get(ORDER_STATUS),
        row.get(ORDER_PLACED_AT), row.get(ORDER_SHIPPED_AT));
  }
}
