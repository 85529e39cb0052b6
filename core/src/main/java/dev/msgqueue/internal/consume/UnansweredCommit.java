package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import java.util.List;

/**
 * A take returned its messages but the commit of its transaction went unanswered (the connection failed after the
 * commit was sent): the messages are taken if and only if that transaction committed, which
 * {@link Consumption#committed} tells once the server has settled it.
 */
public final class UnansweredCommit extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final transient List<ClaimedMessage> taken;
  private final long transactionId;

  UnansweredCommit(String queue, List<ClaimedMessage> taken, long transactionId, Throwable cause) {
    super("the commit of a take of " + taken.size() + " message(s) of \"" + queue + "\" (transaction "
        + transactionId + ") went unanswered", cause);
    this.taken = List.copyOf(taken);
    this.transactionId = transactionId;
  }

  /** The messages the take returned: taken only if its transaction committed. */
  public List<ClaimedMessage> taken() {
    return taken;
  }

  /** The take's transaction, for {@link Consumption#committed}. */
  public long transactionId() {
    return transactionId;
  }
}
