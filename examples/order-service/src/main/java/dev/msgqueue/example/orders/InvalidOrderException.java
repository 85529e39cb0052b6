package dev.msgqueue.example.orders;

/** An order request the service refuses before any SQL: a blank item, a quantity out of range. */
public class InvalidOrderException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  public InvalidOrderException(String message) {
    super(message);
  }
}
