package dev.msgqueue;

/**
 * The database connection failed while msgqueue was using it (SQLSTATE class 08, or the server ended the session:
 * 57P01-57P03). If it failed during an autocommit publish, <b>the outcome is unknown</b>: the message may or may not
 * have been committed. Retrying may store it twice; consumers that must not see duplicates deduplicate by content.
 */
public final class MsgQueueConnectionException extends MsgQueueException {
  private static final long serialVersionUID = 1L;

  public MsgQueueConnectionException(String message, Throwable cause) {
    super(message, cause);
  }
}
