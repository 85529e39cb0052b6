/**
 * Internal: the publish room (keep-alive, insert, heal, wake-up, group commit, payload checks). Not an API; may change
 * in any release.
 */
package dev.msgqueue.internal.publish;
