package dev.msgqueue.internal.publish;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.internal.sql.NotifyStatements;
import dev.msgqueue.internal.support.IntervalThrottle;
import org.jooq.DSLContext;

/**
 * The publisher side of subscriber wake-ups: after a publish, sends {@code NOTIFY msgqueue_wakeup, '<queue>'} so that
 * idle subscribers claim at once instead of at their next poll.
 *
 * <p>Coalesced: a notifying transaction takes PostgreSQL's database-wide notification-queue lock while it commits,
 * serializing the commits of all notifying transactions, so at most one publish per queue per window in this process
 * sends one (never one per message), and none when disabled. A publish inside the window relies on the earlier
 * notification, on the subscribers' follow-up claim after a wake-up, and on their polling. A notification sent in a
 * transaction that rolls back is lost along with its messages; the window still counts it (the next window notifies).
 * Autocommit publishes' notifications are sent on a thread of their own, those of different queues batched into one
 * statement ({@link WakeupBatcher}); one that fails frees its queue's window.
 */
public final class Wakeups {
  // One notification per queue per window: the same bounded throttle as the keep-alive.
  private final IntervalThrottle throttle;
  private final WakeupBatcher batcher;

  private Wakeups(IntervalThrottle throttle, DSLContext own) {
    this.throttle = throttle;
    this.batcher = throttle == null ? null : new WakeupBatcher(own, throttle::forget);
  }

  /** @param own the repository's own context, which autocommit publishes' notifications go out through */
  public static Wakeups from(MsgQueueConfig config, DSLContext own) {
    return new Wakeups(config.wakeupNotifications()
        ? new IntervalThrottle(config.wakeupWindow(), config.maxTrackedQueues()) : null, own);
  }

  /**
   * Called after messages were inserted into {@code queue} through {@code ctx}. In autocommit (the messages are
   * committed) the notification goes out on the repository's own connections after this returns, batched with other
   * queues' ({@link WakeupBatcher}); inside a caller's transaction it is sent in that transaction, through
   * {@code ctx}, so that it is delivered at its commit and not at all if it rolls back.
   */
  public void published(DSLContext ctx, String queue, boolean autoCommit) {
    if (throttle != null && throttle.tryPass(queue)) {
      try {
        if (autoCommit) {
          batcher.send(queue);
        } else {
          NotifyStatements.notifyWakeup(ctx, queue);
        }
      } catch (RuntimeException e) {
        // Nothing was notified: the queue's next publish must not be held back by this window.
        throttle.forget(queue);
        throw e;
      }
    }
  }
}
