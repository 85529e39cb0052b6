package dev.msgqueue.example;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.ConsumeMode;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.Subscriber;
import dev.msgqueue.WakeupListener;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The publish/subscribe example of docs/consuming.md, in a package of its own so that it can only use the public API.
 * Keep the two in step.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class ConsumingExampleIT {
  @Test
  void publishAndSubscribe(TestDatabase db) throws Exception {
    BlockingQueue<String> handled = new LinkedBlockingQueue<>();
    try (HikariDataSource pool = db.pool(4)) {
      // --- example start ---
      // Once per process: the repository (on your pool) and one LISTEN connection (its own, not from the pool).
      MsgQueueRepository queues = MsgQueueRepository.create(pool, MsgQueueConfig.defaults());
      WakeupListener wakeups = WakeupListener.start(db::connect); // e.g. () -> DriverManager.getConnection(url, props)

      QueueSpec orders = QueueSpec.durable("orders");
      Subscriber subscriber = Subscriber.builder(queues, orders, message -> {
            // Return normally: acked (deleted). Throw: redelivered once the lease runs out.
            handled.add(message.payload());
          })
          .mode(ConsumeMode.LEASE).lease(Duration.ofSeconds(30)) // at-least-once; leave out for at-most-once
          .concurrency(8)
          .batchSize(16)
          .wakeups(wakeups)
          .start(); // binds the queue, keeps it alive while running

      // Publish inside your own transaction: the message (and its wake-up) is sent only if the transaction commits.
      DSLContext dsl = DSL.using(pool, SQLDialect.POSTGRES);
      dsl.transaction(tx -> {
        // ... your own writes on tx.dsl() ...
        queues.inTransaction(tx.dsl()).publish(orders, "{\"orderId\": 42}");
      });

      // On shutdown: stop claiming, finish and ack the in-flight handlers (bounded), then stop listening.
      // --- example end ---
      assertThat(handled.poll(30, TimeUnit.SECONDS)).isEqualTo("{\"orderId\": 42}");
      assertThat(subscriber.close(Duration.ofSeconds(30))).isTrue();
      wakeups.close();
    }
  }
}
