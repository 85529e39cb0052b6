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
 */
public final class Wakeups {
  // One notification per queue per window: the same bounded throttle as the keep-alive.
  private final IntervalThrottle throttle;

  private Wakeups(IntervalThrottle throttle) {
    this.throttle = throttle;
  }

  public static Wakeups from(MsgQueueConfig config) {
    return new Wakeups(config.wakeupNotifications()
        ? new IntervalThrottle(config.wakeupWindow(), config.maxTrackedQueues()) : null);
  }

  /** Called after messages were inserted into {@code queue} through {@code ctx}. */
  public void published(DSLContext ctx, String queue) {
    if (throttle != null && throttle.tryPass(queue)) {
      NotifyStatements.notifyWakeup(ctx, queue);
    }
  }
}
