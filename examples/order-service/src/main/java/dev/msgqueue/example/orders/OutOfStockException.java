package dev.msgqueue.example.orders;

/** Not enough of an item in stock for an order: the order is not placed, and its message is not published. */
public class OutOfStockException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public OutOfStockException(String item, int quantity) {
    super("not enough \"" + item + "\" in stock for " + quantity);
  }
}
