package dev.msgqueue.boottest;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.spring.MsgQueueListener;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.springframework.stereotype.Component;

/** Ships every order published to {@link BootService#ORDERS}. */
@Component
public class Shipping {
  private final List<Long> shipped = new CopyOnWriteArrayList<>();

  @MsgQueueListener(queue = BootService.ORDERS)
  void ship(ClaimedMessage order) {
    shipped.add(order.id());
  }

  /** The ids of the messages shipped so far, in order. */
  public List<Long> shipped() {
    return List.copyOf(shipped);
  }
}
