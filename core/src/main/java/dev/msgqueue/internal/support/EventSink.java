package dev.msgqueue.internal.support;

/**
 * Where one repository, its views, subscribers and housekeepers report their events: shared by all of them, so
 * metrics bound once see every one. Reports go nowhere until metrics are bound.
 */
public final class EventSink {
  private volatile MsgQueueEvents target = MsgQueueEvents.NONE;

  /** The current target: call it, do not keep it (metrics may be bound or unbound at any time). */
  public MsgQueueEvents events() {
    return target;
  }

  /** Sends every later event to {@code events} ({@link MsgQueueEvents#NONE} to stop). */
  public void reportTo(MsgQueueEvents events) {
    this.target = Arguments.requireNonNull(events, "events");
  }
}
