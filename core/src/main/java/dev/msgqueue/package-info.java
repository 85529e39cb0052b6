/**
 * msgqueue: a PostgreSQL message queue. Start with {@link dev.msgqueue.MsgQueueRepository} (publish, claim,
 * housekeeping) and {@link dev.msgqueue.Subscriber} (a consuming loop).
 *
 * <p>Bad input, a null argument included, fails with {@link java.lang.IllegalArgumentException} naming the problem,
 * before any SQL runs, so it never aborts a caller's transaction. A parameter accepts null only where its Javadoc says
 * what null means. Every duration setting has a documented upper bound, checked when it is set.
 */
package dev.msgqueue;
