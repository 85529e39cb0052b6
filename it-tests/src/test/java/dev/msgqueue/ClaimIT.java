package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.internal.consume.Consumption;
import dev.msgqueue.internal.sql.ClaimStatements;
import dev.msgqueue.internal.sql.ServerTime;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

// Kept in dev.msgqueue: reads ClaimedMessage's receipt deadline and redelivery flag and the repository's context.
/** {@link MsgQueueRepository#claim}, {@code ack} and {@code release} against PostgreSQL, in both modes. */
class ClaimIT extends RepositoryFixture {
  private static final Duration LONG_LEASE = Duration.ofHours(1);

  ClaimIT(TestDatabase db) {
    super(db, 4);
  }

  @Test
  void claimAckRoundTripInIdOrderAndOnlyFromTheNamedQueue() {
    QueueSpec spec = bound("round-trip");
    QueueSpec other = bound("round-trip-other");
    List<Long> ids = repository.publishBatch(spec, List.of("{\"n\": 1}", "{\"n\": 2}", "{\"n\": 3}"));
    long otherId = repository.publish(other, "{\"n\": 0}");

    List<ClaimedMessage> first = repository.claim(spec.name(), 2);
    assertThat(first).extracting(ClaimedMessage::id).containsExactly(ids.get(0), ids.get(1));
    assertThat(first).extracting(ClaimedMessage::payload).containsExactly("{\"n\": 1}", "{\"n\": 2}");
    assertThat(first).extracting(ClaimedMessage::queueName).containsOnly(spec.name());
    assertThat(row(ids.get(0)).getStatus()).isEqualTo(MessageQueueItemStatus.ASSIGNED);

    List<ClaimedMessage> second = repository.claim(spec.name(), 10);
    assertThat(second).extracting(ClaimedMessage::id).containsExactly(ids.get(2));
    assertThat(repository.claim(spec.name(), 10)).isEmpty();

    assertThat(repository.ack(first)).containsExactly(ids.get(0), ids.get(1));
    assertThat(repository.ack(second.get(0))).isTrue();
    assertThat(repository.ack(second.get(0))).as("a second ack finds nothing").isFalse();
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name()))).isZero();
    assertThat(row(otherId).getStatus()).isEqualTo(MessageQueueItemStatus.PENDING);
  }

  @Test
  void readAfterDelaysTheClaim() {
    QueueSpec spec = bound("delayed");
    long delayed = repository.publish(spec, "1", PublishOptions.defaults().withDelay(Duration.ofHours(1)).withTtl(Duration.ofHours(2)));
    long ready = repository.publish(spec, "2");

    assertThat(repository.claim(spec.name(), 10)).extracting(ClaimedMessage::id).containsExactly(ready);
    assertThat(repository.claim(spec.name(), 10, LONG_LEASE)).isEmpty();

    // Let the hour pass: move the item's readAfter into the past.
    db.dsl().update(MESSAGE_QUEUE_ITEM)
        .set(MESSAGE_QUEUE_ITEM.READ_AFTER, ServerTime.utcNowMinus(Duration.ofSeconds(1)))
        .where(MESSAGE_QUEUE_ITEM.ID.eq(delayed)).execute();
    assertThat(repository.claim(spec.name(), 10)).extracting(ClaimedMessage::id).containsExactly(delayed);
  }

  @Test
  void expiredItemsAreNeverClaimed() {
    QueueSpec spec = bound("expired");
    long expired = repository.publish(spec, "1");
    long live = repository.publish(spec, "2");
    db.dsl().update(MESSAGE_QUEUE_ITEM)
        .set(MESSAGE_QUEUE_ITEM.EXPIRES_AT, ServerTime.utcNowMinus(Duration.ofMillis(1)))
        .where(MESSAGE_QUEUE_ITEM.ID.eq(expired)).execute();

    assertThat(repository.claim(spec.name(), 10, LONG_LEASE)).extracting(ClaimedMessage::id).containsExactly(live);
    assertThat(repository.claim(spec.name(), 10)).isEmpty();
    assertThat(row(expired).getStatus()).isEqualTo(MessageQueueItemStatus.PENDING);
  }

  @Test
  void aClaimSkipsRowsAnotherUncommittedClaimHoldsInsteadOfWaiting() {
    QueueSpec spec = bound("skip-locked");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3", "4"));

    db.dsl().transaction(tx -> {
      List<ClaimedMessage> held = repository.inTransaction(tx.dsl()).claim(spec.name(), 2);
      assertThat(held).extracting(ClaimedMessage::id).containsExactly(ids.get(0), ids.get(1));
      // Another connection, while the first claim is uncommitted: it must skip the two locked rows, not wait.
      List<ClaimedMessage> other = repository.claim(spec.name(), 10, LONG_LEASE);
      assertThat(other).extracting(ClaimedMessage::id).containsExactly(ids.get(2), ids.get(3));
    });
  }

  @Test
  void twoCompetingConsumersGetDisjointSetsCoveringAllItems() throws Exception {
    QueueSpec spec = bound("competing");
    List<String> payloads = IntStream.range(0, 1_000).mapToObj(Integer::toString).toList();
    Set<Long> published = new HashSet<>(repository.publishBatch(spec, payloads));

    CyclicBarrier start = new CyclicBarrier(2);
    Callable<List<Long>> consumer = () -> {
      start.await(10, TimeUnit.SECONDS);
      List<Long> got = new ArrayList<>();
      for (int round = 0; round < 1_000; round++) { // bounded: 1,000 items need at most 143 full rounds
        List<ClaimedMessage> batch = repository.claim(spec.name(), 7);
        if (batch.isEmpty()) {
          break;
        }
        batch.forEach(message -> got.add(message.id()));
        repository.ack(batch);
      }
      return got;
    };
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      Future<List<Long>> a = pool.submit(consumer);
      Future<List<Long>> b = pool.submit(consumer);
      List<Long> gotA = a.get(60, TimeUnit.SECONDS);
      List<Long> gotB = b.get(60, TimeUnit.SECONDS);

      assertThat(Collections.disjoint(gotA, gotB)).as("disjoint").isTrue();
      assertThat(gotA).doesNotHaveDuplicates();
      assertThat(gotB).doesNotHaveDuplicates();
      Set<Long> union = new HashSet<>(gotA);
      union.addAll(gotB);
      assertThat(union).isEqualTo(published);
      assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(spec.name()))).isZero();
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void leaseModeRedeliversAfterTheLeaseAndALateAckDeletesNothing() throws Exception {
    QueueSpec spec = bound("lease");
    long id = repository.publish(spec, "{\"job\": 1}");

    // Consumer A claims with a short lease and "dies": it never acks in time.
    List<ClaimedMessage> claimedByA = repository.claim(spec.name(), 1, Duration.ofMillis(300));
    assertThat(claimedByA).extracting(ClaimedMessage::id).containsExactly(id);

    // Consumer B polls until the lease runs out and it gets the message again (bounded wait).
    List<ClaimedMessage> claimedByB = List.of();
    long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (claimedByB.isEmpty() && System.nanoTime() < giveUp) {
      Thread.sleep(50);
      claimedByB = repository.claim(spec.name(), 1, LONG_LEASE);
    }
    assertThat(claimedByB).extracting(ClaimedMessage::id).containsExactly(id);
    assertThat(claimedByB.get(0).receiptDeadline()).isAfter(claimedByA.get(0).receiptDeadline());

    // A's late ack and release must not touch B's claim.
    assertThat(repository.ack(claimedByA)).isEmpty();
    assertThat(repository.release(claimedByA.get(0), Duration.ZERO)).isFalse();
    MessageQueueItemRecord stillThere = row(id);
    assertThat(stillThere.getStatus()).isEqualTo(MessageQueueItemStatus.ASSIGNED);
    assertThat(stillThere.getReadAfter()).isEqualTo(claimedByB.get(0).receiptDeadline());
    // B holds an hour's lease: nobody else gets it meanwhile.
    assertThat(repository.claim(spec.name(), 1, LONG_LEASE)).isEmpty();

    assertThat(repository.ack(claimedByB)).containsExactly(id);
    assertThat(row(id)).isNull();
  }

  @Test
  void defaultModeKeepsTodaysBehaviourAClaimedItemIsNeverClaimedAgain() {
    QueueSpec spec = bound("default-mode");
    long id = repository.publish(spec, "1");

    List<ClaimedMessage> claimed = repository.claim(spec.name(), 1);
    assertThat(claimed).extracting(ClaimedMessage::id).containsExactly(id);
    MessageQueueItemRecord assigned = row(id);
    assertThat(assigned.getStatus()).isEqualTo(MessageQueueItemStatus.ASSIGNED);
    assertThat(assigned.getReadAfter()).as("deadline = expiry: claimable again only once expired")
        .isEqualTo(assigned.getExpiresAt());
    assertThat(repository.claim(spec.name(), 1)).isEmpty();
    assertThat(repository.claim(spec.name(), 1, Duration.ofMillis(1))).as("not by a lease-mode claim either").isEmpty();

    // An item ASSIGNED by a pre-upgrade consumer ("readAfter" left in the past) is not claimed in the default mode.
    long legacy = repository.publish(spec, "2");
    db.dsl().update(MESSAGE_QUEUE_ITEM).set(MESSAGE_QUEUE_ITEM.STATUS, MessageQueueItemStatus.ASSIGNED)
        .where(MESSAGE_QUEUE_ITEM.ID.eq(legacy)).execute();
    assertThat(repository.claim(spec.name(), 10)).isEmpty();

    assertThat(repository.ack(claimed)).containsExactly(id);
  }

  @Test
  void releaseMakesTheItemClaimableAfterTheDelay() {
    QueueSpec spec = bound("release");
    long id = repository.publish(spec, "1");

    ClaimedMessage first = repository.claim(spec.name(), 1, LONG_LEASE).get(0);
    assertThat(repository.release(first, Duration.ofHours(1))).isTrue();
    assertThat(row(id).getStatus()).isEqualTo(MessageQueueItemStatus.PENDING);
    assertThat(repository.claim(spec.name(), 1)).as("not before the delay").isEmpty();

    db.dsl().update(MESSAGE_QUEUE_ITEM)
        .set(MESSAGE_QUEUE_ITEM.READ_AFTER, ServerTime.utcNowMinus(Duration.ofSeconds(1)))
        .where(MESSAGE_QUEUE_ITEM.ID.eq(id)).execute();
    ClaimedMessage second = repository.claim(spec.name(), 1).get(0);
    assertThat(second.id()).isEqualTo(id);
    assertThat(repository.release(second, Duration.ZERO)).isTrue();
    assertThat(repository.claim(spec.name(), 1, LONG_LEASE)).extracting(ClaimedMessage::id).containsExactly(id);
  }

  @Test
  void claimAckAndReleaseNeverLockTheQueueRow() {
    QueueSpec spec = bound("no-queue-lock");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2"));

    // Hold FOR UPDATE on the queue row (what the reaper takes) while claiming, releasing and acking from other
    // connections, each in its own transaction as a consumer runs them: any of them touching the row would wait and
    // hit the lock timeout.
    db.dsl().transaction(tx -> {
      tx.dsl().selectFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq(spec.name())).forUpdate().fetch();
      List<ClaimedMessage> claimed = withLockTimeout(consumer -> consumer.claim(spec.name(), 10, LONG_LEASE));
      assertThat(claimed).extracting(ClaimedMessage::id).containsExactlyElementsOf(ids);
      boolean released = withLockTimeout(consumer -> consumer.release(claimed.get(0), Duration.ZERO));
      assertThat(released).isTrue();
      List<Long> acked = withLockTimeout(consumer -> consumer.ack(claimed.subList(1, 2)));
      assertThat(acked).containsExactly(ids.get(1));
    });
  }

  @Test
  void oneLeaseClaimMarksEachMessageByTheStatusItWasLockedIn() {
    QueueSpec spec = bound("redelivered-mixed");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3", "4"));
    List<ClaimedMessage> firstTwo = repository.claim(spec.name(), 2, LONG_LEASE);
    assertThat(firstTwo).extracting(ClaimedMessage::id).containsExactly(ids.get(0), ids.get(1));
    expireLease(ids.get(1));

    // The second message's lease ran out, the first's did not; the last two were never claimed.
    List<ClaimedMessage> claimed = repository.claim(spec.name(), 10, LONG_LEASE);
    assertThat(claimed).extracting(ClaimedMessage::id).containsExactly(ids.get(1), ids.get(2), ids.get(3));
    assertThat(claimed).extracting(ClaimedMessage::redelivered).containsExactly(true, false, false);
    assertThat(repository.claim(spec.name(), 10, LONG_LEASE)).as("every claimable message was claimed").isEmpty();
    assertThat(repository.ack(claimed)).hasSize(3);
  }

  private <T> T withLockTimeout(java.util.function.Function<TransactionalQueue, T> work) {
    return db.dsl().transactionResult(other -> {
      other.dsl().execute(DSL.query("SET LOCAL lock_timeout = '2s'")); // plain SQL: jOOQ has no SET LOCAL
      return work.apply(repository.inTransaction(other.dsl()));
    });
  }

  @Test
  void aReclaimAfterTheLeaseRanOutIsMarkedRedeliveredAndAReleasedOneIsNot() {
    QueueSpec spec = bound("redelivered");
    long id = repository.publish(spec, "1");

    ClaimedMessage first = repository.claim(spec.name(), 1, LONG_LEASE).get(0);
    assertThat(first.redelivered()).as("first delivery").isFalse();
    expireLease(id);
    ClaimedMessage second = repository.claim(spec.name(), 1, LONG_LEASE).get(0);
    assertThat(second.id()).isEqualTo(id);
    assertThat(second.redelivered()).as("the first lease ran out: a redelivery").isTrue();

    assertThat(repository.release(second, Duration.ZERO)).isTrue();
    ClaimedMessage third = repository.claim(spec.name(), 1, LONG_LEASE).get(0);
    assertThat(third.redelivered()).as("a release hands the message back: not a crash").isFalse();
    assertThat(repository.claim(spec.name(), 1)).isEmpty();
    assertThat(repository.ack(third)).isTrue();
  }

  @Test
  void aStaleReceiptInABatchAckDeletesNothingWhileTheRestOfTheBatchIsDeleted() {
    QueueSpec spec = bound("stale-in-batch");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3", "4"));
    List<ClaimedMessage> claimed = repository.claim(spec.name(), 4, LONG_LEASE);
    assertThat(claimed).extracting(ClaimedMessage::id).containsExactlyElementsOf(ids);

    // The lease of the second ran out and another consumer re-claimed it: the first consumer's receipt is stale.
    expireLease(ids.get(1));
    ClaimedMessage reclaimed = repository.claim(spec.name(), 10, LONG_LEASE).get(0);
    assertThat(reclaimed.id()).isEqualTo(ids.get(1));

    assertThat(repository.ack(claimed)).containsExactly(ids.get(0), ids.get(2), ids.get(3));
    MessageQueueItemRecord kept = row(ids.get(1));
    assertThat(kept.getStatus()).isEqualTo(MessageQueueItemStatus.ASSIGNED);
    assertThat(kept.getReadAfter()).isEqualTo(reclaimed.receiptDeadline());
    assertThat(repository.ack(List.of(reclaimed))).containsExactly(ids.get(1));
  }

  @Test
  void theSubscribersCountingAckChecksReceiptsTheSameWay() {
    QueueSpec spec = bound("stale-in-counted-batch");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3"));
    List<ClaimedMessage> claimed = repository.claim(spec.name(), 3, LONG_LEASE);
    expireLease(ids.get(0));
    ClaimedMessage reclaimed = repository.claim(spec.name(), 10, LONG_LEASE).get(0);

    assertThat(new Consumption(repository.context(), ClaimedMessageAccess.INSTANCE).ackCount(spec.name(), claimed)).isEqualTo(2);
    assertThat(row(ids.get(0)).getReadAfter()).isEqualTo(reclaimed.receiptDeadline());
    assertThat(row(ids.get(1))).isNull();
    assertThat(row(ids.get(2))).isNull();
    assertThat(new Consumption(repository.context(), ClaimedMessageAccess.INSTANCE).ackCount(spec.name(), List.of(reclaimed))).isEqualTo(1);
  }

  @Test
  void theClaimsGenericPlanWalksTheQueueIndexWhateverPlanCacheModeSays() throws Exception {
    QueueSpec spec = bound("generic-plan");
    QueueSpec other = bound("generic-plan-other");
    List<String> payloads = IntStream.range(0, 5_000).mapToObj(Integer::toString).toList();
    repository.publishBatch(spec, payloads);
    repository.publishBatch(other, payloads);
    db.dsl().execute(DSL.query("ANALYZE \"MessageQueueItem\"")); // plain SQL: jOOQ has no ANALYZE

    for (Duration lease : java.util.Arrays.asList(null, LONG_LEASE)) {
      org.jooq.Query claim = ClaimStatements.claimQuery(
          DSL.using(org.jooq.SQLDialect.POSTGRES), spec.name(), 100, lease);
      String plan = genericPlan(claim);
      // The candidates come from the ("queueId","id") index, in id order, and the plan knows there are at most 100
      // (a bound LIMIT's generic plan assumed a tenth of the table, and read and sorted all of it). Both modes then
      // update the locked ids through the primary key, as one array: the InitPlan's (default mode) or the aggregate's
      // (lease mode, which also collects the ids locked while ASSIGNED).
      assertThat(plan).as(plan)
          .containsPattern("Limit .*rows=100 ")
          .containsPattern("Index Scan using \"MessageQueueItem_queueId_id_idx\" on \"MessageQueueItem\" claimable")
          .containsPattern(
              "Index Scan using \"MessageQueueItem_pkey\" on \"MessageQueueItem\"\\s.*\\n\\s*Index Cond: \\(id = ANY ")
          .doesNotContain("Seq Scan on \"MessageQueueItem\" claimable")
          .doesNotContain("Sort");
    }
  }

  /**
   * EXPLAIN of {@code query} prepared server-side with {@code $n} parameters and forced onto PostgreSQL's generic
   * plan, the one it uses for any prepared statement once custom plans stop paying off (plain SQL: PREPARE, EXPLAIN
   * EXECUTE and SET are not in jOOQ's DSL).
   */
  private String genericPlan(org.jooq.Query query) throws Exception {
    org.jooq.DSLContext dollar = DSL.using(org.jooq.SQLDialect.POSTGRES,
        new org.jooq.conf.Settings().withRenderNamedParamPrefix("$").withParamType(org.jooq.conf.ParamType.NAMED));
    String sql = dollar.renderNamedParams(query);
    StringBuilder arguments = new StringBuilder();
    for (org.jooq.Param<?> param : query.getParams().values()) {
      if (!param.isInline()) {
        arguments.append(arguments.length() == 0 ? "" : ", ").append(dollar.renderInlined(param));
      }
    }
    try (java.sql.Connection connection = db.connect(); java.sql.Statement statement = connection.createStatement()) {
      statement.execute("SET plan_cache_mode = force_generic_plan");
      try {
        statement.execute("PREPARE claim_plan AS " + sql);
      } catch (java.sql.SQLException e) {
        throw new AssertionError(sql, e);
      }
      StringBuilder plan = new StringBuilder();
      try (java.sql.ResultSet rows = statement.executeQuery("EXPLAIN EXECUTE claim_plan(" + arguments + ")")) {
        while (rows.next()) {
          plan.append(rows.getString(1)).append('\n');
        }
      }
      return plan.toString();
    }
  }

  /** Moves the item's lease deadline into the past, as if its lease had run out. */
  private void expireLease(long id) {
    db.dsl().update(MESSAGE_QUEUE_ITEM)
        .set(MESSAGE_QUEUE_ITEM.READ_AFTER, ServerTime.utcNowMinus(Duration.ofSeconds(1)))
        .where(MESSAGE_QUEUE_ITEM.ID.eq(id)).execute();
  }

  @Test
  void invalidArgumentsFailBeforeAnySql() {
    assertThatThrownBy(() -> repository.claim("q", 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> repository.claim("q", MsgQueueRepository.MAX_BATCH_SIZE + 1))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> repository.claim(" q", 1)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> repository.claim("q", 1, Duration.ofNanos(999_999)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(repository.ack(List.of())).isEmpty();
  }
}
