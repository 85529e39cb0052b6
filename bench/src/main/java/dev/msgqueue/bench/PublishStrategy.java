package dev.msgqueue.bench;

import org.jooq.DSLContext;

/**
 * One way of publishing a message, as the benchmark compares them. {@link #open} binds it to one publisher's own
 * connection; every strategy gets the same connection handling (one autocommit connection per publisher thread) and
 * renders its statements with typed jOOQ over the generated tables.
 */
interface PublishStrategy {
  /** The strategy's name in the report, e.g. {@code optimistic-heal}. */
  String id();

  /** A publisher for one thread, running its statements on {@code publisherContext} (that thread's connection). */
  Publisher open(DSLContext publisherContext);

  /** Publishes on one connection; not thread-safe (each thread opens its own). */
  interface Publisher {
    /**
     * Publishes once (one message, or one batch).
     *
     * @return how many messages were stored
     */
    int publish();
  }
}
