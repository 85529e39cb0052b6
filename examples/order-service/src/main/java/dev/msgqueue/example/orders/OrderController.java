package dev.msgqueue.example.orders;

import java.net.URI;
import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.http.converter.HttpMessageNotReadableException;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.method.annotation.MethodArgumentTypeMismatchException;
import org.springframework.web.servlet.support.ServletUriComponentsBuilder;

/**
 * {@code POST /orders} places an order ({@code {"item": "book", "quantity": 2}}: 201 with the order, status PLACED);
 * {@code GET /orders/{id}} shows it, status SHIPPED once the shipping listener has handled its message. Every refusal
 * is an {@code application/problem+json} body whose detail names what to change, never a Java exception's text.
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
  Order show(@PathVariable long id) {
    return orders.find(id).orElseThrow(() -> new OrderNotFoundException(id));
  }

  @ExceptionHandler
  ProblemDetail invalid(InvalidOrderException e) {
    return ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST, e.getMessage());
  }

  /** A body that is not JSON, or not an order's (a quantity that is no number, say). */
  @ExceptionHandler
  ProblemDetail unreadable(HttpMessageNotReadableException e) {
    return ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST,
        "the body must be a JSON object such as {\"item\": \"book\", \"quantity\": 2}");
  }

  /** {@code /orders/abc}: the id in the path is no number. */
  @ExceptionHandler
  ProblemDetail notAnId(MethodArgumentTypeMismatchException e) {
    return ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST, "an order id is a whole number");
  }

  /**
   * An item the stock does not list: 422, not 404 (the resource asked for, {@code /orders}, exists; what is wrong is
   * a value in a well-formed request) and not 409 (no state of the stock would accept it).
   */
  @ExceptionHandler
  ProblemDetail unknownItem(UnknownItemException e) {
    return ProblemDetail.forStatusAndDetail(HttpStatus.UNPROCESSABLE_ENTITY, e.getMessage());
  }

  @ExceptionHandler
  ProblemDetail outOfStock(OutOfStockException e) {
    return ProblemDetail.forStatusAndDetail(HttpStatus.CONFLICT, e.getMessage());
  }

  @ExceptionHandler
  ProblemDetail notFound(OrderNotFoundException e) {
    return ProblemDetail.forStatusAndDetail(HttpStatus.NOT_FOUND, e.getMessage());
  }
}
