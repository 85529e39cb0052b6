package dev.msgqueue.publish;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.MsgQueueTimeoutException;
import dev.msgqueue.PublishOptions;
import dev.msgqueue.QueueNotFoundException;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.internal.publish.Publisher;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.jooq.JSONB;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.junit.jupiter.api.Test;

/**
 * Batches of {@link Publisher#COPY_MIN_BATCH} payloads or more, published in autocommit, go by COPY: the same rows,
 * ids, times and heal as the insert, and a reaper's interleavings end as they do for the insert.
 */
class BatchCopyIT extends RepositoryFixture {
  private static final int BATCH = Publisher.COPY_MIN_BATCH;
  /** The statement that draws the ids of a COPY: seeing it run means the batch went by COPY. */
  private static final String RESERVE_MARK = "pg_get_serial_sequence";

  BatchCopyIT(TestDatabase db) {
    super(db);
  }

  /** Every statement's SQL, and an action to run right after the statement that draws a COPY's ids. */
  private static final class Statements implements ExecuteListener {
    private static final long serialVersionUID = 1L;
    final List<String> seen = new CopyOnWriteArrayList<>();
    transient volatile Runnable afterReserve = () -> { };

    @Override
    public void executeEnd(ExecuteContext ctx) {
      seen.add(ctx.sql());
      if (ctx.sql() != null && ctx.sql().contains(RESERVE_MARK)) {
        afterReserve.run();
      }
    }

    boolean copied() {
      return seen.stream().anyMatch(sql -> sql != null && sql.contains(RESERVE_MARK));
    }

    boolean inserted() {
      return seen.stream().anyMatch(sql -> sql != null && sql.contains("insert into \"MessageQueueItem\""));
    }
  }

  private HikariDataSource pool(int size) {
    return closeLater(db.pool(size));
  }

  /** A repository on a pool of its own whose every statement {@code statements} sees, with {@code spec} bound. */
  private MsgQueueRepository watched(Statements statements, QueueSpec spec) {
    MsgQueueRepository listened = listenedRepository(pool(2), statements, MsgQueueConfig.defaults());
    listened.bindQueue(spec);
    return listened;
  }

  private static List<String> numbered(int count) {
    List<String> payloads = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      payloads.add("{\"n\": " + i + "}");
    }
    return payloads;
  }

  private int orphans() {
    return db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.isNull());
  }

  @Test
  void aCopiedBatchKeepsItsOrderTextAndTimes() {
    Statements statements = new Statements();
    // Quotes and a backslash in the name, and payloads with every character COPY's text format escapes.
    QueueSpec spec = QueueSpec.durable("tenant \\ \"42\"");
    MsgQueueRepository copying = watched(statements, spec);
    List<String> payloads = new ArrayList<>(numbered(BATCH));
    payloads.set(0, "{\"text\": \"back\\\\slash \\\"quoted\\\" tab\\t newline\\n\"}");
    payloads.set(1, "{\r\n\t\"spaced\": [1,\n 2]\r\n}");
    payloads.set(2, "\"ünïcødé ✓ 😀\"");
    payloads.set(3, "\"\\u0001 \\\\N \\\\.\"");
    payloads.set(4, "12345678901234567890.123");

    List<Long> ids = copying.publishBatch(spec, payloads,
        PublishOptions.defaults().withDelay(Duration.ofSeconds(30)).withTtl(Duration.ofHours(2)));

    assertThat(statements.copied()).as("went by COPY").isTrue();
    assertThat(statements.inserted()).as("no insert").isFalse();
    assertThat(ids).hasSize(BATCH).isSorted().doesNotHaveDuplicates();
    LocalDateTime now = rows.serverUtcNow();
    List<MessageQueueItemRecord> items = new ArrayList<>();
    for (int i = 0; i < BATCH; i++) {
      MessageQueueItemRecord item = row(ids.get(i));
      items.add(item);
      assertThat(item.getQueueId()).isEqualTo(spec.name());
      Boolean same = db.dsl().select(DSL.field(DSL.val(item.getPayload()).eq(
          DSL.val(payloads.get(i)).cast(SQLDataType.JSONB)))).fetchSingle().value1();
      assertThat(same).as("payload %d is %s", i, payloads.get(i)).isTrue();
    }
    assertThat(items).extracting(MessageQueueItemRecord::getReadAfter).containsOnly(items.get(0).getReadAfter());
    assertThat(items).extracting(MessageQueueItemRecord::getExpiresAt).containsOnly(items.get(0).getExpiresAt());
    assertThat(items.get(0).getReadAfter()).isCloseTo(now.plusSeconds(30), within(5, ChronoUnit.SECONDS));
    assertThat(items.get(0).getExpiresAt()).isCloseTo(now.plusHours(2), within(5, ChronoUnit.SECONDS));
    assertThat(items.get(0).getReadAfter().getNano() % 1_000_000).as("millisecond precision").isZero();
  }

  @Test
  void aBatchBelowTheCopySizeIsInserted() {
    Statements statements = new Statements();
    QueueSpec spec = QueueSpec.durable("small-batch");
    MsgQueueRepository copying = watched(statements, spec);

    assertThat(copying.publishBatch(spec, numbered(BATCH - 1))).hasSize(BATCH - 1);

    assertThat(statements.copied()).isFalse();
    assertThat(statements.inserted()).isTrue();
  }

  @Test
  void aMissingDurableQueueIsATypedErrorAndTheConnectionReturnsToAutocommit() {
    MsgQueueRepository onePooled = MsgQueueRepository.create(pool(1), MsgQueueConfig.defaults());
    QueueSpec missing = QueueSpec.durable("never-bound");

    assertThatThrownBy(() -> onePooled.publishBatch(missing, numbered(BATCH)))
        .isInstanceOf(QueueNotFoundException.class);

    // The pool's one connection again: had it stayed out of autocommit, nobody else would see this publish.
    QueueSpec bound = bound("bound-after-failure");
    onePooled.publishBatch(bound, numbered(BATCH));
    assertThat(rows.itemsOf("bound-after-failure")).isEqualTo(BATCH);
    assertThat(rows.itemsOf("never-bound")).isZero();
  }

  @Test
  void aQueueReapedBetweenTheIdsAndTheCopyHealsWithEveryMessage() {
    Statements statements = new Statements();
    QueueSpec spec = QueueSpec.autoDeleted("reaped-mid-copy");
    MsgQueueRepository copying = watched(statements, spec);
    boolean[] reaped = new boolean[1];
    statements.afterReserve = () -> {
      if (!reaped[0]) {
        reaped[0] = true;
        reap(spec.name()); // another repository's reaper, on its own connection, committed
      }
    };

    List<Long> ids = copying.publishBatch(spec, numbered(BATCH));

    assertThat(reaped[0]).isTrue();
    assertThat(ids).hasSize(BATCH).isSorted();
    assertThat(rows.exists(spec.name())).isTrue();
    assertThat(rows.itemsOf(spec.name())).isEqualTo(BATCH);
    assertThat(ids).extracting(id -> row(id).getPayload().data())
        .containsExactlyElementsOf(numbered(BATCH).stream().map(json -> JSONB.valueOf(json).data()).toList());
    assertThat(orphans()).isZero();
  }

  @Test
  void aReaperHoldingTheQueueRowMakesTheCopyWaitAndThenHeal() throws Exception {
    QueueSpec spec = QueueSpec.autoDeleted("reaper-holds-row");
    repository.bindQueue(spec);
    ExecutorService publisher = Executors.newSingleThreadExecutor();
    try (Session reaper = Session.open(db)) {
      // The reaper's order: lock the idle queue's row, then delete it.
      reaper.dsl().selectFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq(spec.name())).forUpdate().fetch();
      Future<List<Long>> published = publisher.submit(() -> repository.publishBatch(spec, numbered(BATCH)));
      db.awaitSomeBackendWaitingOnLock();
      reaper.dsl().deleteFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq(spec.name())).execute();
      reaper.commit();

      List<Long> ids = published.get(30, TimeUnit.SECONDS);

      assertThat(ids).hasSize(BATCH);
      assertThat(rows.exists(spec.name())).isTrue();
      assertThat(rows.itemsOf(spec.name())).isEqualTo(BATCH);
      assertThat(orphans()).isZero();
    } finally {
      publisher.shutdownNow();
    }
  }

  @Test
  void aCopyWaitingPastTheStatementTimeoutFailsTypedAndWritesNothing() throws Exception {
    MsgQueueConfig config = MsgQueueConfig.builder()
        .statementTimeout(Duration.ofMillis(500)).lockTimeout(Duration.ofMillis(300)).build();
    MsgQueueRepository onePooled = MsgQueueRepository.create(pool(1), config);
    QueueSpec spec = bound("held-row");
    try (Session holder = Session.open(db)) {
      holder.dsl().selectFrom(MESSAGE_QUEUE).where(MESSAGE_QUEUE.NAME.eq(spec.name())).forUpdate().fetch();

      assertThatThrownBy(() -> onePooled.publishBatch(spec, numbered(BATCH)))
          .isInstanceOf(MsgQueueTimeoutException.class);

      holder.rollback();
    }
    assertThat(rows.itemsOf(spec.name())).isZero();
    // The same connection publishes again, and what it publishes is committed.
    assertThat(onePooled.publishBatch(spec, numbered(BATCH))).hasSize(BATCH);
    assertThat(rows.itemsOf(spec.name())).isEqualTo(BATCH);
  }

  @Test
  void aBatchWithItsKeepAliveDueWritesTheKeepAlive() throws Exception {
    MsgQueueConfig config = MsgQueueConfig.builder().keepAliveInterval(Duration.ofMillis(100)).build();
    MsgQueueRepository publisherOnly = MsgQueueRepository.create(pool(2), config);
    QueueSpec spec = QueueSpec.autoDeleted("publisher-only-batches");
    publisherOnly.bindQueue(spec);
    rows.makeIdle(spec.name(), Duration.ofHours(2));
    Thread.sleep(150);

    publisherOnly.publishBatch(spec, numbered(BATCH));

    assertThat(rows.queue(spec.name()).getLastActive())
        .isCloseTo(rows.serverUtcNow(), within(5, ChronoUnit.SECONDS));
    assertThat(rows.itemsOf(spec.name())).isEqualTo(BATCH);
  }

  @Test
  void concurrentCopiesAndInsertsToOneQueueKeepEveryMessage() throws Exception {
    QueueSpec spec = bound("many-publishers");
    MsgQueueRepository pooled = MsgQueueRepository.create(pool(8), MsgQueueConfig.defaults());
    int publishers = 8;
    int rounds = 10;
    ExecutorService pool = Executors.newFixedThreadPool(publishers);
    try {
      List<Future<List<Long>>> futures = new ArrayList<>();
      for (int p = 0; p < publishers; p++) {
        int size = p % 2 == 0 ? BATCH : 7;
        futures.add(pool.submit(() -> {
          List<Long> ids = new ArrayList<>();
          for (int r = 0; r < rounds; r++) {
            ids.addAll(pooled.publishBatch(spec, numbered(size)));
          }
          return ids;
        }));
      }
      List<Long> all = new ArrayList<>();
      for (Future<List<Long>> future : futures) {
        all.addAll(future.get(60, TimeUnit.SECONDS));
      }
      int expected = publishers / 2 * rounds * (BATCH + 7);
      assertThat(all).hasSize(expected).doesNotHaveDuplicates();
      assertThat(rows.itemsOf(spec.name())).isEqualTo(expected);
      Collections.sort(all);
      assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.in(all))).isEqualTo(expected);
    } finally {
      pool.shutdownNow();
    }
  }
}
