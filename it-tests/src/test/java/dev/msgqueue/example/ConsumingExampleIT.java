package dev.msgqueue.example;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.MsgQueueRepository;
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
    // The example's own table: DDL, which jOOQ's typed API does not cover for an ad-hoc table.
    db.dsl().execute("CREATE TABLE shipment (order_id bigint NOT NULL)");
    try (HikariDataSource pool = db.pool(10)) {
      // --- example start ---
      // Once per process: the repository (on your pool) and one LISTEN connection (its own, not from the pool).
      MsgQueueRepository queues = MsgQueueRepository.create(pool, MsgQueueConfig.defaults());
      WakeupListener wakeups = WakeupListener.start(db::connect); // e.g. () -> DriverManager.getConnection(url, props)

      QueueSpec orders = QueueSpec.durable("orders");
      Subscriber subscriber = Subscriber.builder(queues, orders, (message, transaction) -> {
            // Runs inside the transaction that holds the message. Return: what you wrote through `transaction`
            // commits as the message leaves its queue. Throw: your writes roll back, the message is retried later.
            transaction.insertInto(table(name("shipment")), field(name("order_id"), Long.class))
                .values(Long.valueOf(message.payload().replaceAll("\\D", ""))).execute();
            handled.add(message.payload());
          })
          .concurrency(8)     // the default; batchSize 100 is too. The pool needs concurrency + 2 connections.
          .wakeups(wakeups)
          .start();           // binds the queue, keeps it alive while running

      // Publish inside your own transaction: the message (and its wake-up) is sent only if the transaction commits.
      DSLContext dsl = DSL.using(pool, SQLDialect.POSTGRES);
      dsl.transaction(tx -> {
        // ... your own writes on tx.dsl() ...
        queues.inTransaction(tx.dsl()).publish(orders, "{\"orderId\": 42}");
      });

      // On shutdown: stop taking messages, let the running handlers finish and commit (bounded), then stop listening.
      // --- example end ---
      assertThat(handled.poll(30, TimeUnit.SECONDS)).isEqualTo("{\"orderId\": 42}");
      assertThat(subscriber.close(Duration.ofSeconds(30))).isTrue();
      wakeups.close();
      assertThat(db.dsl().fetchCount(table(name("shipment")))).as("the handler's write committed").isOne();
      assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM)).as("with the message's removal").isZero();
    }
  }
}
