/**
 * Internal: the SQL msgqueue runs, each statement written once with the locks it takes. Not an API; may change in
 * any release.
 */
package dev.msgqueue.internal.sql;
