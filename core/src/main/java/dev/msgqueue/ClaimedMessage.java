package dev.msgqueue;

import java.time.LocalDateTime;
import java.util.Objects;
import org.jooq.JSONB;

/**
 * A message claimed by {@link MsgQueueRepository#claim}, carrying the receipt that {@link MsgQueueRepository#ack}
 * and {@link MsgQueueRepository#release} must match: the item's id and the deadline the claim stored in its
 * {@code "readAfter"}. A receipt settles its claim once: after an ack or release, do not use it again.
 */
public final class ClaimedMessage {
  private final long id;
  private final String queueName;
  private final JSONB payload;
  private final LocalDateTime receiptDeadline;
  private final boolean redelivered;

  ClaimedMessage(long id, String queueName, JSONB payload, LocalDateTime receiptDeadline) {
    this(id, queueName, payload, receiptDeadline, false);
  }

  ClaimedMessage(long id, String queueName, JSONB payload, LocalDateTime receiptDeadline, boolean redelivered) {
    this.id = id;
    this.redelivered = redelivered;
    this.queueName = Objects.requireNonNull(queueName, "queueName");
    this.payload = Objects.requireNonNull(payload, "payload");
    this.receiptDeadline = Objects.requireNonNull(receiptDeadline, "receiptDeadline");
  }

  /** The message id, as returned by the publish. */
  public long id() {
    return id;
  }

  public String queueName() {
    return queueName;
  }

  /** The payload as JSON text (PostgreSQL's {@code jsonb} normal form, not necessarily the published spelling). */
  public String payload() {
    return payload.data();
  }

  public JSONB payloadJsonb() {
    return payload;
  }

  /**
   * The deadline this claim stored (UTC, millisecond precision): in lease mode, when the item becomes claimable again
   * unless acked; in the default mode, the item's expiry.
   */
  LocalDateTime receiptDeadline() {
    return receiptDeadline;
  }

  /**
   * Whether the item was already ASSIGNED when this claim took it: an earlier claim's lease ran out without an ack or
   * release (its consumer crashed, hung, or lost the connection). Only lease mode re-claims ASSIGNED items.
   */
  boolean redelivered() {
    return redelivered;
  }

  /** The same message under the receipt of a later claim or lease extension. */
  ClaimedMessage withReceiptDeadline(LocalDateTime deadline) {
    return new ClaimedMessage(id, queueName, payload, deadline, redelivered);
  }

  @Override
  public String toString() {
    return "ClaimedMessage[id=" + id + ", queue=" + queueName + "]";
  }
}
