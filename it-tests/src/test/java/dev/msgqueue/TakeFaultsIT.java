package dev.msgqueue;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.internal.consume.Consumption;
import dev.msgqueue.internal.consume.HandBack;
import dev.msgqueue.it.Await;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.it.WireProxy;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

// Kept in dev.msgqueue: builds the at-most-once internals with ClaimedMessage's access and reads Subscriber counters.
/**
 * The at-most-once take and its put-back when a connection dies at the worst moment: after the server committed and
 * before the client heard of it. A {@link WireProxy} between the library and PostgreSQL cuts the connection right
 * after the server's answer to COMMIT, so the interleaving is exact, not timed.
 */
class TakeFaultsIT extends RepositoryFixture {
  private static final Duration AWAIT = Duration.ofSeconds(120);

  private final WireProxy proxy;
  private final HikariDataSource proxiedPool;
  private final MsgQueueRepository proxied;

  TakeFaultsIT(TestDatabase db) throws Exception {
    super(db, 6);
    this.proxy = new WireProxy(db.jdbcUrl());
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(proxy.jdbcUrl());
    config.setMaximumPoolSize(6);
    config.setMinimumIdle(0);
    config.setConnectionTimeout(2_000);
    this.proxiedPool = new HikariDataSource(config);
    this.proxied = MsgQueueRepository.create(proxiedPool, MsgQueueConfig.defaults());
  }

  @AfterEach
  void closeProxy() throws Exception {
    proxiedPool.close();
    proxy.close();
  }

  @Test
  void aPutBackWhoseCommitWentUnansweredIsNotRepeatedOverMessagesAnotherConsumerTookSince() throws Exception {
    QueueSpec spec = bound("put-back-race");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3"));
    Consumption consumerA = new Consumption(proxied.context(), ClaimedMessageAccess.INSTANCE);
    Consumption consumerB = new Consumption(repository.context(), ClaimedMessageAccess.INSTANCE);
    List<ClaimedMessage> taken = consumerA.take(spec.name(), 3);
    assertThat(taken).extracting(ClaimedMessage::id).containsExactlyInAnyOrderElementsOf(ids);

    // A puts them back: the server commits, the answer never reaches A.
    HandBack putBack = consumerA.putBack(spec, taken);
    proxy.cutAfterNextCommit();
    assertThatThrownBy(putBack::attempt).isInstanceOf(RuntimeException.class);
    assertThat(proxy.cuts()).isOne();
    // B takes them, committed, before A tries again.
    assertThat(consumerB.take(spec.name(), 10)).extracting(ClaimedMessage::id).containsExactlyInAnyOrderElementsOf(ids);
    // A's next attempt learns that its first one committed, and puts nothing back a second time.
    assertThat(putBack.attempt()).isEqualTo(3);

    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.in(ids)))
        .as("taken by B, not put back again: one delivery each").isZero();
  }

  @Test
  void aPutBackWhoseFirstAttemptDidNotCommitIsMadeAgain() throws Exception {
    QueueSpec spec = bound("put-back-again");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2"));
    Consumption consumer = new Consumption(proxied.context(), ClaimedMessageAccess.INSTANCE);
    List<ClaimedMessage> taken = consumer.take(spec.name(), 2);
    HandBack putBack = consumer.putBack(spec, taken);
    // The put-back's insert fails before anything commits: the queue row is missing, so it is bound again first.
    db.dsl().deleteFrom(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE)
        .where(dev.msgqueue.jooq.Tables.MESSAGE_QUEUE.NAME.eq(spec.name())).execute();

    assertThat(putBack.attempt()).isEqualTo(2);
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.in(ids))).isEqualTo(2);
  }

  @Test
  void aTakeWhoseCommitWentUnansweredIsHandledOnceWhenTheServerSaysItCommitted() throws Exception {
    QueueSpec spec = bound("take-unanswered");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3", "4", "5"));
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    proxy.cutAfterNextCommit(); // the subscriber's first take: its messages are there before it starts
    Subscriber subscriber = closeLater(Subscriber.builder(proxied, spec,
            message -> handled.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet()).mode(ConsumeMode.AT_MOST_ONCE)
        .pollInterval(Duration.ofMillis(100)).start());

    assertThat(proxy.awaitCut(AWAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
    Await.until("the taken messages handled", AWAIT, () -> handled.size() == ids.size());
    assertThat(handled.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(handled.values()).allSatisfy(count -> assertThat(count.get()).isOne());
    assertThat(subscriber.unresolved()).isZero();
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.in(ids))).isZero();
  }

  @Test
  void aTakeWhoseOutcomeTheServerCannotTellIsCountedLoggedWithItsIdsAndNotDelivered() throws Exception {
    QueueSpec spec = bound("take-unresolved");
    List<Long> ids = repository.publishBatch(spec, List.of("1", "2", "3"));
    Map<Long, AtomicInteger> handled = new ConcurrentHashMap<>();
    ByteArrayOutputStream log = new ByteArrayOutputStream();
    PrintStream stderr = System.err;
    // slf4j-simple writes to whatever System.err is at each line: keep a copy of what the library logs meanwhile.
    System.setErr(new PrintStream(new TeeStream(stderr, log), true, StandardCharsets.UTF_8));
    try {
      proxy.cutAfterNextCommit();
      Subscriber subscriber = closeLater(Subscriber.builder(proxied, spec,
              message -> handled.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet()).mode(ConsumeMode.AT_MOST_ONCE)
          .pollInterval(Duration.ofMillis(100)).start());
      assertThat(proxy.awaitCut(AWAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
      proxy.refuseConnections(true); // the server cannot be asked whether the take committed
      Await.until("the take given up as unresolved", AWAIT, () -> subscriber.unresolved() == ids.size());
      proxy.refuseConnections(false);
    } finally {
      System.setErr(stderr);
    }

    assertThat(handled).as("not delivered: it may be in the queue still, and then it would be delivered twice")
        .isEmpty();
    String logged = log.toString(StandardCharsets.UTF_8);
    assertThat(logged).contains("take of 3 message(s) went unanswered and the server could not tell")
        .contains("ids " + ids.stream().sorted().toList());
    // The take did commit: these three are lost, as the at-most-once mode allows and the log and counter say.
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.in(ids))).isZero();
  }

  /** Writes to two streams. */
  private static final class TeeStream extends java.io.OutputStream {
    private final java.io.OutputStream first;
    private final java.io.OutputStream second;

    TeeStream(java.io.OutputStream first, java.io.OutputStream second) {
      this.first = first;
      this.second = second;
    }

    @Override
    public void write(int b) throws java.io.IOException {
      first.write(b);
      second.write(b);
    }

    @Override
    public void write(byte[] b, int off, int len) throws java.io.IOException {
      first.write(b, off, len);
      second.write(b, off, len);
    }
  }
}
