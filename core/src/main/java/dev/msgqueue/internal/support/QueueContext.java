package dev.msgqueue.internal.support;

import dev.msgqueue.MsgQueueConfig;
import org.jooq.DSLContext;

/**
 * What every room of one repository works with: the context its statements run on (the caller's, in a view of a
 * caller's transaction), the repository's own connections (never a caller's transaction: keep-alives, heals and
 * maintenance run there), the configuration, where events go, and which queues' keep-alive was written lately.
 * Both contexts bound every statement by the statement timeout and translate its failures into msgqueue's typed
 * exceptions.
 *
 * @param statements the context the repository's (or the view's) statements run on
 * @param own the repository's own connections
 * @param keepAlives one pass per queue per keep-alive interval: which publish writes the queue's keep-alive
 */
public record QueueContext(
    DSLContext statements, DSLContext own, MsgQueueConfig config, EventSink events, IntervalThrottle keepAlives) {

  /** This context with its statements on {@code bound}, sharing everything else (a view of a caller's transaction). */
  public QueueContext on(DSLContext bound) {
    return new QueueContext(bound, own, config, events, keepAlives);
  }

  /** The current event target. */
  public MsgQueueEvents report() {
    return events.events();
  }
}
