package dev.msgqueue.child;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.ConsumeMode;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.Subscriber;
import dev.msgqueue.WakeupListener;
import java.sql.DriverManager;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * A consumer service in its own JVM, for tests that kill it with SIGKILL: lease-mode subscribers of one queue whose
 * handler records every message it handles in a ledger table ({@code "consumerLedger"}: id, consumer), committed
 * before the handler returns, hence before the subscriber acks. Its connections carry the consumer's name as
 * application_name.
 *
 * <p>Arguments: JDBC URL, queue name, consumer name, lease in milliseconds, handler time in milliseconds, ack delay in
 * milliseconds.
 */
public final class ConsumerProcess {
  public static final String LEDGER = "consumerLedger";

  private ConsumerProcess() { }

  public static void main(String[] args) throws Exception {
    String url = args[0];
    String queue = args[1];
    String consumer = args[2];
    Duration lease = Duration.ofMillis(Long.parseLong(args[3]));
    long handlerMillis = Long.parseLong(args[4]);
    Duration ackDelay = Duration.ofMillis(Long.parseLong(args[5]));

    HikariConfig poolConfig = new HikariConfig();
    poolConfig.setJdbcUrl(url);
    poolConfig.addDataSourceProperty("ApplicationName", consumer);
    poolConfig.setMaximumPoolSize(4); // a test server is shared: few connections per child
    poolConfig.setConnectionTimeout(120_000);
    poolConfig.setPoolName(consumer);
    HikariDataSource pool = new HikariDataSource(poolConfig);
    DSLContext dsl = DSL.using(pool, SQLDialect.POSTGRES);
    MsgQueueRepository repository = MsgQueueRepository.create(pool, MsgQueueConfig.defaults());
    WakeupListener listener = WakeupListener.start(() -> {
      java.util.Properties properties = new java.util.Properties();
      properties.setProperty("ApplicationName", consumer);
      return DriverManager.getConnection(url, properties);
    });
    Subscriber subscriber = Subscriber.builder(repository, QueueSpec.durable(queue), message -> {
          Thread.sleep(ThreadLocalRandom.current().nextLong(handlerMillis + 1));
          // Plain names: the ledger is the test's own table, not one of the generated ones.
          dsl.insertInto(table(name(LEDGER)), field(name("id")), field(name("consumer")))
              .values(message.id(), consumer)
              .execute();
        })
        .mode(ConsumeMode.LEASE).lease(lease)
        .concurrency(4)
        .batchSize(8)
        .ackDelay(ackDelay)
        .pollInterval(Duration.ofMillis(200))
        .wakeups(listener)
        .start();
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      subscriber.close();
      listener.close();
      pool.close();
      stopped.countDown();
    }));
    System.out.println("consuming " + queue + " as " + consumer);
    System.out.flush();
    stopped.await();
  }
}
