/** Internal: argument checks and the daemon threads msgqueue starts. Not an API; may change in any release. */
package dev.msgqueue.internal.support;
