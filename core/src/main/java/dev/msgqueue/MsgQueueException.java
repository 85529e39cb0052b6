package dev.msgqueue;

/** The base of the exceptions msgqueue raises for conditions a caller can act on. */
public class MsgQueueException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public MsgQueueException(String message) {
    super(message);
  }

  public MsgQueueException(String message, Throwable cause) {
    super(message, cause);
  }
}
