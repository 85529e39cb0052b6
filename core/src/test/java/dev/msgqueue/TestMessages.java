package dev.msgqueue;

import dev.msgqueue.internal.consume.ClaimedMessages;
import dev.msgqueue.internal.sql.Receipt;
import java.time.LocalDateTime;
import org.jooq.JSONB;

/** Claimed messages for the consume room's tests, which cannot call the package-private constructor. */
public final class TestMessages {
  private TestMessages() { }

  /** The API's own way to make and read claimed messages. */
  public static ClaimedMessages access() {
    return ClaimedMessageAccess.INSTANCE;
  }

  /** Message {@code id} of {@code queue}, under a receipt with a fixed deadline. */
  public static ClaimedMessage message(String queue, long id) {
    return ClaimedMessageAccess.INSTANCE.of(queue, JSONB.valueOf("{\"n\":" + id + "}"),
        new Receipt(id, LocalDateTime.of(2030, 1, 1, 0, 0), false));
  }
}
