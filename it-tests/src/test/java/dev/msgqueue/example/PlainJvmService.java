package dev.msgqueue.example;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.Housekeeper;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.Subscriber;
import dev.msgqueue.WakeupListener;
import java.sql.Connection;
import java.sql.DriverManager;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import liquibase.Scope;
import liquibase.UpdateSummaryOutputEnum;
import liquibase.command.CommandScope;
import liquibase.command.core.UpdateCommandStep;
import liquibase.command.core.helpers.DbUrlConnectionArgumentsCommandStep;
import liquibase.command.core.helpers.ShowSummaryArgument;
import liquibase.database.Database;
import liquibase.database.DatabaseFactory;
import liquibase.database.jvm.JdbcConnection;
import liquibase.resource.ClassLoaderResourceAccessor;
import liquibase.ui.LoggerUIService;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.bridge.SLF4JBridgeHandler;

/**
 * msgqueue without Spring: applies the schema, starts a subscriber, publishes three orders, waits until they are
 * handled and shuts down. Run it with a JDBC URL: {@code java -cp ... PlainJvmService jdbc:postgresql://HOST/DB?user=U}.
 */
public final class PlainJvmService {
  private static final Logger log = LoggerFactory.getLogger(PlainJvmService.class);

  public static void main(String[] args) throws Exception {
    String jdbcUrl = args[0];
    // Liquibase logs through java.util.logging: hand that to SLF4J, so one logging configuration covers every line.
    SLF4JBridgeHandler.removeHandlersForRootLogger();
    SLF4JBridgeHandler.install();

    // A pool: msgqueue takes a connection for each operation and returns it at once; a subscriber holds one per
    // running handler (its transaction), so the pool needs its concurrency + 2 (the default 8: 10).
    HikariConfig poolConfig = new HikariConfig();
    poolConfig.setJdbcUrl(jdbcUrl);
    poolConfig.setMaximumPoolSize(10);
    try (HikariDataSource pool = new HikariDataSource(poolConfig)) {
      applySchema(pool);

      // One repository per service, shared by every thread.
      MsgQueueRepository queues = MsgQueueRepository.create(pool, MsgQueueConfig.defaults());
      QueueSpec orders = QueueSpec.durable("orders");
      CountDownLatch handled = new CountDownLatch(3);

      // Closed in reverse order: the subscriber finishes its handlers, then the housekeeper and the listener stop.
      try (WakeupListener wakeups = WakeupListener.start(() -> DriverManager.getConnection(jdbcUrl));
           Housekeeper housekeeper = Housekeeper.builder(queues).build().start();
           Subscriber subscriber = Subscriber.builder(queues, orders, message -> {
                 log.info("shipping {}", message.payload());
                 handled.countDown();
               })
               .wakeups(wakeups)
               .start()) {
        for (int order = 1; order <= 3; order++) {
          queues.publish(orders, "{\"orderId\": " + order + "}");
        }
        if (!handled.await(30, TimeUnit.SECONDS)) {
          throw new IllegalStateException("the orders were not handled within 30 s");
        }
      }
    }
  }

  /**
   * Applies msgqueue's changelog from the msgqueue-migrations jar; a no-op once applied. Liquibase's console messages
   * and its update summary go to its log, once, instead of to the console as well.
   */
  private static void applySchema(HikariDataSource pool) throws Exception {
    try (Connection connection = pool.getConnection()) {
      Database database = DatabaseFactory.getInstance()
          .findCorrectDatabaseImplementation(new JdbcConnection(connection));
      Scope.child(Map.of(Scope.Attr.resourceAccessor.name(), new ClassLoaderResourceAccessor(),
              Scope.Attr.ui.name(), new LoggerUIService()),
          () -> new CommandScope(UpdateCommandStep.COMMAND_NAME)
              .addArgumentValue(DbUrlConnectionArgumentsCommandStep.DATABASE_ARG, database)
              .addArgumentValue(UpdateCommandStep.CHANGELOG_FILE_ARG, "db/changelog/msgqueue/db.changelog-master.xml")
              .addArgumentValue(ShowSummaryArgument.SHOW_SUMMARY_OUTPUT, UpdateSummaryOutputEnum.LOG)
              .execute());
    }
  }
}
