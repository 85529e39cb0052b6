package dev.msgqueue.example.orders;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.msgqueue.spring.MsgQueueListener;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;

/** Ships placed orders: one handler call per message on the "shipping" queue. */
@Component
public class ShippingListener {
  private static final Logger log = LoggerFactory.getLogger(ShippingListener.class);
  private final ObjectMapper json = new ObjectMapper();
  private final List<Long> shipped = new CopyOnWriteArrayList<>();

  @MsgQueueListener(queue = "shipping", lease = "30s")
  void ship(String payload) throws Exception {
    JsonNode order = json.readTree(payload);
    long orderId = order.path("orderId").asLong();
    log.info("shipping order {}", orderId);
    shipped.add(orderId);
  }

  /** The orders shipped so far by this instance. */
  public List<Long> shipped() {
    return List.copyOf(shipped);
  }
}
