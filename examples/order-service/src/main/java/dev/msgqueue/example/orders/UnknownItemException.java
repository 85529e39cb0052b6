package dev.msgqueue.example.orders;

/** An order for an item the stock does not list: nothing is stored or published. */
public class UnknownItemException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public UnknownItemException(String item) {
    super("no item \"" + item + "\" is sold here");
  }
}
