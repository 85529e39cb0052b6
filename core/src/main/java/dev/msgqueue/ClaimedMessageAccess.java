package dev.msgqueue;

import dev.msgqueue.internal.consume.ClaimedMessages;
import dev.msgqueue.internal.sql.Receipt;
import org.jooq.JSONB;

/**
 * The consume room's way to make and read the API's {@link ClaimedMessage}, whose constructor and receipt stay out of
 * the public API. Apart from the message itself, so that the message does not depend on the room that uses it.
 */
final class ClaimedMessageAccess implements ClaimedMessages {
  static final ClaimedMessages INSTANCE = new ClaimedMessageAccess();

  private ClaimedMessageAccess() { }

  @Override
  public ClaimedMessage of(String queue, JSONB payload, Receipt receipt) {
    return new ClaimedMessage(queue, payload, receipt);
  }

  @Override
  public Receipt receiptOf(ClaimedMessage message) {
    return message.receipt();
  }
}
