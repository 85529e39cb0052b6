package dev.msgqueue;

import dev.msgqueue.internal.support.Arguments;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.DoubleSupplier;
import org.jooq.DSLContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The decisions behind {@link MsgQueueRepository#fail} and the redelivery count; the SQL is in {@link RetryStatements}. */
final class Retries {
  /** The longest error class name kept (Java's are far shorter; this only bounds what a row can hold). */
  static final int MAX_ERROR_CLASS_CHARS = 1_000;
  private static final Logger log = LoggerFactory.getLogger(Retries.class);
  private static final DoubleSupplier RANDOM = () -> ThreadLocalRandom.current().nextDouble();

  private Retries() { }

  /** See {@link MsgQueueRepository#fail}; arguments already validated. */
  static FailureOutcome fail(DSLContext ctx, ClaimedMessage message, Throwable error, RetryPolicy policy) {
    Optional<Integer> earlier = RetryStatements.failedDeliveries(ctx, message);
    if (earlier.isEmpty()) {
      return FailureOutcome.NOT_HELD;
    }
    int failed = earlier.get() + 1;
    String errorClass = text(error.getClass().getName(), MAX_ERROR_CLASS_CHARS);
    String errorMessage = text(error.getMessage(), DeadLetter.MAX_ERROR_MESSAGE_CHARS);
    if (failed >= policy.maxDeliveries()) {
      boolean moved = RetryStatements.deadLetter(ctx, message, policy.deadLetterQueue(), policy.deadLetterTtl(), 1,
          errorClass, errorMessage) > 0;
      if (moved) {
        log.warn("message {} of \"{}\" failed delivery {} of {}; moved to dead-letter queue \"{}\" ({}: {})",
            message.id(), message.queueName(), failed, policy.maxDeliveries(), policy.deadLetterQueue(), errorClass,
            errorMessage);
      }
      return moved ? FailureOutcome.DEAD_LETTERED : FailureOutcome.NOT_HELD;
    }
    boolean released = RetryStatements.releaseForRetry(ctx, message, policy.backoff(failed, RANDOM), errorClass,
        errorMessage) > 0;
    return released ? FailureOutcome.RETRY_SCHEDULED : FailureOutcome.NOT_HELD;
  }

  /**
   * See {@link MsgQueueRepository#countRedeliveries}: counts each redelivered message's expired lease as a failed
   * delivery and dead-letters those that have had {@code maxDeliveries} deliveries already.
   *
   * @return the messages to handle, in the order given
   */
  static List<ClaimedMessage> countRedeliveries(
      DSLContext ctx, List<ClaimedMessage> claimed, RetryPolicy policy) {
    List<ClaimedMessage> redelivered = new ArrayList<>();
    for (ClaimedMessage message : claimed) {
      // A dead letter redelivered to a consumer of the dead-letter queue itself has nowhere further to go.
      if (message.redelivered() && !message.queueName().equals(policy.deadLetterQueue())) {
        redelivered.add(message);
      }
    }
    if (redelivered.isEmpty()) {
      return claimed;
    }
    Map<Long, Integer> failedById = new HashMap<>();
    RetryStatements.countExpiredLeases(ctx, redelivered, "the lease ran out before the message was acked (its"
        + " consumer died, hung, lost its connection or was too slow)")
        .forEach(row -> failedById.put(row.value1(), row.value2()));
    List<ClaimedMessage> toHandle = new ArrayList<>(claimed.size());
    for (ClaimedMessage message : claimed) {
      Integer failed = failedById.get(message.id());
      if (failed == null || failed < policy.maxDeliveries()) {
        toHandle.add(message);
        continue;
      }
      // Its last delivery was the maxDeliveries-th; this claim is one more, which it does not get.
      boolean moved = RetryStatements.deadLetter(ctx, message, policy.deadLetterQueue(), policy.deadLetterTtl(), 0,
          DeadLetter.LEASE_EXPIRED, text("the lease of delivery " + failed + " of " + policy.maxDeliveries()
              + " ran out", DeadLetter.MAX_ERROR_MESSAGE_CHARS)) > 0;
      if (moved) {
        log.warn("message {} of \"{}\" ran out its lease on delivery {} of {}; moved to dead-letter queue \"{}\"",
            message.id(), message.queueName(), failed, policy.maxDeliveries(), policy.deadLetterQueue());
      } else {
        toHandle.add(message);
      }
    }
    return toHandle;
  }

  /** Validates a batch of claimed messages before any SQL. */
  static void requireMessages(Collection<ClaimedMessage> messages) {
    Arguments.requireNoNulls(messages, "messages");
    if (messages.size() > MsgQueueRepository.MAX_BATCH_SIZE) {
      throw new IllegalArgumentException("a batch holds at most " + MsgQueueRepository.MAX_BATCH_SIZE
          + " messages, was " + messages.size());
    }
  }

  /**
   * {@code raw} as text PostgreSQL accepts, at most {@code maxChars} long: NUL (which {@code text} cannot hold) and
   * unpaired surrogates (which have no UTF-8 form) become U+FFFD, and a cut never splits a surrogate pair.
   */
  static String text(String raw, int maxChars) {
    if (raw == null) {
      return null;
    }
    String cut = raw;
    if (cut.length() > maxChars) {
      int end = Character.isHighSurrogate(cut.charAt(maxChars - 1)) ? maxChars - 1 : maxChars;
      cut = cut.substring(0, end);
    }
    StringBuilder clean = null;
    for (int i = 0; i < cut.length(); i++) {
      char c = cut.charAt(i);
      boolean pairStart = Character.isHighSurrogate(c) && i + 1 < cut.length()
          && Character.isLowSurrogate(cut.charAt(i + 1));
      if (pairStart) {
        if (clean != null) {
          clean.append(c).append(cut.charAt(i + 1));
        }
        i++;
        continue;
      }
      boolean bad = c == '\0' || Character.isSurrogate(c);
      if (bad && clean == null) {
        clean = new StringBuilder(cut.length()).append(cut, 0, i);
      }
      if (clean != null) {
        clean.append(bad ? '\uFFFD' : c);
      }
    }
    return clean == null ? cut : clean.toString();
  }
}
