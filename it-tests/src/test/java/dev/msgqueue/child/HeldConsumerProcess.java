package dev.msgqueue.child;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.RetryPolicy;
import dev.msgqueue.Subscriber;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;

/**
 * A consumer service in its own JVM, in the held-transaction mode, for tests that kill it: its handler writes a
 * ledger row ({@code "heldLedger"}: id, consumer) in the transaction that holds the message, so the row commits
 * exactly when the message is removed. A message whose payload has {@code "poison": true} kills the process from
 * inside the handler ({@code Runtime.halt}, which skips every shutdown hook), as a crashing handler does. Its
 * connections carry the consumer's name as application_name.
 *
 * <p>Arguments: JDBC URL, queue name, consumer name, handler time in milliseconds, retry policy's deliveries.
 */
public final class HeldConsumerProcess {
  public static final String LEDGER = "heldLedger";
  public static final String DEAD_LETTERS = "held-dead-letters";
  /** The exit status of a process its poison message killed. */
  public static final int KILLED_BY_POISON = 77;

  private HeldConsumerProcess() { }

  public static void main(String[] args) throws Exception {
    String url = args[0];
    String queue = args[1];
    String consumer = args[2];
    long handlerMillis = Long.parseLong(args[3]);
    int maxDeliveries = Integer.parseInt(args[4]);

    HikariConfig poolConfig = new HikariConfig();
    poolConfig.setJdbcUrl(url);
    poolConfig.addDataSourceProperty("ApplicationName", consumer);
    poolConfig.setMaximumPoolSize(6); // a test server is shared: few connections per child
    poolConfig.setConnectionTimeout(120_000);
    poolConfig.setPoolName(consumer);
    HikariDataSource pool = new HikariDataSource(poolConfig);
    MsgQueueRepository repository = MsgQueueRepository.create(pool, MsgQueueConfig.defaults());
    Subscriber subscriber = Subscriber.builder(repository, QueueSpec.durable(queue), (message, transaction) -> {
          if (message.payload().contains("\"poison\": true")) {
            Runtime.getRuntime().halt(KILLED_BY_POISON);
          }
          Thread.sleep(ThreadLocalRandom.current().nextLong(handlerMillis + 1));
          // Plain names: the ledger is the test's own table, not one of the generated ones.
          transaction.insertInto(table(name(LEDGER)), field(name("id")), field(name("consumer")))
              .values(message.id(), consumer)
              .execute();
        })
        .concurrency(4)
        .batchSize(8)
        .retryPolicy(RetryPolicy.builder(DEAD_LETTERS).maxDeliveries(maxDeliveries)
            .initialBackoff(Duration.ofMillis(100)).build())
        .pollInterval(Duration.ofMillis(200))
        .start();
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      subscriber.close();
      pool.close();
      stopped.countDown();
    }));
    System.out.println("consuming " + queue + " as " + consumer + " in held transactions");
    System.out.flush();
    stopped.await();
  }
}
