package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.internal.consume.Consumption;
import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.records.MessageQueueItemFailureRecord;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import dev.msgqueue.jooq.tables.records.MessageQueueRecord;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

// Kept in dev.msgqueue: reads ClaimedMessage's receipt members and constructor and the repository's context.
/** Lease extension, retries with backoff and the dead-letter queue, against PostgreSQL. */
class RetryIT extends RepositoryFixture {
  private static final Duration LONG_LEASE = Duration.ofHours(1);

  RetryIT(TestDatabase db) {
    super(db, 4);
  }

  private MessageQueueItemFailureRecord failureRow(long id) {
    return db.dsl().selectFrom(MESSAGE_QUEUE_ITEM_FAILURE).where(MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID.eq(id)).fetchOne();
  }

  /** Moves the item's deadline into the past: its lease ran out, or its backoff passed. */
  private void timePasses(long id) {
    db.dsl().update(MESSAGE_QUEUE_ITEM)
        .set(MESSAGE_QUEUE_ITEM.READ_AFTER, ServerTime.utcNowMinus(Duration.ofSeconds(1)))
        .where(MESSAGE_QUEUE_ITEM.ID.eq(id)).execute();
  }

  /** How far in the future the item's deadline is, by the server's clock. */
  private Duration untilReadable(long id) {
    var deadline = db.dsl().select(MESSAGE_QUEUE_ITEM.READ_AFTER, ServerTime.utcNow())
        .from(MESSAGE_QUEUE_ITEM).where(MESSAGE_QUEUE_ITEM.ID.eq(id)).fetchSingle();
    return Duration.between(deadline.value2(), deadline.value1());
  }

  private Duration untilExpiry(long id) {
    var expiry = db.dsl().select(MESSAGE_QUEUE_ITEM.EXPIRES_AT, ServerTime.utcNow())
        .from(MESSAGE_QUEUE_ITEM).where(MESSAGE_QUEUE_ITEM.ID.eq(id)).fetchSingle();
    return Duration.between(expiry.value2(), expiry.value1());
  }

  private ClaimedMessage claimOne(String queue) {
    List<ClaimedMessage> claimed = repository.claim(queue, 1, LONG_LEASE);
    assertThat(claimed).hasSize(1);
    return claimed.get(0);
  }

  /** A policy dead-lettering to the queue's own dead-letter queue, so tests sharing the database stay apart. */
  private static RetryPolicy.Builder policy(QueueSpec spec) {
    return RetryPolicy.builder(dlq(spec));
  }

  private static String dlq(QueueSpec spec) {
    return spec.name() + "-dlq";
  }

  // ---- lease extension

  @Test
  void anExtensionReturnsANewReceiptAndTheOldOneStopsMatching() {
    QueueSpec spec = bound("extend");
    long id = repository.publish(spec, "{\"n\": 1}");
    ClaimedMessage claimed = repository.claim(spec.name(), 1, Duration.ofMinutes(1)).get(0);

    ClaimedMessage extended = repository.extendLease(claimed, Duration.ofMinutes(30)).orElseThrow();

    assertThat(extended.id()).isEqualTo(id);
    assertThat(extended.payload()).isEqualTo(claimed.payload());
    assertThat(extended.receiptDeadline()).isAfter(claimed.receiptDeadline().plusMinutes(28));
    assertThat(row(id).getReadAfter()).isEqualTo(extended.receiptDeadline());
    assertThat(untilReadable(id)).isGreaterThan(Duration.ofMinutes(29));
    assertThat(repository.extendLease(claimed, LONG_LEASE)).as("a stale receipt extends nothing").isEmpty();
    assertThat(repository.ack(claimed)).as("the old receipt acks nothing").isFalse();
    assertThat(repository.release(claimed, Duration.ZERO)).isFalse();
    assertThat(repository.claim(spec.name(), 1, LONG_LEASE)).as("still held").isEmpty();
    assertThat(repository.ack(extended)).isTrue();
    assertThat(repository.extendLease(extended, LONG_LEASE)).as("nothing to extend after the ack").isEmpty();
  }

  @Test
  void aShorterExtensionStillMovesTheDeadlineForwardSoNoReceiptIsIssuedTwice() {
    QueueSpec spec = bound("extend-shorter");
    long id = repository.publish(spec, "1");
    ClaimedMessage claimed = claimOne(spec.name());

    ClaimedMessage extended = repository.extendLease(claimed, Duration.ofMillis(1)).orElseThrow();

    assertThat(extended.receiptDeadline()).isEqualTo(claimed.receiptDeadline().plusNanos(1_000_000));
    assertThat(row(id).getReadAfter()).isEqualTo(extended.receiptDeadline());
    assertThat(repository.ack(claimed)).isFalse();
    assertThat(repository.ack(extended)).isTrue();
  }

  @Test
  void aBatchExtensionExtendsTheHeldClaimsInOneStatementAndSkipsStaleOnes() {
    QueueSpec spec = bound("extend-batch");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3", "4"));
    List<ClaimedMessage> claimed = repository.claim(spec.name(), 4, Duration.ofMinutes(1));
    // The second one's lease ran out and another consumer took it: this consumer's receipt is stale.
    timePasses(ids.get(1));
    ClaimedMessage takenOver = repository.claim(spec.name(), 1, LONG_LEASE).get(0);
    assertThat(takenOver.id()).isEqualTo(ids.get(1));

    List<ClaimedMessage> extended = repository.extendLeases(claimed, Duration.ofMinutes(30));

    assertThat(extended).extracting(ClaimedMessage::id).containsExactly(ids.get(0), ids.get(2), ids.get(3));
    for (ClaimedMessage message : extended) {
      assertThat(row(message.id()).getReadAfter()).isEqualTo(message.receiptDeadline());
      assertThat(untilReadable(message.id())).isGreaterThan(Duration.ofMinutes(29));
    }
    assertThat(row(ids.get(1)).getReadAfter()).as("the other consumer's claim is untouched")
        .isEqualTo(takenOver.receiptDeadline());
    assertThat(repository.ack(claimed)).as("old receipts ack nothing").isEmpty();
    assertThat(repository.ack(extended)).containsExactly(ids.get(0), ids.get(2), ids.get(3));
    assertThat(repository.extendLeases(List.of(), LONG_LEASE)).isEmpty();
  }

  @Test
  void anExtensionInACallersTransactionRollsBackWithIt() {
    QueueSpec spec = bound("extend-tx");
    long id = repository.publish(spec, "1");
    ClaimedMessage claimed = claimOne(spec.name());

    try (Session session = Session.open(db)) {
      TransactionalQueue inTransaction = repository.inTransaction(session.dsl());
      assertThat(inTransaction.extendLeases(List.of(claimed), Duration.ofHours(2))).hasSize(1);
      assertThat(inTransaction.extendLease(claimed, Duration.ofHours(2))).as("same transaction sees it").isEmpty();
      session.rollback();
    }

    assertThat(row(id).getReadAfter()).isEqualTo(claimed.receiptDeadline());
    assertThat(repository.ack(claimed)).isTrue();
  }

  // ---- retries

  @Test
  void eachFailureReleasesTheMessageAfterAGrowingJitteredBackoff() {
    QueueSpec spec = bound("backoff");
    long id = repository.publish(spec, "1");
    RetryPolicy policy = policy(spec).initialBackoff(Duration.ofSeconds(10)).multiplier(2)
        .maxBackoff(Duration.ofSeconds(50)).jitter(0.5).maxDeliveries(10).build();
    Duration tolerance = Duration.ofSeconds(2); // between the fail's clock reading and ours
    List<Duration> delays = new ArrayList<>();

    for (int failure = 1; failure <= 5; failure++) {
      ClaimedMessage claimed = claimOne(spec.name());
      assertThat(claimed.redelivered()).as("a failed delivery comes back as a retry, not a crash").isFalse();
      IllegalStateException error = new IllegalStateException("attempt " + failure);

      assertThat(repository.fail(claimed, error, policy)).isEqualTo(FailureOutcome.RETRY_SCHEDULED);

      MessageQueueItemRecord released = row(id);
      assertThat(released.getStatus()).isEqualTo(MessageQueueItemStatus.PENDING);
      assertThat(released.getQueueId()).isEqualTo(spec.name());
      Duration delay = untilReadable(id);
      Duration ceiling = Duration.ofSeconds(Math.min(50, 10L << (failure - 1)));
      assertThat(delay).as("failure %d: within [ceiling * (1 - jitter), ceiling]", failure)
          .isBetween(ceiling.dividedBy(2).minus(tolerance), ceiling.plusMillis(1));
      delays.add(delay);
      assertThat(repository.claim(spec.name(), 1, LONG_LEASE)).as("not before the backoff").isEmpty();
      MessageQueueItemFailureRecord failures = failureRow(id);
      assertThat(failures.getFailedDeliveries()).isEqualTo(failure);
      assertThat(failures.getLastErrorClass()).isEqualTo(IllegalStateException.class.getName());
      assertThat(failures.getLastErrorMessage()).isEqualTo("attempt " + failure);
      assertThat(failures.getDeadLetteredAt()).isNull();
      assertThat(repository.fail(claimed, error, policy)).as("a receipt fails once").isEqualTo(FailureOutcome.NOT_HELD);
      timePasses(id);
    }
    // Ceilings 10, 20, 40 s with up to half taken off: [5, 10], [10, 20], [20, 40] s, so the delays grow.
    assertThat(delays.get(1)).isGreaterThanOrEqualTo(delays.get(0).minus(tolerance));
    assertThat(delays.get(2)).isGreaterThanOrEqualTo(delays.get(1).minus(tolerance));
    assertThat(delays.get(2)).isGreaterThan(delays.get(0));
  }

  @Test
  void theNthFailureMovesTheMessageToTheDeadLetterQueueOnceWithItsError() {
    QueueSpec spec = bound("poison");
    long id = repository.publish(spec, "{\"poison\": true}");
    long healthy = repository.publish(spec, "{\"poison\": false}");
    RetryPolicy policy = policy(spec).initialBackoff(Duration.ZERO).maxDeliveries(3).build();

    List<FailureOutcome> outcomes = new ArrayList<>();
    ClaimedMessage last = null;
    for (int delivery = 1; delivery <= 3; delivery++) {
      last = repository.claim(spec.name(), 1, LONG_LEASE).get(0);
      assertThat(last.id()).isEqualTo(id);
      outcomes.add(repository.fail(last, new IllegalArgumentException("bad order " + delivery), policy));
    }

    assertThat(outcomes).containsExactly(FailureOutcome.RETRY_SCHEDULED, FailureOutcome.RETRY_SCHEDULED,
        FailureOutcome.DEAD_LETTERED);
    assertThat(repository.fail(last, new IllegalStateException("again"), policy)).isEqualTo(FailureOutcome.NOT_HELD);
    assertThat(repository.ack(last)).as("the dead-lettering receipt is spent").isFalse();
    MessageQueueItemRecord moved = row(id);
    assertThat(moved.getQueueId()).isEqualTo(dlq(spec));
    assertThat(moved.getStatus()).isEqualTo(MessageQueueItemStatus.PENDING);
    assertThat(untilReadable(id)).as("claimable from the dead-letter queue at once").isLessThanOrEqualTo(Duration.ZERO);
    assertThat(untilExpiry(id).toDays()).as("kept for the policy's dead-letter TTL (14 days)").isEqualTo(13);

    List<DeadLetter> letters = repository.deadLetters(dlq(spec), 10);
    assertThat(letters).hasSize(1);
    DeadLetter letter = letters.get(0);
    assertThat(letter.id()).isEqualTo(id);
    assertThat(letter.payload()).isEqualTo("{\"poison\": true}");
    assertThat(letter.originalQueue()).isEqualTo(spec.name());
    assertThat(letter.deadLetterQueue()).isEqualTo(dlq(spec));
    assertThat(letter.deliveries()).isEqualTo(3);
    assertThat(letter.errorClass()).isEqualTo(IllegalArgumentException.class.getName());
    assertThat(letter.errorMessage()).isEqualTo("bad order 3");
    assertThat(letter.deadLetteredAt()).isNotNull();
    assertThat(letter.expiresAt()).isAfter(letter.deadLetteredAt());

    // The original queue holds only the healthy message; the dead-letter queue is durable and never reaped.
    assertThat(repository.claim(spec.name(), 10, LONG_LEASE)).extracting(ClaimedMessage::id).containsExactly(healthy);
    MessageQueueRecord dlq = db.dsl().selectFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq(dlq(spec))).fetchSingle();
    assertThat(dlq.getDurable()).isTrue();
    assertThat(dlq.getAutoDeleted()).isFalse();
  }

  @Test
  void maxDeliveriesOfOneDeadLettersTheFirstFailureAndTheQueueRowIsMadeDurable() {
    QueueSpec spec = bound("one-shot");
    // Someone bound the dead-letter queue as auto-deleted: dead-lettering makes it durable so it is never reaped.
    repository.bindQueue(QueueSpec.autoDeleted("one-shot-dlq"));
    long id = repository.publish(spec, "1");
    RetryPolicy policy = RetryPolicy.builder("one-shot-dlq").maxDeliveries(1).build();

    assertThat(repository.fail(claimOne(spec.name()), new RuntimeException(), policy))
        .isEqualTo(FailureOutcome.DEAD_LETTERED);

    MessageQueueRecord dlq = db.dsl().selectFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq("one-shot-dlq"))
        .fetchSingle();
    assertThat(dlq.getDurable()).isTrue();
    assertThat(dlq.getAutoDeleted()).isFalse();
    DeadLetter letter = repository.deadLetters("one-shot-dlq", 10).get(0);
    assertThat(letter.id()).isEqualTo(id);
    assertThat(letter.deliveries()).isEqualTo(1);
    assertThat(letter.errorClass()).isEqualTo(RuntimeException.class.getName());
    assertThat(letter.errorMessage()).isNull();
    assertThat(repository.ack(claimOne("one-shot-dlq"))).isTrue(); // empty and idle: only durability saves it
    db.dsl().update(MESSAGE_QUEUE).set(MESSAGE_QUEUE.LAST_ACTIVE, LocalDateTime.of(2000, 1, 1, 0, 0))
        .where(MESSAGE_QUEUE.NAME.eq("one-shot-dlq")).execute();
    assertThat(repository.reapIdleQueues()).doesNotContain("one-shot-dlq");
    assertThat(db.dsl().fetchExists(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.eq("one-shot-dlq"))).isTrue();
  }

  @Test
  void crashRedeliveriesCountTowardMaxDeliveries() {
    QueueSpec spec = bound("crashing");
    long id = repository.publish(spec, "1");
    RetryPolicy policy = policy(spec).maxDeliveries(3).build();

    // Delivery 1 crashes its consumer; so do deliveries 2 and 3 (each lease runs out).
    ClaimedMessage first = claimOne(spec.name());
    assertThat(countRedeliveries(repository, List.of(first), policy)).containsExactly(first);
    assertThat(failureRow(id)).as("a first delivery costs no write").isNull();
    for (int delivery = 2; delivery <= 3; delivery++) {
      timePasses(id);
      ClaimedMessage redelivered = claimOne(spec.name());
      assertThat(redelivered.redelivered()).isTrue();
      assertThat(countRedeliveries(repository, List.of(redelivered), policy)).containsExactly(redelivered);
      assertThat(failureRow(id).getFailedDeliveries()).isEqualTo(delivery - 1);
      assertThat(failureRow(id).getLastErrorClass()).isEqualTo(DeadLetter.LEASE_EXPIRED);
    }
    timePasses(id);
    ClaimedMessage fourth = claimOne(spec.name());

    assertThat(countRedeliveries(repository, List.of(fourth), policy)).as("three deliveries crashed: no fourth")
        .isEmpty();

    assertThat(row(id).getQueueId()).isEqualTo(dlq(spec));
    DeadLetter letter = repository.deadLetters(dlq(spec), 10).get(0);
    assertThat(letter.id()).isEqualTo(id);
    assertThat(letter.deliveries()).isEqualTo(3);
    assertThat(letter.errorClass()).isEqualTo(DeadLetter.LEASE_EXPIRED);
    assertThat(repository.ack(fourth)).isFalse();
  }

  @Test
  void aDeadLetterRedeliveredToTheDeadLetterQueuesOwnConsumerIsHandedOnUncounted() {
    QueueSpec spec = bound("dlq-consumer");
    long id = repository.publish(spec, "1");
    RetryPolicy policy = policy(spec).maxDeliveries(1).build();
    repository.fail(claimOne(spec.name()), new IllegalStateException("first"), policy);
    claimOne(dlq(spec)); // a dead-letter consumer crashes
    timePasses(id);
    ClaimedMessage redelivered = claimOne(dlq(spec));
    assertThat(redelivered.redelivered()).isTrue();

    assertThat(countRedeliveries(repository, List.of(redelivered), policy)).containsExactly(redelivered);

    DeadLetter letter = repository.deadLetters(dlq(spec), 10).get(0);
    assertThat(letter.originalQueue()).isEqualTo(spec.name());
    assertThat(letter.deliveries()).isEqualTo(1);
    assertThat(letter.errorMessage()).isEqualTo("first");
  }

  @Test
  void aCrashAndAHandlerFailureTogetherReachMaxDeliveries() {
    QueueSpec spec = bound("crash-then-fail");
    long id = repository.publish(spec, "1");
    long other = repository.publish(spec, "2");
    RetryPolicy policy = policy(spec).maxDeliveries(2).build();

    List<ClaimedMessage> firstDelivery = repository.claim(spec.name(), 2, LONG_LEASE);
    timePasses(id); // the consumer crashed while handling the first message; the second it acked
    assertThat(repository.ack(firstDelivery.get(1))).isTrue();
    List<ClaimedMessage> again = repository.claim(spec.name(), 10, LONG_LEASE);
    List<ClaimedMessage> toHandle = countRedeliveries(repository, again, policy);
    assertThat(toHandle).extracting(ClaimedMessage::id).containsExactly(id);

    assertThat(repository.fail(toHandle.get(0), new IllegalStateException("boom"), policy))
        .as("delivery 2 of 2 failed").isEqualTo(FailureOutcome.DEAD_LETTERED);
    DeadLetter letter = repository.deadLetters(dlq(spec), 10).get(0);
    assertThat(letter.deliveries()).isEqualTo(2);
    assertThat(letter.errorMessage()).isEqualTo("boom");
    assertThat(row(other)).isNull();
  }

  @Test
  void aRepublishedDeadLetterIsDeliveredAgainWithFreshDeliveries() {
    QueueSpec spec = bound("republish");
    long id = repository.publish(spec, "{\"retry\": \"me\"}");
    RetryPolicy policy = policy(spec).maxDeliveries(1).build();
    assertThat(repository.fail(claimOne(spec.name()), new IllegalStateException("down"), policy))
        .isEqualTo(FailureOutcome.DEAD_LETTERED);

    assertThat(repository.republishDeadLetter(id)).isEqualTo(RepublishOutcome.REPUBLISHED);

    assertThat(repository.deadLetters(dlq(spec), 10)).isEmpty();
    assertThat(failureRow(id)).as("the count starts again").isNull();
    ClaimedMessage redelivered = claimOne(spec.name());
    assertThat(redelivered.id()).isEqualTo(id);
    assertThat(redelivered.payload()).isEqualTo("{\"retry\": \"me\"}");
    assertThat(redelivered.redelivered()).isFalse();
    assertThat(repository.republishDeadLetter(id)).as("republished already: live again")
        .isEqualTo(RepublishOutcome.NOT_A_DEAD_LETTER);
    assertThat(repository.ack(redelivered)).isTrue();
    assertThat(repository.republishDeadLetter(id)).as("acked").isEqualTo(RepublishOutcome.NOT_FOUND);
    assertThat(repository.republishDeadLetter(Long.MAX_VALUE)).isEqualTo(RepublishOutcome.NOT_FOUND);
  }

  @Test
  void republishingALiveMessageOrAnExpiredDeadLetterTellsWhyNothingMoved() {
    QueueSpec spec = bound("republish-why");
    long live = repository.publish(spec, "{\"live\": true}");
    assertThat(repository.republishDeadLetter(live)).isEqualTo(RepublishOutcome.NOT_A_DEAD_LETTER);
    assertThat(row(live).getQueueId()).as("left where it was").isEqualTo(spec.name());

    ClaimedMessage claimed = claimOne(spec.name());
    assertThat(repository.republishDeadLetter(live)).as("claimed, still not a dead letter")
        .isEqualTo(RepublishOutcome.NOT_A_DEAD_LETTER);
    RetryPolicy policy = policy(spec).maxDeliveries(1).build();
    assertThat(repository.fail(claimed, new IllegalStateException("down"), policy))
        .isEqualTo(FailureOutcome.DEAD_LETTERED);
    new QueueRows(db.dsl()).expireItems(dlq(spec));

    assertThat(repository.republishDeadLetter(live)).as("an expired dead letter")
        .isEqualTo(RepublishOutcome.NOT_FOUND);
    assertThat(row(live).getQueueId()).isEqualTo(dlq(spec));
  }

  @Test
  void aDeadLetterHeldByADeadLetterConsumerIsNotRepublishedAndAMissingOriginalQueueIsTyped() {
    QueueSpec spec = bound("republish-held");
    long id = repository.publish(spec, "1");
    RetryPolicy policy = policy(spec).maxDeliveries(1).build();
    repository.fail(claimOne(spec.name()), new IllegalStateException(), policy);

    ClaimedMessage heldInDlq = claimOne(dlq(spec));
    assertThat(repository.republishDeadLetter(id)).as("held by a dead-letter consumer")
        .isEqualTo(RepublishOutcome.HELD);
    assertThat(row(id).getQueueId()).isEqualTo(dlq(spec));
    assertThat(repository.release(heldInDlq, Duration.ZERO)).isTrue();

    db.dsl().deleteFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq(spec.name())).execute();
    try (Session session = Session.open(db)) {
      TransactionalQueue inTransaction = repository.inTransaction(session.dsl());
      assertThatThrownBy(() -> inTransaction.republishDeadLetter(id))
          .isInstanceOf(QueueNotFoundException.class)
          .hasMessageContaining(spec.name());
      // The caller's transaction is still usable.
      inTransaction.bindQueue(spec);
      assertThat(inTransaction.republishDeadLetter(id)).isEqualTo(RepublishOutcome.REPUBLISHED);
      session.commit();
    }
    assertThat(claimOne(spec.name()).id()).isEqualTo(id);
  }

  @Test
  void deadLettersPageByIdAndExcludePlainMessagesOfTheDeadLetterQueue() {
    QueueSpec spec = bound("paging");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3"));
    repository.publish(bound(dlq(spec)), "0"); // a plain message in the dead-letter queue
    RetryPolicy policy = RetryPolicy.builder(dlq(spec)).maxDeliveries(1).build();
    for (ClaimedMessage message : repository.claim(spec.name(), 3, LONG_LEASE)) {
      assertThat(repository.fail(message, new IllegalStateException(), policy)).isEqualTo(FailureOutcome.DEAD_LETTERED);
    }

    List<DeadLetter> first = repository.deadLetters(dlq(spec), 2);
    List<DeadLetter> second = repository.deadLetters(dlq(spec), first.get(1).id(), 2);

    assertThat(first).extracting(DeadLetter::id).containsExactly(ids.get(0), ids.get(1));
    assertThat(second).extracting(DeadLetter::id).containsExactly(ids.get(2));
  }

  // ---- races and atomicity

  @Test
  void theMoveToTheDeadLetterQueueIsAtomicAndARacingAckWaitsAndFindsNothing() throws Exception {
    QueueSpec spec = bound("atomic");
    long id = repository.publish(spec, "1");
    ClaimedMessage claimed = claimOne(spec.name());
    RetryPolicy policy = policy(spec).maxDeliveries(1).build();

    try (Session failing = Session.open(db); Session acking = Session.open(db)) {
      assertThat(repository.inTransaction(failing.dsl()).fail(claimed, new IllegalStateException("x"), policy))
          .isEqualTo(FailureOutcome.DEAD_LETTERED);
      // Uncommitted: another connection sees the message where it was, with no failure row and no dead letter.
      assertThat(row(id).getQueueId()).isEqualTo(spec.name());
      assertThat(row(id).getStatus()).isEqualTo(MessageQueueItemStatus.ASSIGNED);
      assertThat(failureRow(id)).isNull();
      assertThat(repository.deadLetters(dlq(spec), 10)).isEmpty();
      // An ack under the same receipt waits for the move's row lock ...
      CompletableFuture<List<Long>> ack = CompletableFuture.supplyAsync(
          () -> repository.inTransaction(acking.dsl()).ack(List.of(claimed)));
      acking.awaitWaitingOnLock(db.dsl());
      failing.commit();
      // ... and then finds the receipt gone: the dead letter is not deleted.
      assertThat(ack.get(20, TimeUnit.SECONDS)).isEmpty();
      acking.commit();
    }
    assertThat(row(id).getQueueId()).isEqualTo(dlq(spec));
    assertThat(failureRow(id).getDeadLetteredAt()).isNotNull();
    assertThat(repository.deadLetters(dlq(spec), 10)).extracting(DeadLetter::id).containsExactly(id);
  }

  @Test
  void aFailRacingAnAckThatGotThereFirstDoesNothing() throws Exception {
    QueueSpec spec = bound("ack-first");
    long id = repository.publish(spec, "1");
    ClaimedMessage claimed = claimOne(spec.name());
    RetryPolicy policy = policy(spec).maxDeliveries(1).build();

    try (Session acking = Session.open(db); Session failing = Session.open(db)) {
      assertThat(repository.inTransaction(acking.dsl()).ack(List.of(claimed))).containsExactly(id);
      CompletableFuture<FailureOutcome> fail = CompletableFuture.supplyAsync(
          () -> repository.inTransaction(failing.dsl()).fail(claimed, new IllegalStateException(), policy));
      failing.awaitWaitingOnLock(db.dsl());
      acking.commit();
      assertThat(fail.get(20, TimeUnit.SECONDS)).isEqualTo(FailureOutcome.NOT_HELD);
      failing.commit();
    }
    assertThat(row(id)).isNull();
    assertThat(repository.deadLetters(dlq(spec), 10)).isEmpty();
    assertThat(failureRow(id)).isNull();
  }

  @Test
  void consumersRacingToFailAndAckTheSameReceiptNeverBothWin() throws Exception {
    QueueSpec spec = bound("race");
    RetryPolicy retry = policy(spec).initialBackoff(Duration.ZERO).maxDeliveries(1_000).build();
    RetryPolicy deadLetter = policy(spec).maxDeliveries(1).build();
    ExecutorService threads = Executors.newFixedThreadPool(3);
    try {
      int rounds = Integer.getInteger("msgqueue.test.raceRounds", 20); // bounded by default; raise for a long run
      for (int round = 0; round < rounds; round++) {
        long id = repository.publish(spec, Integer.toString(round));
        ClaimedMessage claimed = claimOne(spec.name());
        RetryPolicy policy = round % 2 == 0 ? retry : deadLetter;
        CyclicBarrier start = new CyclicBarrier(3);
        Future<Boolean> ack = threads.submit(() -> {
          start.await(10, TimeUnit.SECONDS);
          return repository.ack(claimed);
        });
        List<Future<FailureOutcome>> fails = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
          fails.add(threads.submit(() -> {
            start.await(10, TimeUnit.SECONDS);
            return repository.fail(claimed, new IllegalStateException(), policy);
          }));
        }
        int winners = ack.get(30, TimeUnit.SECONDS) ? 1 : 0;
        for (Future<FailureOutcome> fail : fails) {
          winners += fail.get(30, TimeUnit.SECONDS) == FailureOutcome.NOT_HELD ? 0 : 1;
        }
        assertThat(winners).as("round %d", round).isEqualTo(1);
        MessageQueueItemRecord after = row(id);
        if (after != null) {
          MessageQueueItemFailureRecord failures = failureRow(id);
          assertThat(failures.getFailedDeliveries()).as("counted once").isEqualTo(1);
          if (after.getQueueId().equals(spec.name())) {
            assertThat(repository.ack(claimOne(spec.name()))).isTrue();
          }
        }
      }
    } finally {
      threads.shutdownNow();
    }
    assertThat(repository.claim(spec.name(), 10, LONG_LEASE)).isEmpty();
  }

  // ---- the side table

  @Test
  void theHappyPathWritesNoFailureRowAndCleanupDeletesRowsOfMessagesThatAreGone() {
    QueueSpec spec = bound("happy");
    List<Long> happy = repository.publishBatch(spec, Collections.nCopies(50, "{}"));
    List<ClaimedMessage> claimed = repository.claim(spec.name(), 50, LONG_LEASE);
    assertThat(repository.ack(claimed)).hasSize(50);
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM_FAILURE, MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID.in(happy)))
        .as("claim and ack never write it").isZero();

    long retried = repository.publish(spec, "1");
    long deadLettered = repository.publish(spec, "2");
    long stays = repository.publish(spec, "3");
    RetryPolicy policy = policy(spec).initialBackoff(Duration.ZERO).maxDeliveries(2).build();
    for (ClaimedMessage message : repository.claim(spec.name(), 3, LONG_LEASE)) {
      assertThat(repository.fail(message, new IllegalStateException(), policy)).isEqualTo(FailureOutcome.RETRY_SCHEDULED);
    }
    for (ClaimedMessage message : repository.claim(spec.name(), 3, LONG_LEASE)) {
      if (message.id() == retried) {
        assertThat(repository.ack(message)).as("succeeds on its second delivery").isTrue();
      } else if (message.id() == deadLettered) {
        assertThat(repository.fail(message, new IllegalStateException(), policy))
            .isEqualTo(FailureOutcome.DEAD_LETTERED);
      } // "stays" stays claimed
    }
    ClaimedMessage fromDlq = claimOne(dlq(spec));
    assertThat(repository.ack(fromDlq)).as("a dead-letter consumer takes it").isTrue();
    List<Long> failing = List.of(retried, deadLettered, stays);
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM_FAILURE, MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID.in(failing)))
        .isEqualTo(3);

    repository.cleanUpExpiredMessages();

    assertThat(db.dsl().select(MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID).from(MESSAGE_QUEUE_ITEM_FAILURE)
        .where(MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID.in(failing)).fetch(MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID))
        .as("only the live message keeps its row").containsExactly(stays);
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM_FAILURE, MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID.notIn(
        db.dsl().select(MESSAGE_QUEUE_ITEM.ID).from(MESSAGE_QUEUE_ITEM)))).as("no orphan anywhere").isZero();
  }

  @Test
  void errorTextIsStoredEvenWithNulAndLoneSurrogatesAndIsBounded() {
    QueueSpec spec = bound("error-text");
    long id = repository.publish(spec, "1");
    String hostile = "a\u0000b\uD800c" + "x".repeat(10_000);

    repository.fail(claimOne(spec.name()), new IllegalStateException(hostile), policy(spec).maxDeliveries(1).build());

    String stored = repository.deadLetters(dlq(spec), 1).get(0).errorMessage();
    assertThat(stored).startsWith("a\uFFFDb\uFFFDcxxx").hasSize(DeadLetter.MAX_ERROR_MESSAGE_CHARS);
    assertThat(row(id).getQueueId()).isEqualTo(dlq(spec));
  }

  // ---- validation

  @Test
  void invalidArgumentsFailBeforeAnySql() {
    DataSource unreachable = (DataSource) Proxy.newProxyInstance(getClass().getClassLoader(),
        new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
          throw new AssertionError("no SQL expected, but " + method.getName() + " was called");
        });
    MsgQueueRepository offline = MsgQueueRepository.create(
        DSL.using(unreachable, org.jooq.SQLDialect.POSTGRES), MsgQueueConfig.defaults());
    ClaimedMessage message = new ClaimedMessage(
        "q", org.jooq.JSONB.valueOf("1"), new dev.msgqueue.internal.sql.Receipt(1, LocalDateTime.now(), false));
    RetryPolicy policy = RetryPolicy.defaults("q-dlq");

    assertThatThrownBy(() -> offline.extendLease(null, LONG_LEASE)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> offline.extendLease(message, Duration.ZERO)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> offline.extendLease(message, Duration.ofDays(366)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> offline.extendLease(message, null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> offline.extendLeases(null, LONG_LEASE)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> offline.extendLeases(java.util.Arrays.asList(message, null), LONG_LEASE))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("index 1");
    assertThatThrownBy(() -> offline.extendLeases(
        Collections.nCopies(MsgQueueRepository.MAX_BATCH_SIZE + 1, message), LONG_LEASE))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> offline.extendLeases(List.of(message), Duration.ofNanos(1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> offline.fail(null, new RuntimeException(), policy))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> offline.fail(message, null, policy)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> offline.fail(message, new RuntimeException(), null))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> offline.fail(message, new RuntimeException(), RetryPolicy.defaults("q")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dead-letter queue");
    assertThatThrownBy(() -> offline.deadLetters(" dlq", 10)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> offline.deadLetters("dlq", 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> offline.deadLetters("dlq", 0, MsgQueueRepository.MAX_BATCH_SIZE + 1))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(offline.extendLeases(List.of(), LONG_LEASE)).isEmpty();
    assertThat(countRedeliveries(offline, List.of(message), policy)).as("nothing redelivered: no SQL")
        .containsExactly(message);
  }

  @Test
  void leaseHeldByOneConsumerIsNotExtendedByAnother() {
    QueueSpec spec = bound("extend-other");
    long id = repository.publish(spec, "1");
    ClaimedMessage first = repository.claim(spec.name(), 1, Duration.ofMinutes(1)).get(0);
    timePasses(id);
    ClaimedMessage second = claimOne(spec.name());
    Optional<ClaimedMessage> late = repository.extendLease(first, LONG_LEASE);
    assertThat(late).isEmpty();
    assertThat(row(id).getReadAfter()).isEqualTo(second.receiptDeadline());
  }

  /** The redelivery count a subscriber runs after each lease-mode claim. */
  private static List<ClaimedMessage> countRedeliveries(
      MsgQueueRepository repository, List<ClaimedMessage> claimed, RetryPolicy policy) {
    return new Consumption(repository.context(), ClaimedMessageAccess.INSTANCE)
        .countRedeliveries(claimed.get(0).queueName(), claimed, policy);
  }
}
