package dev.msgqueue.example.orders;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.msgqueue.spring.MsgQueueListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;

/**
 * Ships placed orders: one call per message on the shipping queue. Lease mode (at least once): a message whose
 * handler throws, or whose process dies, is delivered again after 30 s.
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

  @MsgQueueListener(queue = OrderService.SHIPPING_QUEUE, lease = "30s")
  void ship(String payload) throws JsonProcessingException {
    ShippingMessage message = json.readValue(payload, ShippingMessage.class);
    orders.ship(message.orderId());
    log.info("shipped order {}", message.orderId());
  }
}
