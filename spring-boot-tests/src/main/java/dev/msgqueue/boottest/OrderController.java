package dev.msgqueue.boottest;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/** The service's HTTP API: place orders, see what was shipped. */
@RestController
public class OrderController {
  private final Orders orders;
  private final Shipping shipping;

  public OrderController(Orders orders, Shipping shipping) {
    this.orders = orders;
    this.shipping = shipping;
  }

  /** Places an order (a JSON body); answers the message id. */
  @PostMapping("/orders")
  public Map<String, Object> place(@RequestBody String order) {
    return Map.of("id", orders.place(order));
  }

  /** Places an order on {@code queue} (auto-deleted); answers the message id. */
  @PostMapping("/queues/{queue}/orders")
  public Map<String, Object> placeOn(@PathVariable String queue, @RequestBody String order) {
    return Map.of("id", orders.placeOn(queue, order));
  }

  /** Places an order on {@code queue} and fails (409) after it, with or without housekeeping in between. */
  @PostMapping("/failing-orders/{queue}")
  public void placeThenFail(@PathVariable String queue, @RequestParam(defaultValue = "false") boolean housekeeping,
      @RequestBody String order) {
    orders.placeThenFail(queue, order, housekeeping);
  }

  /** Places an order to be fulfilled (a JSON body); answers the message id. */
  @PostMapping("/fulfilments")
  public Map<String, Object> fulfil(@RequestBody String order) {
    return Map.of("id", orders.fulfil(order));
  }

  @GetMapping("/shipped")
  public List<Long> shipped() {
    return shipping.shipped();
  }

  @ExceptionHandler(Orders.OrderFailed.class)
  public ResponseEntity<Map<String, Object>> failed(Orders.OrderFailed failure) {
    Map<String, Object> body = new HashMap<>();
    body.put("id", failure.id);
    body.put("visibleInTransaction", failure.visibleInTransaction);
    body.put("housekeeping", failure.housekeeping == null ? "not run" : failure.housekeeping.name());
    return ResponseEntity.status(HttpStatus.CONFLICT).body(body);
  }
}
