package dev.msgqueue.internal.consume;

import dev.msgqueue.DeadLetter;
import dev.msgqueue.FailureOutcome;
import dev.msgqueue.RetryPolicy;
import dev.msgqueue.internal.sql.HeldStatements;
import dev.msgqueue.internal.sql.Receipt;
import dev.msgqueue.internal.sql.RetryStatements;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.IntFunction;
import org.jooq.DSLContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The decisions behind a failed delivery and the redelivery count: retry after the policy's backoff, or move to the
 * dead-letter queue. The SQL is in {@link RetryStatements}.
 */
public final class Retries {
  /** The longest error class name kept (Java's are far shorter; this only bounds what a row can hold). */
  static final int MAX_ERROR_CLASS_CHARS = 1_000;
  private static final Logger log = LoggerFactory.getLogger(Retries.class);

  private Retries() { }

  /**
   * Settles a claimed message of {@code queue} whose handler failed, by {@code policy}: released for a retry after
   * {@code backoff} of the failed deliveries so far, or moved to the dead-letter queue on its last delivery.
   * Arguments already validated.
   */
  public static FailureOutcome fail(DSLContext ctx, String queue, Receipt receipt, Throwable error,
      RetryPolicy policy, IntFunction<Duration> backoff) {
    Optional<Integer> earlier = RetryStatements.failedDeliveries(ctx, receipt);
    if (earlier.isEmpty()) {
      return FailureOutcome.NOT_HELD;
    }
    int failed = earlier.get() + 1;
    String errorClass = text(error.getClass().getName(), MAX_ERROR_CLASS_CHARS);
    String errorMessage = text(error.getMessage(), DeadLetter.MAX_ERROR_MESSAGE_CHARS);
    if (failed >= policy.maxDeliveries()) {
      boolean moved = RetryStatements.deadLetter(ctx, receipt, queue, policy.deadLetterQueue(),
          policy.deadLetterTtl(), 1, errorClass, errorMessage) > 0;
      if (moved) {
        log.warn("message {} of \"{}\" failed delivery {} of {}; moved to dead-letter queue \"{}\" ({}: {})",
            receipt.id(), queue, failed, policy.maxDeliveries(), policy.deadLetterQueue(), errorClass,
            errorMessage);
      }
      return moved ? FailureOutcome.DEAD_LETTERED : FailureOutcome.NOT_HELD;
    }
    boolean released = RetryStatements.releaseFailed(ctx, receipt, backoff.apply(failed), errorClass,
        errorMessage) > 0;
    return released ? FailureOutcome.RETRY_SCHEDULED : FailureOutcome.NOT_HELD;
  }

  /**
   * {@link #fail} for a message this transaction holds locked (the held-transaction mode), after its handler's
   * effects were rolled back: retried after {@code backoff} of the failed deliveries so far (PENDING, claimable once
   * it has passed), or moved to the dead-letter queue on its last delivery. Commits with the transaction.
   */
  public static FailureOutcome failLocked(DSLContext tx, DSLContext own, String queue, long id, Throwable error,
      RetryPolicy policy, IntFunction<Duration> backoff) {
    int failed = HeldStatements.failedDeliveries(tx, id) + 1;
    String errorClass = text(error.getClass().getName(), MAX_ERROR_CLASS_CHARS);
    String errorMessage = text(error.getMessage(), DeadLetter.MAX_ERROR_MESSAGE_CHARS);
    if (failed >= policy.maxDeliveries() && !queue.equals(policy.deadLetterQueue())) {
      RetryStatements.ensureDeadLetterQueue(own, policy.deadLetterQueue());
      boolean moved = RetryStatements.deadLetterLocked(tx, id, queue, policy.deadLetterQueue(),
          policy.deadLetterTtl(), 1, errorClass, errorMessage) > 0;
      if (moved) {
        log.warn("message {} of \"{}\" failed delivery {} of {}; moved to dead-letter queue \"{}\" ({}: {})", id, queue,
            failed, policy.maxDeliveries(), policy.deadLetterQueue(), errorClass, errorMessage);
      }
      return moved ? FailureOutcome.DEAD_LETTERED : FailureOutcome.NOT_HELD;
    }
    boolean released = RetryStatements.releaseFailedLocked(tx, id, backoff.apply(Math.min(failed,
        policy.maxDeliveries())), errorClass, errorMessage) > 0;
    return released ? FailureOutcome.RETRY_SCHEDULED : FailureOutcome.NOT_HELD;
  }

  /**
   * Moves a message this transaction holds locked to the dead-letter queue without handling it: its earlier
   * deliveries ended without commit {@code failed} times (its consumer died each time), which the policy allows no
   * more of. @return whether it moved
   */
  public static boolean deadLetterEnded(DSLContext tx, DSLContext own, String queue, long id, int failed,
      RetryPolicy policy) {
    RetryStatements.ensureDeadLetterQueue(own, policy.deadLetterQueue());
    boolean moved = RetryStatements.deadLetterLocked(tx, id, queue, policy.deadLetterQueue(), policy.deadLetterTtl(),
        0, DeadLetter.TRANSACTION_ENDED, text("the transaction of delivery " + failed + " of "
            + policy.maxDeliveries() + " ended without commit", DeadLetter.MAX_ERROR_MESSAGE_CHARS)) > 0;
    if (moved) {
      log.warn("message {} of \"{}\": the transaction of delivery {} of {} ended without commit (its consumer died,"
          + " hung or lost its connection); moved to dead-letter queue \"{}\"", id, queue, failed,
          policy.maxDeliveries(), policy.deadLetterQueue());
    }
    return moved;
  }

  /**
   * Right after a lease-mode claim of {@code queue}: counts each redelivered message's expired lease as a failed
   * delivery and dead-letters those that have had {@code maxDeliveries} deliveries already. One statement when some
   * message was redelivered, none otherwise. Messages of the policy's dead-letter queue itself are left uncounted.
   *
   * @return the ids of the messages it dead-lettered (not to be handled)
   */
  public static Set<Long> countRedeliveries(
      DSLContext ctx, String queue, List<Receipt> claimed, RetryPolicy policy) {
    // A dead letter redelivered to a consumer of the dead-letter queue itself has nowhere further to go.
    if (queue.equals(policy.deadLetterQueue())) {
      return Set.of();
    }
    List<Receipt> redelivered = new ArrayList<>();
    for (Receipt receipt : claimed) {
      if (receipt.redelivered()) {
        redelivered.add(receipt);
      }
    }
    if (redelivered.isEmpty()) {
      return Set.of();
    }
    Map<Long, Integer> failedById = new HashMap<>();
    RetryStatements.countExpiredLeases(ctx, redelivered, "the lease ran out before the message was acked (its"
        + " consumer died, hung, lost its connection or was too slow)")
        .forEach(row -> failedById.put(row.value1(), row.value2()));
    Set<Long> deadLettered = new HashSet<>();
    for (Receipt receipt : redelivered) {
      Integer failed = failedById.get(receipt.id());
      if (failed == null || failed < policy.maxDeliveries()) {
        continue;
      }
      // Its last delivery was the maxDeliveries-th; this claim is one more, which it does not get.
      boolean moved = RetryStatements.deadLetter(ctx, receipt, queue, policy.deadLetterQueue(),
          policy.deadLetterTtl(), 0, DeadLetter.LEASE_EXPIRED, text("the lease of delivery " + failed + " of "
              + policy.maxDeliveries() + " ran out", DeadLetter.MAX_ERROR_MESSAGE_CHARS)) > 0;
      if (moved) {
        log.warn("message {} of \"{}\" ran out its lease on delivery {} of {}; moved to dead-letter queue \"{}\"",
            receipt.id(), queue, failed, policy.maxDeliveries(), policy.deadLetterQueue());
        deadLettered.add(receipt.id());
      }
    }
    return deadLettered;
  }

  /**
   * {@code raw} as text PostgreSQL accepts, at most {@code maxChars} long: NUL (which {@code text} cannot hold) and
   * unpaired surrogates (which have no UTF-8 form) become U+FFFD, and a cut never splits a surrogate pair.
   */
  public static String text(String raw, int maxChars) {
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
