package dev.msgqueue.internal.publish;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.internal.sql.NotifyStatements;
import dev.msgqueue.it.Await;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.TestDatabase;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.jooq.DSLContext;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.jooq.SQLDialect;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

// In the batcher's package: it is package-private.
/**
 * {@link WakeupBatcher} step by step: a wake-up returns at once and goes out on the batcher's thread; while one
 * notification statement is in flight (blocked in a listener), the wake-ups of other queues wait and then go out
 * together in one statement, each delivered once; a statement that fails hands its queues back, and the queue's next
 * publish notifies again within its window.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class WakeupBatcherIT {
  private static final long AWAIT_SECONDS = 30;

  private final TestDatabase db;
  private final HikariDataSource pool;
  private final List<List<String>> notifyStatements = new CopyOnWriteArrayList<>();
  private final List<Thread> notifyThreads = new CopyOnWriteArrayList<>();
  private final CountDownLatch firstInFlight = new CountDownLatch(1);
  private final CountDownLatch releaseFirst = new CountDownLatch(1);
  private final List<String> failed = new CopyOnWriteArrayList<>();
  private Connection listening;

  WakeupBatcherIT(TestDatabase db) {
    this.db = db;
    this.pool = db.pool(8);
  }

  @BeforeEach
  void listen() throws Exception {
    listening = db.connect();
    NotifyStatements.listen(listening);
  }

  @AfterEach
  void close() throws Exception {
    listening.close();
    pool.close();
  }

  /** Records each notification statement's queues and thread, and holds the first one until {@link #releaseFirst}. */
  private void holdTheFirstNotification(ExecuteContext ctx) {
    if (!ctx.sql().contains("pg_notify")) {
      return;
    }
    List<String> queues = new ArrayList<>();
    for (Object value : ctx.query().getBindValues()) {
      if (value instanceof String queue) {
        queues.add(queue);
      } else if (value instanceof String[] array) {
        queues.addAll(Arrays.asList(array));
      }
    }
    notifyStatements.add(queues);
    notifyThreads.add(Thread.currentThread());
    if (notifyStatements.size() == 1) {
      firstInFlight.countDown();
      try {
        assertThat(releaseFirst.await(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private DSLContext pooledContext(ExecuteListener listener) {
    DSLContext ctx = DSL.using(pool, SQLDialect.POSTGRES);
    ctx.configuration().set(listener);
    return ctx;
  }

  /** A pooled context that counts notification statements in {@code attempts} and runs {@code fail} at the first. */
  private DSLContext firstNotificationFails(AtomicInteger attempts, Runnable fail) {
    return pooledContext(ExecuteListener.onExecuteStart(execute -> {
      if (execute.sql().contains("pg_notify") && attempts.incrementAndGet() == 1) {
        fail.run();
      }
    }));
  }

  @Test
  void wakeUpsArrivingDuringOneInFlightReturnAtOnceAndGoOutTogetherInTheNextStatement() throws Exception {
    DSLContext ctx = pooledContext(ExecuteListener.onExecuteStart(this::holdTheFirstNotification));
    WakeupBatcher batcher = new WakeupBatcher(ctx, failed::add);

    batcher.send("batch-0");
    assertThat(firstInFlight.await(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
    // The first statement is held in flight: these return without waiting for it.
    batcher.send("batch-1");
    batcher.send("batch-2");
    batcher.send("batch-3");
    batcher.send("batch-1");
    assertThat(notifyStatements).hasSize(1);
    releaseFirst.countDown();

    assertThat(receive(4)).containsExactly("batch-0", "batch-1", "batch-2", "batch-3");
    await("the batcher idle", () -> !batcher.isSending());
    assertThat(notifyStatements).containsExactly(List.of("batch-0"), List.of("batch-1", "batch-2", "batch-3"));
    assertThat(notifyThreads).doesNotContain(Thread.currentThread());
    assertThat(failed).isEmpty();
  }

  @Test
  void aLoneWakeUpGoesOutAtOnceAndTheNextFindsNothingInFlight() throws Exception {
    DSLContext ctx = pooledContext(ExecuteListener.onExecuteStart(this::holdTheFirstNotification));
    releaseFirst.countDown();
    WakeupBatcher batcher = new WakeupBatcher(ctx, failed::add);

    batcher.send("alone-1");
    assertThat(receive(1)).containsExactly("alone-1");
    await("the batcher idle", () -> !batcher.isSending());
    batcher.send("alone-2");
    assertThat(receive(1)).containsExactly("alone-2");

    assertThat(notifyStatements).containsExactly(List.of("alone-1"), List.of("alone-2"));
  }

  @Test
  void aStatementThatFailsHandsEachOfItsQueuesToFailed() throws Exception {
    DSLContext ctx = pooledContext(ExecuteListener.onExecuteStart(execute -> {
      holdTheFirstNotification(execute);
      if (execute.sql().contains("pg_notify") && notifyStatements.size() == 2) {
        throw new DataAccessException("the notification's connection is gone");
      }
    }));
    WakeupBatcher batcher = new WakeupBatcher(ctx, failed::add);

    batcher.send("held");
    assertThat(firstInFlight.await(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
    batcher.send("lost-1");
    batcher.send("lost-2");
    releaseFirst.countDown();
    await("the batcher idle", () -> !batcher.isSending());
    batcher.send("after");

    assertThat(receive(2)).containsExactly("held", "after");
    assertThat(failed).containsExactly("lost-1", "lost-2");
  }

  @Test
  void anErrorThatStopsTheSenderLeavesTheNextWakeUpToANewOne() throws Exception {
    AtomicInteger notifyAttempts = new AtomicInteger();
    DSLContext ctx = firstNotificationFails(notifyAttempts, () -> {
      throw new Error("not a statement's failure");
    });
    WakeupBatcher batcher = new WakeupBatcher(ctx, failed::add);

    batcher.send("lost-to-an-error");
    await("the sender stopped", () -> notifyAttempts.get() == 1 && !batcher.isSending());
    batcher.send("after-the-error");

    assertThat(receive(1)).containsExactly("after-the-error");
    assertThat(notifyAttempts).hasValue(2);
  }

  @Test
  void aWakeUpThatFailsLeavesTheQueuesNextPublishFreeToNotifyWithinTheWindow() throws Exception {
    AtomicInteger notifyAttempts = new AtomicInteger();
    DSLContext ctx = firstNotificationFails(notifyAttempts, () -> {
      throw new DataAccessException("the first notification's connection is gone");
    });
    // A window of an hour: only a failure that frees the window lets a later publish notify.
    Wakeups wakeups = Wakeups.from(MsgQueueConfig.builder().wakeupWindow(Duration.ofHours(1)).build(), ctx);

    wakeups.published(ctx, "failed-once", true);
    await("the first notification tried", () -> notifyAttempts.get() == 1);
    // The failure frees the window on the batcher's thread, shortly after the attempt: publish until it has.
    await("a later publish notifying", () -> {
      wakeups.published(ctx, "failed-once", true);
      return notifyAttempts.get() >= 2;
    });

    assertThat(receive(1)).containsExactly("failed-once");
  }

  @Test
  void onOneConnectionTheWakeUpIsSentOnTheCallersThreadBeforeSendReturns() throws Exception {
    try (Connection connection = db.connect()) {
      DSLContext ctx = DSL.using(connection, SQLDialect.POSTGRES);
      ctx.configuration().set(ExecuteListener.onExecuteStart(this::holdTheFirstNotification));
      releaseFirst.countDown();
      WakeupBatcher batcher = new WakeupBatcher(ctx, failed::add);

      batcher.send("one-connection");

      assertThat(notifyStatements).containsExactly(List.of("one-connection"));
      assertThat(notifyThreads).containsExactly(Thread.currentThread());
      assertThat(batcher.isSending()).isFalse();
    }
    assertThat(receive(1)).containsExactly("one-connection");
  }

  private static void await(String what, BooleanSupplier condition) {
    Await.until(what, Duration.ofSeconds(AWAIT_SECONDS), condition);
  }

  /** The next {@code count} notifications' payloads, in delivery (commit) order. */
  private List<String> receive(int count) throws Exception {
    List<String> received = new ArrayList<>();
    long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(AWAIT_SECONDS);
    while (received.size() < count) {
      assertThat(System.nanoTime() - giveUp).as("timed out waiting for notifications").isNegative();
      PGNotification[] notifications = listening.unwrap(PGConnection.class).getNotifications(200);
      if (notifications != null) {
        for (PGNotification notification : notifications) {
          received.add(notification.getParameter());
        }
      }
    }
    return received;
  }
}
