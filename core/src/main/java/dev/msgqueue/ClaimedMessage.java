package dev.msgqueue;

import dev.msgqueue.internal.sql.Receipt;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Objects;
import org.jooq.JSONB;

/**
 * A message claimed by {@link MsgQueueRepository#claim}, carrying the receipt that {@link MsgQueueRepository#ack}
 * and {@link MsgQueueRepository#release} must match: the item's id and the deadline the claim stored in its
 * {@code "readAfter"}. A receipt settles its claim once: after an ack or release, do not use it again.
 */
public final class ClaimedMessage {
  private final String queueName;
  private final JSONB payload;
  private final Receipt receipt;

  ClaimedMessage(String queueName, JSONB payload, Receipt receipt) {
    this.queueName = Objects.requireNonNull(queueName, "queueName");
    this.payload = Objects.requireNonNull(payload, "payload");
    this.receipt = Objects.requireNonNull(receipt, "receipt");
  }

  /** The message id, as returned by the publish. */
  public long id() {
    return receipt.id();
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
    return receipt.deadline();
  }

  /**
   * Whether the item was already ASSIGNED when this claim took it: an earlier claim's lease ran out without an ack or
   * release (its consumer crashed, hung, or lost the connection). Only lease mode re-claims ASSIGNED items.
   */
  boolean redelivered() {
    return receipt.redelivered();
  }

  /** The receipt that settles or extends this claim. */
  Receipt receipt() {
    return receipt;
  }

  /** The same message under the receipt of a lease extension. */
  ClaimedMessage withReceipt(Receipt extended) {
    return new ClaimedMessage(queueName, payload, extended);
  }

  /** The receipts of {@code messages}, in their order: what the claim statements check. */
  static List<Receipt> receipts(Collection<ClaimedMessage> messages) {
    List<Receipt> receipts = new ArrayList<>(messages.size());
    for (ClaimedMessage message : messages) {
      receipts.add(message.receipt);
    }
    return receipts;
  }

  @Override
  public String toString() {
    return "ClaimedMessage[id=" + receipt.id() + ", queue=" + queueName + "]";
  }
}
