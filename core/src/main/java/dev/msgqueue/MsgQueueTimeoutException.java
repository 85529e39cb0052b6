package dev.msgqueue;

/**
 * A statement msgqueue issued ran into {@link MsgQueueConfig#statementTimeout()} or, in the transactions msgqueue
 * runs itself, {@link MsgQueueConfig#lockTimeout()} (SQLSTATE 57014 or 55P03): typically it waited for a lock that
 * another transaction held too long. The statement had no effect; inside your transaction, that transaction is now
 * aborted and must be rolled back.
 */
public final class MsgQueueTimeoutException extends MsgQueueException {
  private static final long serialVersionUID = 1L;

  public MsgQueueTimeoutException(String message, Throwable cause) {
    super(message, cause);
  }
}
