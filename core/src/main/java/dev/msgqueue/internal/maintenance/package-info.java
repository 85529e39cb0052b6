/**
 * Internal: the maintenance jobs the {@link dev.msgqueue.Housekeeper} runs (the idle-queue reaper and the
 * expired-message cleanup), on the repository's own connections. Not an API; may change in any release.
 */
package dev.msgqueue.internal.maintenance;
