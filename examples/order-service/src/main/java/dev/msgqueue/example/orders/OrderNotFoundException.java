package dev.msgqueue.example.orders;

/** No order has the id asked for. */
public class OrderNotFoundException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public OrderNotFoundException(long orderId) {
    super("no order " + orderId);
  }
}
