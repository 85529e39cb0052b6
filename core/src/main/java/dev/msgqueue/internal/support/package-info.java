/**
 * Internal: what every room shares (a repository's context, its events and keep-alive throttle), statement deadlines,
 * failure translation, argument checks and the daemon threads msgqueue starts. Not an API; may change in any release.
 */
package dev.msgqueue.internal.support;
