package dev.msgqueue.internal.maintenance;

import dev.msgqueue.QueueStatisticsSnapshot;
import dev.msgqueue.internal.sql.MaintenanceStatements;
import dev.msgqueue.internal.sql.StatisticsStatements;
import dev.msgqueue.internal.support.MsgQueueEvents;
import dev.msgqueue.internal.support.QueueContext;
import java.util.List;
import org.jooq.DSLContext;

/**
 * The maintenance of one repository, always on its own connections, never on a transaction a caller has open: the
 * reaper, the cleanup, the housekeeper's turn and the statistics it refreshes. What the housekeeper runs each tick and
 * what the repository's {@code reapIdleQueues()} and {@code cleanUpExpiredMessages()} run are these same jobs.
 */
public final class Maintenance {
  private final QueueContext context;
  private final IdleQueueReaper reaper;
  private final ExpiredMessageCleanup cleanup;

  public Maintenance(QueueContext context) {
    this.context = context;
    this.reaper = new IdleQueueReaper(context.own(), context.config());
    this.cleanup = new ExpiredMessageCleanup(context.own(), context.config());
  }

  /** Reaps idle auto-deleted queues (see {@link IdleQueueReaper}). @return the names of the queues deleted */
  public List<String> reapIdleQueues() {
    List<String> reaped = reaper.reap();
    context.report().reaped(reaped.size());
    // A reaped queue's next publish must write its keep-alive (and heal it) at once.
    reaped.forEach(context.keepAlives()::forget);
    return reaped;
  }

  /** Deletes expired messages (see {@link ExpiredMessageCleanup}). @return how many it deleted */
  public int cleanUpExpiredMessages() {
    int deleted = cleanup.deleteExpired();
    context.report().expiredDeleted(deleted);
    return deleted;
  }

  /**
   * Takes the housekeeping turn for the transaction open on {@code lockConnection} (a context over that one
   * connection), if no other replica holds it; see {@link MaintenanceStatements#tryAdvisoryLock}.
   */
  public static boolean tryTurn(DSLContext lockConnection, long key) {
    return MaintenanceStatements.tryAdvisoryLock(lockConnection, key);
  }

  /**
   * Refreshes the statistics gauges, if metrics want them, from one read on the own connections.
   *
   * @return what was read, or {@code null} if no metrics want the statistics (nothing was read)
   */
  public QueueStatisticsSnapshot refreshStatistics() {
    MsgQueueEvents events = context.report();
    if (!events.wantsStatistics()) {
      return null;
    }
    QueueStatisticsSnapshot snapshot = StatisticsStatements.snapshot(context.own());
    events.statistics(snapshot.queues());
    return snapshot;
  }
}
