/**
 * Internal: the consume room. The consuming pipeline behind {@code dev.msgqueue.Subscriber} (claims, a handler pool,
 * an ack batcher and the per-subscriber housekeeping), on threads shared by the subscribers of one repository, reaching
 * the database only through {@link dev.msgqueue.internal.consume.ConsumerStore}; what a subscriber does beyond the API
 * ({@link dev.msgqueue.internal.consume.Consumption}); retries and dead letters. Not an API; may change in any release.
 */
package dev.msgqueue.internal.consume;
