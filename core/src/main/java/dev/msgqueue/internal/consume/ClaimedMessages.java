package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.internal.sql.Receipt;
import org.jooq.JSONB;

/**
 * How the consume room makes and reads the API's {@link ClaimedMessage}, whose constructor and receipt stay out of the
 * public API: the API package hands its one implementation to the room.
 */
public interface ClaimedMessages {
  /** A claimed message of {@code queue} under {@code receipt}. */
  ClaimedMessage of(String queue, JSONB payload, Receipt receipt);

  /** The receipt that settles or extends {@code message}'s claim. */
  Receipt receiptOf(ClaimedMessage message);
}
