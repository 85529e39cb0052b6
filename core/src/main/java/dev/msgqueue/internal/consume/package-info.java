/**
 * Internal: the consuming pipeline behind {@link dev.msgqueue.Subscriber} (claims, a handler pool, an ack batcher and
 * the per-subscriber housekeeping), on threads shared by the subscribers of one repository. It reaches the database
 * only through {@link dev.msgqueue.internal.consume.ConsumerStore}. Not an API; may change in any release.
 */
package dev.msgqueue.internal.consume;
