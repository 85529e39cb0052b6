package dev.msgqueue;

/**
 * A publish named a queue that does not exist and whose {@link QueueSpec} is not auto-deleted. Such queues are never
 * reaped, so their absence is a real error (a queue never bound, or deleted by hand) and is never healed or masked.
 * This is the typed form of PostgreSQL's foreign-key violation on {@code "MessageQueueItem_queueId_fkey"} (SQLSTATE
 * 23503): the publish statement is shaped so that the violation cannot abort the caller's transaction.
 */
public final class QueueNotFoundException extends MsgQueueException {
  private static final long serialVersionUID = 1L;
  private final String queueName;

  public QueueNotFoundException(String queueName) {
    super("queue \"" + queueName + "\" does not exist and is not auto-deleted, so it is not re-created on publish"
        + " (foreign key MessageQueueItem_queueId_fkey, SQLSTATE 23503); bind it first");
    this.queueName = queueName;
  }

  public String queueName() {
    return queueName;
  }
}
