package dev.msgqueue.internal.sql;

import java.time.LocalDateTime;

/**
 * What settles or extends a claim: the message id and the deadline its claim (or last lease extension) stored in
 * {@code "readAfter"}, and whether that claim took over a lease that ran out. The API's {@code ClaimedMessage} carries
 * one; every statement that checks a receipt takes these.
 *
 * @param deadline UTC, millisecond precision
 * @param redelivered whether the message was already ASSIGNED when its claim took it (lease mode only)
 */
public record Receipt(long id, LocalDateTime deadline, boolean redelivered) {
  /** The same claim under the deadline a lease extension stored. */
  public Receipt extendedTo(LocalDateTime newDeadline) {
    return new Receipt(id, newDeadline, redelivered);
  }
}
