package dev.msgqueue.example.orders;

import java.net.URI;
import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.support.ServletUriComponentsBuilder;

/**
 * {@code POST /orders} places an order ({@code {"item": "book", "quantity": 2}}: 201 with the order, status PLACED);
 * {@code GET /orders/{id}} shows it, status SHIPPED once the shipping listener has handled its message.
 */
@RestController
@RequestMapping("/orders")
class OrderController {
  private final OrderService orders;

  OrderController(OrderService orders) {
    this.orders = orders;
  }

  record PlaceOrder(String item, int quantity) {
  }

  @PostMapping
  ResponseEntity<Order> place(@RequestBody PlaceOrder request) {
    Order order = orders.place(request.item(), request.quantity());
    URI location = ServletUriComponentsBuilder.fromCurrentRequest().path("/{id}").buildAndExpand(order.id()).toUri();
    return ResponseEntity.created(location).body(order);
  }

  @GetMapping("/{id}")
  ResponseEntity<Order> show(@PathVariable long id) {
    return ResponseEntity.of(orders.find(id));
  }

  @ExceptionHandler
  ProblemDetail badRequest(IllegalArgumentException e) {
    return ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST, e.getMessage());
  }

  @ExceptionHandler
  ProblemDetail outOfStock(OutOfStockException e) {
    return ProblemDetail.forStatusAndDetail(HttpStatus.CONFLICT, e.getMessage());
  }
}
