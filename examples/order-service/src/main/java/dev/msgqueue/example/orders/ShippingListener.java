package dev.msgqueue.example.orders;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.msgqueue.spring.MsgQueueListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;

/**
 * Ships placed orders: one call per message on the shipping queue, in the default mode: the method runs inside the
 * transaction that holds its message, which {@code OrderService.ship} joins, so the order is marked shipped exactly
 * when its message leaves the queue. A handler that throws rolls the mark back and its message is delivered again
 * after a backoff; a process that dies gives its messages back at once.
 */
@Component
class ShippingListener {
  private static final Logger log = LoggerFactory.getLogger(ShippingListener.class);

  private final OrderService orders;
  private final ObjectMapper json;

  ShippingListener(OrderService orders, ObjectMapper json) {
    this.orders = orders;
    this.json = json;
  }

  @MsgQueueListener(queue = OrderService.SHIPPING_QUEUE)
  void ship(String payload) throws JsonProcessingException {
    ShippingMessage message = json.readValue(payload, ShippingMessage.class);
    orders.ship(message.orderId());
    log.info("shipped order {}", message.orderId());
  }
}
