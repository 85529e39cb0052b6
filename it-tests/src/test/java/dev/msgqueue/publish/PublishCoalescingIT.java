package dev.msgqueue.publish;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueConnectionException;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueNotFoundException;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.jooq.JSONB;
import org.jooq.SQLDialect;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Group commit of concurrent autocommit publishes: each caller gets its own id or its own exception, the statements
 * are far fewer than the publishes, and heals, missing queues, one caller's bad message and a lost connection are
 * each handled as for a single publish.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class PublishCoalescingIT {
  private static final int THREADS = 32;

  private final TestDatabase db;
  private final QueueRows rows;
  /** Every item insert's number of messages, in execution order. */
  private final List<Integer> insertSizes = new CopyOnWriteArrayList<>();
  private final ExecutorService pool = Executors.newFixedThreadPool(THREADS);

  PublishCoalescingIT(TestDatabase db) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
  }

  @AfterEach
  void stop() throws InterruptedException {
    pool.shutdownNow();
    assertThat(pool.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }

  private MsgQueueRepository repository(boolean coalescing, ExecuteListener... more) {
    DSLContext ctx = DSL.using(db.dataSource(), SQLDialect.POSTGRES);
    ctx.configuration().set(ExecuteListener.onExecuteStart(this::recordInsert));
    for (ExecuteListener listener : more) {
      ctx = ctx.configuration().deriveAppending(listener).dsl();
    }
    return MsgQueueRepository.create(ctx, MsgQueueConfig.builder().publishCoalescing(coalescing).build());
  }

  private void recordInsert(ExecuteContext ctx) {
    if (isItemInsert(ctx)) {
      insertSizes.add(messagesIn(ctx));
    }
  }

  private static boolean isItemInsert(ExecuteContext ctx) {
    String sql = ctx.sql().toLowerCase(Locale.ROOT);
    return sql.contains("insert into") && sql.contains("\"messagequeueitem\"");
  }

  private static int messagesIn(ExecuteContext ctx) {
    return payloadsOf(ctx).size();
  }

  /**
   * The payloads an insert carries, whether bound one by one, as one array, or as one JSON array of them (the
   * statement then reads it with {@code jsonb_array_elements}).
   */
  private static List<JSONB> payloadsOf(ExecuteContext ctx) {
    boolean jsonArray = ctx.sql().contains("jsonb_array_elements");
    List<JSONB> payloads = new ArrayList<>();
    for (Object value : ctx.query().getBindValues()) {
      if (value instanceof JSONB json) {
        payloads.addAll(jsonArray ? elements(json.data()) : List.of(json));
      } else if (value instanceof JSONB[] array) {
        payloads.addAll(List.of(array));
      }
    }
    return payloads;
  }

  /** The elements of a JSON array, each as its own text. */
  private static List<JSONB> elements(String array) {
    List<JSONB> elements = new ArrayList<>();
    try (JsonParser parser = new JsonFactory().createParser(array)) {
      parser.nextToken(); // the array's start
      while (parser.nextToken() != JsonToken.END_ARRAY) {
        int start = (int) parser.currentTokenLocation().getCharOffset();
        parser.skipChildren();
        int end = (int) parser.currentLocation().getCharOffset();
        elements.add(JSONB.valueOf(array.substring(start, end)));
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return elements;
  }

  /** Runs {@code perThread} publishes on each of {@link #THREADS} threads, started together. */
  private List<Future<List<Long>>> publishConcurrently(int perThread, PublishCall call) {
    CyclicBarrier start = new CyclicBarrier(THREADS);
    List<Future<List<Long>>> futures = new ArrayList<>();
    for (int t = 0; t < THREADS; t++) {
      int thread = t;
      futures.add(pool.submit(() -> {
        start.await();
        List<Long> ids = new ArrayList<>();
        for (int n = 0; n < perThread; n++) {
          ids.add(call.publish(thread, n));
        }
        return ids;
      }));
    }
    return futures;
  }

  @FunctionalInterface
  private interface PublishCall {
    long publish(int thread, int n) throws Exception;
  }

  @Test
  void everyCallerGetsItsOwnMessagesIdAndTheStatementsAreFarFewerThanThePublishes() throws Exception {
    MsgQueueRepository repository = repository(true);
    QueueSpec spec = QueueSpec.autoDeleted("coalesced");
    repository.bindQueue(spec);
    int perThread = 40;

    List<Future<List<Long>>> futures = publishConcurrently(perThread,
        (thread, n) -> repository.publish(spec, "{\"thread\": " + thread + ", \"n\": " + n + "}"));

    Set<Long> all = new HashSet<>();
    for (int thread = 0; thread < THREADS; thread++) {
      List<Long> ids = futures.get(thread).get(60, TimeUnit.SECONDS);
      for (int n = 0; n < perThread; n++) {
        long id = ids.get(n);
        assertThat(all.add(id)).as("distinct id %d", id).isTrue();
        assertThat(rows.item(id).getPayload().data())
            .isEqualTo("{\"n\": " + n + ", \"thread\": " + thread + "}");
      }
    }
    int publishes = THREADS * perThread;
    System.out.printf("coalescing: %d publishes from %d threads in %d insert statements%n",
        publishes, THREADS, insertSizes.size());
    assertThat(insertSizes.stream().mapToInt(Integer::intValue).sum()).isEqualTo(publishes);
    assertThat(insertSizes.size()).as("statements for %d publishes", publishes).isLessThan(publishes / 4);
    assertThat(rows.itemsOf("coalesced")).isEqualTo(publishes);
  }

  @Test
  void withCoalescingOffEachPublishIsItsOwnStatement() throws Exception {
    MsgQueueRepository repository = repository(false);
    QueueSpec spec = QueueSpec.autoDeleted("uncoalesced");
    repository.bindQueue(spec);

    for (Future<List<Long>> future : publishConcurrently(5, (thread, n) -> repository.publish(spec, "{}"))) {
      future.get(60, TimeUnit.SECONDS);
    }

    assertThat(insertSizes).hasSize(THREADS * 5).containsOnly(1);
  }

  @Test
  void aMissingDurableQueueFailsOnlyTheCallersThatNamedIt() throws Exception {
    MsgQueueRepository repository = repository(true);
    QueueSpec existing = QueueSpec.durable("present");
    QueueSpec missing = QueueSpec.durable("absent");
    repository.bindQueue(existing);

    List<Future<List<Long>>> futures = publishConcurrently(10,
        (thread, n) -> repository.publish(thread == 7 ? missing : existing, "{\"n\": " + n + "}"));

    for (int thread = 0; thread < THREADS; thread++) {
      if (thread == 7) {
        assertThatCause(futures.get(thread)).isInstanceOf(QueueNotFoundException.class);
      } else {
        assertThat(futures.get(thread).get(60, TimeUnit.SECONDS)).hasSize(10);
      }
    }
    assertThat(rows.itemsOf("present")).isEqualTo((THREADS - 1) * 10);
    assertThat(rows.exists("absent")).isFalse();
  }

  @Test
  void oneCallersFailingMessageFailsOnlyThatCaller() throws Exception {
    // Stands in for a message the server rejects: any insert carrying it fails, as a batch or alone.
    ExecuteListener rejectPoison = ExecuteListener.onExecuteStart(ctx -> {
      if (isItemInsert(ctx) && payloadsOf(ctx).stream().anyMatch(json -> json.data().contains("poison"))) {
        throw new DataAccessException("rejected by the test: poison");
      }
    });
    MsgQueueRepository repository = repository(true, rejectPoison);
    QueueSpec spec = QueueSpec.autoDeleted("one-bad-message");
    repository.bindQueue(spec);

    List<Future<List<Long>>> futures = publishConcurrently(10,
        (thread, n) -> repository.publish(spec, thread == 3 && n == 5 ? "{\"poison\": 1}" : "{\"ok\": 1}"));

    for (int thread = 0; thread < THREADS; thread++) {
      if (thread == 3) {
        assertThatCause(futures.get(thread)).isInstanceOf(DataAccessException.class).hasMessageContaining("poison");
      } else {
        assertThat(futures.get(thread).get(60, TimeUnit.SECONDS)).hasSize(10);
      }
    }
    assertThat(rows.itemsOf("one-bad-message")).isEqualTo((THREADS - 1) * 10 + 5);
  }

  @Test
  void aHealDuringACoalescedBatchStoresEveryMessageWithNoOrphan() throws Exception {
    QueueSpec spec = QueueSpec.autoDeleted("healed-coalesced");
    MsgQueueRepository reaper = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
    AtomicInteger itemInserts = new AtomicInteger();
    // The first flush is held back so the others queue up; just before the second (a batch) the queue is reaped.
    ExecuteListener reapBeforeTheBatch = ExecuteListener.onExecuteStart(ctx -> {
      if (!isItemInsert(ctx)) {
        return;
      }
      int insert = itemInserts.incrementAndGet();
      if (insert == 1) {
        sleep(300);
      } else if (insert == 2) {
        rows.expireItems("healed-coalesced");
        rows.makeIdle("healed-coalesced", Duration.ofHours(2));
        assertThat(reaper.reapIdleQueues()).contains("healed-coalesced");
      }
    });
    MsgQueueRepository repository = repository(true, reapBeforeTheBatch);
    repository.bindQueue(spec);

    List<Future<List<Long>>> futures = publishConcurrently(1, (thread, n) -> repository.publish(spec, "{}"));

    // Every publish has returned before any row is read: the reap that may delete the expired first message runs
    // while the later ones are still being published.
    List<Long> ids = new ArrayList<>();
    for (Future<List<Long>> future : futures) {
      ids.add(future.get(60, TimeUnit.SECONDS).get(0));
    }
    int stored = 0;
    for (long id : ids) {
      MessageQueueItemRecord item = rows.item(id);
      // The first message was expired on purpose (the reaper may delete it); every other one is in the healed queue.
      if (item != null && "healed-coalesced".equals(item.getQueueId())) {
        stored++;
      }
    }
    // The expired first message may or may not be gone, depending on whether it committed before the reap.
    assertThat(stored).isBetween(THREADS - 1, THREADS);
    assertThat(rows.exists("healed-coalesced")).isTrue();
    assertThat(rows.itemsOf("healed-coalesced")).as("every message but perhaps the expired first").isEqualTo(stored);
    assertThat(rows.unexpiredOrphans()).isZero();
    // insert 2 failed with 23503 (queue reaped), insert 3 is the heal of the same batch
    assertThat(insertSizes.get(1)).isGreaterThan(1);
    assertThat(insertSizes.get(2)).isEqualTo(insertSizes.get(1));
  }

  @Test
  void aConnectionKilledMidBatchGivesEachOfItsCallersAConnectionException() throws Exception {
    AtomicBoolean firstDelayed = new AtomicBoolean();
    AtomicBoolean killed = new AtomicBoolean();
    AtomicInteger killedBatchSize = new AtomicInteger();
    ExecuteListener killSecondBatch = ExecuteListener.onExecuteStart(ctx -> {
      if (!isItemInsert(ctx)) {
        return;
      }
      if (firstDelayed.compareAndSet(false, true)) {
        sleep(300); // lets the other publishers queue up behind this flush
      } else if (messagesIn(ctx) > 1 && killed.compareAndSet(false, true)) {
        killedBatchSize.set(messagesIn(ctx));
        terminateBackendOf(ctx.connection());
      }
    });
    MsgQueueRepository repository = repository(true, killSecondBatch);
    QueueSpec spec = QueueSpec.autoDeleted("killed-mid-batch");
    repository.bindQueue(spec);

    List<Future<List<Long>>> futures = publishConcurrently(1, (thread, n) -> repository.publish(spec, "{}"));

    int connectionFailures = 0;
    int published = 0;
    for (Future<List<Long>> future : futures) {
      try {
        published += future.get(60, TimeUnit.SECONDS).size();
      } catch (ExecutionException e) {
        assertThat(e.getCause()).isInstanceOf(MsgQueueConnectionException.class);
        connectionFailures++;
      }
    }
    assertThat(killed).isTrue();
    assertThat(connectionFailures).isEqualTo(killedBatchSize.get()).isGreaterThan(1);
    assertThat(published).isEqualTo(THREADS - connectionFailures);
    assertThat(rows.itemsOf("killed-mid-batch")).isEqualTo(published);
  }

  private static org.assertj.core.api.AbstractThrowableAssert<?, ? extends Throwable> assertThatCause(
      Future<?> future) {
    try {
      future.get(60, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      return assertThat(e.getCause());
    } catch (Exception e) {
      throw new AssertionError(e);
    }
    throw new AssertionError("expected the publish to fail");
  }

  private void terminateBackendOf(Connection victim) {
    try (Statement pid = victim.createStatement(); ResultSet rs = pid.executeQuery("select pg_backend_pid()")) {
      rs.next();
      int backend = rs.getInt(1);
      try (Connection admin = db.connect(); Statement kill = admin.createStatement()) {
        kill.execute("select pg_terminate_backend(" + backend + ", 5000)");
      }
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
