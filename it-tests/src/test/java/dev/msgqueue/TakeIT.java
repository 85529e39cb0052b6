package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.internal.consume.Consumption;
import dev.msgqueue.internal.sql.ClaimStatements;
import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.it.Await;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

// Kept in dev.msgqueue: builds ClaimedMessage, reads the receipt deadline and Subscriber's closing state.
/**
 * The default mode's take against PostgreSQL: a claim that deletes what it returns, so a handled message needs no ack,
 * and the release that puts back what no handler started. Two connections with explicit transactions force each
 * interleaving; the Subscriber cases hold a handler until close() began.
 */
class TakeIT extends RepositoryFixture {
  private static final long AWAIT_SECONDS = 120;
  private static final Duration LONG_LEASE = Duration.ofHours(1);

  TakeIT(TestDatabase db) {
    super(db, 6);
  }

  @Test
  void aTakeDeletesOnlyReadableUnexpiredPendingMessagesOfItsQueueLowestIdFirst() {
    QueueSpec spec = bound("take-what");
    QueueSpec other = bound("take-what-other");
    long leased = repository.publish(spec, "0");
    assertThat(repository.claim(spec.name(), 1, LONG_LEASE)).extracting(ClaimedMessage::id).containsExactly(leased);
    List<Long> ready = repository.publishBatch(spec, List.of("{\"n\": 1}", "{\"n\": 2}", "{\"n\": 3}"));
    long delayed = repository.publish(spec, "4",
        PublishOptions.defaults().withDelay(Duration.ofHours(1)).withTtl(Duration.ofHours(2)));
    long expired = repository.publish(spec, "5");
    db.dsl().update(MESSAGE_QUEUE_ITEM)
        .set(MESSAGE_QUEUE_ITEM.EXPIRES_AT, ServerTime.utcNowMinus(Duration.ofSeconds(1)))
        .set(MESSAGE_QUEUE_ITEM.READ_AFTER, ServerTime.utcNowMinus(Duration.ofSeconds(2)))
        .where(MESSAGE_QUEUE_ITEM.ID.eq(expired)).execute();
    long otherId = repository.publish(other, "6");
    Map<Long, LocalDateTime> expiries = expiriesOf(ready);

    List<ClaimedMessage> firstTwo = take(spec, 2);
    assertThat(firstTwo).extracting(ClaimedMessage::id).containsExactlyInAnyOrder(ready.get(0), ready.get(1));
    List<ClaimedMessage> taken = new ArrayList<>(firstTwo);
    taken.addAll(take(spec, 10));

    assertThat(taken).extracting(ClaimedMessage::id).containsExactlyInAnyOrderElementsOf(ready);
    assertThat(taken).allSatisfy(message -> {
      assertThat(message.queueName()).isEqualTo(spec.name());
      assertThat(message.receiptDeadline()).as("a take's receipt deadline is the expiry")
          .isEqualTo(expiries.get(message.id()));
      assertThat(row(message.id())).as("taken: deleted").isNull();
    });
    assertThat(taken).extracting(ClaimedMessage::payload)
        .containsExactlyInAnyOrder("{\"n\": 1}", "{\"n\": 2}", "{\"n\": 3}");
    assertThat(take(spec, 10)).isEmpty();
    assertThat(row(leased).getStatus()).isEqualTo(MessageQueueItemStatus.ASSIGNED);
    assertThat(row(delayed).getStatus()).isEqualTo(MessageQueueItemStatus.PENDING);
    assertThat(row(expired)).isNotNull();
    assertThat(row(otherId).getStatus()).isEqualTo(MessageQueueItemStatus.PENDING);
  }

  @Test
  void aTakeSkipsTheRowsAnUncommittedTakeHoldsAndARollbackBringsThemBack() {
    QueueSpec spec = bound("take-skip");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3", "4"));

    // Connection A takes two in a transaction it then rolls back; connection B takes while A is uncommitted.
    assertThatThrownBy(() -> db.dsl().transaction(tx -> {
      List<Long> held = ClaimStatements.take(tx.dsl(), spec.name(), 2, (receipt, payload) -> receipt.id()).messages();
      assertThat(held).containsExactlyInAnyOrder(ids.get(0), ids.get(1));
      List<Long> other = inOtherTransactionWithLockTimeout(consumer ->
          ClaimStatements.take(consumer, spec.name(), 10, (receipt, payload) -> receipt.id()).messages());
      assertThat(other).as("skipped, not waited for").containsExactlyInAnyOrder(ids.get(2), ids.get(3));
      throw new IllegalStateException("roll back (expected by the test)");
    })).hasMessage("roll back (expected by the test)");

    assertThat(row(ids.get(0)).getStatus()).isEqualTo(MessageQueueItemStatus.PENDING);
    assertThat(take(spec, 10)).extracting(ClaimedMessage::id).containsExactlyInAnyOrder(ids.get(0), ids.get(1));
  }

  @Test
  void anUncommittedReleaseIsInvisibleToOtherTakesUntilItCommits() {
    QueueSpec spec = bound("take-release-lock");
    long id = repository.publish(spec, "1");
    List<ClaimedMessage> taken = take(spec, 1);

    // While A holds the released row uncommitted, B's take skips it; once A commits, B takes it.
    db.dsl().transaction(tx -> {
      assertThat(releaseTaken(tx.dsl(), spec, taken)).containsExactly(id);
      List<Long> other = inOtherTransactionWithLockTimeout(consumer ->
          ClaimStatements.take(consumer, spec.name(), 10, (receipt, payload) -> receipt.id()).messages());
      assertThat(other).as("an uncommitted release is invisible to others").isEmpty();
    });
    assertThat(take(spec, 10)).extracting(ClaimedMessage::id).containsExactly(id);
  }

  @Test
  void aReleasePutsTakenMessagesBackUnderTheirIdsAndExpiryClaimableAtOnceAndOnlyOnce() {
    QueueSpec spec = bound("release-taken");
    List<Long> ids = repository.publishBatch(spec, List.of("{\"a\": 1}", "{\"b\": [2, 3]}", "\"c\""));
    Map<Long, LocalDateTime> expiries = expiriesOf(ids);
    List<ClaimedMessage> taken = take(spec, 3);
    List<ClaimedMessage> unstarted = taken.stream().filter(message -> message.id() != ids.get(1)).toList();

    assertThat(releaseTaken(repository.context().statements(), spec, unstarted))
        .containsExactlyInAnyOrder(ids.get(0), ids.get(2));
    assertThat(releaseTaken(repository.context().statements(), spec, unstarted)).as("a second release adds nothing")
        .isEmpty();

    LocalDateTime now = rows.serverUtcNow();
    for (long id : List.of(ids.get(0), ids.get(2))) {
      MessageQueueItemRecord back = row(id);
      assertThat(back.getStatus()).isEqualTo(MessageQueueItemStatus.PENDING);
      assertThat(back.getQueueId()).isEqualTo(spec.name());
      assertThat(back.getExpiresAt()).isEqualTo(expiries.get(id));
      assertThat(back.getReadAfter()).isBeforeOrEqualTo(now);
    }
    assertThat(row(ids.get(1))).isNull();
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name()))).isEqualTo(2);
    List<ClaimedMessage> again = repository.claim(spec.name(), 10);
    assertThat(again).extracting(ClaimedMessage::id).containsExactly(ids.get(0), ids.get(2));
    assertThat(again).extracting(ClaimedMessage::payload).containsExactly("{\"a\": 1}", "\"c\"");
  }

  @Test
  void aTakeNeverLocksTheQueueRow() {
    QueueSpec spec = bound("take-no-queue-lock");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2"));

    // FOR UPDATE on the queue row (what the reaper takes) while another connection takes: a take that touched the
    // queue row would wait and hit the lock timeout.
    db.dsl().transaction(tx -> {
      tx.dsl().selectFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq(spec.name())).forUpdate().fetch();
      List<Long> taken = inOtherTransactionWithLockTimeout(consumer ->
          ClaimStatements.take(consumer, spec.name(), 10, (receipt, payload) -> receipt.id()).messages());
      assertThat(taken).containsExactlyInAnyOrderElementsOf(ids);
    });
  }

  @Test
  void aSubscribersTakenMessagesAreGoneWhileHandledAndCloseReleasesTheUnstartedOnes() throws Exception {
    QueueSpec spec = bound("subscriber-take");
    List<Long> ids = repository.publishBatch(spec, IntStream.range(0, 10).mapToObj(Integer::toString).toList());
    Map<Long, LocalDateTime> expiries = expiriesOf(ids);
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    AtomicReference<Subscriber> subscriber = new AtomicReference<>();
    CountDownLatch running = new CountDownLatch(1);
    // One handler, the room (1 + 9) one batch of ten: the first message runs until close() began, nine wait for it.
    subscriber.set(Subscriber.builder(repository, spec, message -> {
      handled.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet();
      running.countDown();
      await("close() called", () -> subscriber.get().isClosing());
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(1).prefetch(9).batchSize(10).pollInterval(Duration.ofMillis(50)).start());
    closeLater(subscriber.get());

    assertThat(running.await(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
    await("the batch taken", () -> rows.itemsOf(spec.name()) == 0);
    assertThat(repository.queueStatistics(spec.name()).orElseThrow().inFlight())
        .as("taken messages are in no state of the table").isZero();
    assertThat(CompletableFuture.supplyAsync(() -> subscriber.get().close(Duration.ofSeconds(60)))
        .get(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();

    assertThat(handled).hasSize(1);
    long started = handled.keySet().iterator().next();
    assertThat(started).isEqualTo(ids.get(0));
    assertThat(subscriber.get().acked()).isOne();
    assertThat(subscriber.get().released()).isEqualTo(9);
    List<MessageQueueItemRecord> back = db.dsl().selectFrom(MESSAGE_QUEUE_ITEM)
        .where(MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name())).orderBy(MESSAGE_QUEUE_ITEM.ID).fetch();
    assertThat(back).extracting(MessageQueueItemRecord::getId).containsExactlyElementsOf(ids.subList(1, 10));
    assertThat(back).allSatisfy(item -> {
      assertThat(item.getStatus()).isEqualTo(MessageQueueItemStatus.PENDING);
      assertThat(item.getExpiresAt()).isEqualTo(expiries.get(item.getId()));
    });
  }

  @Test
  void closeReleasesIntoAQueueDeletedWhileItsMessagesWereTakenByBindingItAgain() throws Exception {
    QueueSpec spec = bound("release-rebind");
    List<Long> ids = repository.publishBatch(spec, IntStream.range(0, 5).mapToObj(Integer::toString).toList());
    AtomicReference<Subscriber> subscriber = new AtomicReference<>();
    CountDownLatch running = new CountDownLatch(1);
    subscriber.set(Subscriber.builder(repository, spec, message -> {
      running.countDown();
      await("close() called", () -> subscriber.get().isClosing());
    }).mode(ConsumeMode.AT_MOST_ONCE).concurrency(1).prefetch(4).batchSize(5).pollInterval(Duration.ofMillis(50)).start());
    closeLater(subscriber.get());
    assertThat(running.await(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
    await("the batch taken", () -> rows.itemsOf(spec.name()) == 0);

    // Deleted by hand while its messages are taken: nothing of it is left in the tables.
    assertThat(db.dsl().deleteFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq(spec.name())).execute()).isOne();
    assertThat(subscriber.get().close(Duration.ofSeconds(60))).isTrue();

    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.eq(spec.name()))).isOne();
    assertThat(db.dsl().select(MESSAGE_QUEUE_ITEM.ID).from(MESSAGE_QUEUE_ITEM)
        .where(MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name())).orderBy(MESSAGE_QUEUE_ITEM.ID).fetch(MESSAGE_QUEUE_ITEM.ID))
        .containsExactlyElementsOf(ids.subList(1, 5));
  }

  @Test
  void competingSubscribersTakeEveryMessageExactlyOnce() throws Exception {
    QueueSpec spec = bound("take-stress");
    int count = 3_000;
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    List<Subscriber> subscribers = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      subscribers.add(closeLater(Subscriber.builder(repository, spec,
              message -> handled.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet()).mode(ConsumeMode.AT_MOST_ONCE)
          .concurrency(4).batchSize(20).pollInterval(Duration.ofMillis(20)).start()));
    }
    List<Long> ids = new ArrayList<>();
    for (int from = 0; from < count; from += 50) {
      ids.addAll(repository.publishBatch(spec, IntStream.range(from, from + 50).mapToObj(Integer::toString).toList()));
    }
    await("every message handled", () -> handled.size() == count);
    for (Subscriber subscriber : subscribers) {
      assertThat(subscriber.close(Duration.ofSeconds(60))).isTrue();
    }

    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(handled.values()).allSatisfy(deliveries -> assertThat(deliveries.get()).isOne());
    assertThat(rows.itemsOf(spec.name())).isZero();
    assertThat(subscribers.stream().mapToLong(Subscriber::acked).sum()).isEqualTo(count);
  }

  private Map<Long, LocalDateTime> expiriesOf(List<Long> ids) {
    return ids.stream().collect(Collectors.toMap(id -> id, id -> row(id).getExpiresAt()));
  }

  private List<ClaimedMessage> take(QueueSpec spec, int max) {
    return new Consumption(repository.context(), ClaimedMessageAccess.INSTANCE).take(spec.name(), max);
  }

  private static List<Long> releaseTaken(org.jooq.DSLContext ctx, QueueSpec spec, List<ClaimedMessage> messages) {
    Long[] ids = messages.stream().map(ClaimedMessage::id).toArray(Long[]::new);
    String[] payloads = messages.stream().map(ClaimedMessage::payload).toArray(String[]::new);
    Long[] expiries = messages.stream().map(message -> ServerTime.epochMillis(message.receiptDeadline()))
        .toArray(Long[]::new);
    return ClaimStatements.releaseTaken(ctx, spec.name(), ids, payloads, expiries).messages();
  }

  private <T> T inOtherTransactionWithLockTimeout(java.util.function.Function<org.jooq.DSLContext, T> work) {
    return db.dsl().transactionResult(other -> {
      other.dsl().execute(DSL.query("SET LOCAL lock_timeout = '2s'")); // plain SQL: jOOQ has no SET LOCAL
      return work.apply(other.dsl());
    });
  }

  private static void await(String what, BooleanSupplier condition) {
    Await.until(what, Duration.ofSeconds(AWAIT_SECONDS), condition);
  }
}
