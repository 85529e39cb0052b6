/**
 * Internal: the consume room (what a subscriber does beyond the API, retries and dead letters). Not an API; may
 * change in any release.
 */
package dev.msgqueue.internal.consume;
