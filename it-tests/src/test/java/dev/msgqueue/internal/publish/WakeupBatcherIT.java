package dev.msgqueue.internal.publish;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.internal.sql.NotifyStatements;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.TestDatabase;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.jooq.DSLContext;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

// In the batcher's package: it is package-private.
/**
 * {@link WakeupBatcher} step by step: while one notification is held in flight (its statement blocked in a listener),
 * the wake-ups of other queues wait and then go out together in one statement, each delivered once.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class WakeupBatcherIT {
  private final TestDatabase db;
  private final HikariDataSource pool;
  private final List<List<String>> notifyStatements = new CopyOnWriteArrayList<>();
  private final CountDownLatch firstInFlight = new CountDownLatch(1);
  private final CountDownLatch releaseFirst = new CountDownLatch(1);
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

  /** Records each notification statement's queues and holds the first one until {@link #releaseFirst}. */
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
    if (notifyStatements.size() == 1) {
      firstInFlight.countDown();
      try {
        assertThat(releaseFirst.await(30, TimeUnit.SECONDS)).isTrue();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private static void awaitWaiting(Thread thread) throws InterruptedException {
    // WAITING: parked on its batch (a blocked synchronized or a pool wait would be BLOCKED or TIMED_WAITING).
    while (thread.getState() != Thread.State.WAITING) {
      assertThat(thread.isAlive()).as("%s ended instead of waiting for its batch", thread.getName()).isTrue();
      Thread.sleep(5);
    }
  }

  @Test
  void wakeUpsArrivingDuringOneInFlightGoOutTogetherInTheNextStatement() throws Exception {
    DSLContext ctx = DSL.using(pool, SQLDialect.POSTGRES);
    ctx.configuration().set(ExecuteListener.onExecuteStart(this::holdTheFirstNotification));
    WakeupBatcher batcher = new WakeupBatcher();
    List<Throwable> failures = new CopyOnWriteArrayList<>();
    List<Thread> senders = new ArrayList<>();
    for (String queue : List.of("batch-0", "batch-1", "batch-2", "batch-3")) {
      Thread sender = new Thread(() -> {
        try {
          batcher.send(ctx, queue);
        } catch (Throwable e) {
          failures.add(e);
        }
      }, "sender-" + queue);
      senders.add(sender);
    }

    senders.get(0).start();
    assertThat(firstInFlight.await(30, TimeUnit.SECONDS)).isTrue();
    for (Thread sender : senders.subList(1, senders.size())) {
      sender.start();
      awaitWaiting(sender);
    }
    releaseFirst.countDown();
    for (Thread sender : senders) {
      sender.join(TimeUnit.SECONDS.toMillis(30));
      assertThat(sender.isAlive()).isFalse();
    }

    assertThat(failures).isEmpty();
    assertThat(notifyStatements).containsExactly(List.of("batch-0"), List.of("batch-1", "batch-2", "batch-3"));
    assertThat(receive(4)).containsExactly("batch-0", "batch-1", "batch-2", "batch-3");
  }

  @Test
  void aLoneWakeUpGoesOutAtOnceAndTheNextFindsNothingInFlight() throws Exception {
    DSLContext ctx = DSL.using(pool, SQLDialect.POSTGRES);
    ctx.configuration().set(ExecuteListener.onExecuteStart(this::holdTheFirstNotification));
    releaseFirst.countDown();
    WakeupBatcher batcher = new WakeupBatcher();

    batcher.send(ctx, "alone-1");
    batcher.send(ctx, "alone-2");

    assertThat(notifyStatements).containsExactly(List.of("alone-1"), List.of("alone-2"));
    assertThat(receive(2)).containsExactly("alone-1", "alone-2");
  }

  /** The next {@code count} notifications' payloads, in delivery (commit) order. */
  private List<String> receive(int count) throws Exception {
    List<String> received = new ArrayList<>();
    long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
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
