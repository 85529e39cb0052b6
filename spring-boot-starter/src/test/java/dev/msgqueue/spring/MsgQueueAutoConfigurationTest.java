package dev.msgqueue.spring;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.ConsumeMode;
import dev.msgqueue.Subscriber;
import dev.msgqueue.Housekeeper;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.MicrometerMetrics;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.QueueNotFoundException;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.WakeupListener;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.PostgresServer;
import dev.msgqueue.it.TestDatabase;
import dev.msgqueue.jooq.enums.MessageQueueItemStatus;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.actuate.autoconfigure.metrics.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.actuate.autoconfigure.metrics.MetricsAutoConfiguration;
import org.springframework.boot.actuate.autoconfigure.metrics.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.boot.actuate.health.HealthIndicator;
import org.springframework.boot.actuate.health.Status;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration;
import org.springframework.boot.autoconfigure.jdbc.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.autoconfigure.jooq.JooqAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/** The starter against a real PostgreSQL: what a service gets with only a DataSource and the jOOQ starter. */
@ExtendWith(MsgQueueDatabaseExtension.class)
class MsgQueueAutoConfigurationTest {
  private final TestDatabase db;
  private final ApplicationContextRunner runner;

  MsgQueueAutoConfigurationTest(TestDatabase db) {
    this.db = db;
    this.runner = new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(DataSourceAutoConfiguration.class,
            DataSourceTransactionManagerAutoConfiguration.class, JooqAutoConfiguration.class,
            MsgQueueAutoConfiguration.class))
        .withPropertyValues("spring.datasource.url=" + db.jdbcUrl());
  }

  @Test
  void startsWithOnlyADataSourceAndJooq() {
    runner.run(context -> {
      assertThat(context).hasNotFailed();
      assertThat(context).hasSingleBean(MsgQueueRepository.class);
      assertThat(context).hasSingleBean(WakeupListener.class);
      assertThat(context).hasBean("msgqueueHealthIndicator");
      assertThat(context).hasSingleBean(Housekeeper.class);
      assertThat(context.getBean(Housekeeper.class).isRunning()).isTrue();
      MsgQueueRepository repository = context.getBean(MsgQueueRepository.class);
      QueueSpec durable = QueueSpec.durable("starter-plain");
      // msgqueue's own typed errors, not the Spring translation of the application's jOOQ configuration.
      assertThatThrownBy(() -> repository.publish(durable, "{}")).isInstanceOf(QueueNotFoundException.class);
      repository.bindQueue(durable);
      assertThat(repository.publish(durable, "{}")).isPositive();
      // A reaped auto-deleted queue heals on publish.
      assertThat(repository.publish(QueueSpec.autoDeleted("starter-healed"), "{}")).isPositive();
    });
  }

  /**
   * A publish inside a Spring transaction joins it, but the heal's queue row is committed at once on a connection of
   * the pool's own: another publisher to that queue never waits for the caller's transaction.
   */
  @Test
  void aPublishInASpringTransactionJoinsItAndItsHealWaitsForNobody() {
    runner.run(context -> {
      MsgQueueRepository repository = context.getBean(MsgQueueRepository.class);
      TransactionTemplate transaction = new TransactionTemplate(context.getBean(PlatformTransactionManager.class));
      QueueSpec healed = QueueSpec.autoDeleted("starter-healed-in-transaction");
      AtomicLong inTransaction = new AtomicLong();

      transaction.executeWithoutResult(status -> {
        inTransaction.set(repository.publish(healed, "{\"n\": 1}"));
        // Still inside the caller's transaction: the queue row is committed, its message is not.
        assertThat(db.dsl().fetchExists(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.eq(healed.name()))).isTrue();
        assertThat(db.dsl().fetchExists(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.eq(inTransaction.get()))).isFalse();
        DSLContext otherPublisher = DSL.using(db.dataSourceWithOptions("-c lock_timeout=500"), SQLDialect.POSTGRES);
        long other = MsgQueueRepository.create(otherPublisher, MsgQueueConfig.defaults()).publish(healed, "{}");
        assertThat(db.dsl().fetchExists(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.eq(other))).isTrue();
        status.setRollbackOnly();
      });

      assertThat(db.dsl().fetchExists(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.eq(inTransaction.get())))
          .as("rolled back with the caller's transaction").isFalse();
    });
  }

  /** Boot's own metrics auto-configuration creates the registry after ours ran: the binder still binds to it. */
  @Test
  void withBootsMeterRegistryTheMetersCountWhatTheApplicationDid() {
    runner.withConfiguration(AutoConfigurations.of(MetricsAutoConfiguration.class,
        SimpleMetricsExportAutoConfiguration.class, CompositeMeterRegistryAutoConfiguration.class)).run(context -> {
      assertThat(context).hasSingleBean(MeterRegistry.class);
      assertThat(context).hasSingleBean(MsgQueueMeterBinder.class);
      MsgQueueRepository repository = context.getBean(MsgQueueRepository.class);
      QueueSpec queue = QueueSpec.durable("starter-metered");
      repository.bindQueue(queue);
      repository.publish(queue, "{}");
      repository.publishBatch(queue, List.of("{}", "{}"));
      MeterRegistry registry = context.getBean(MeterRegistry.class);
      assertThat(registry.get("msgqueue.messages.published").tag("queue", queue.name()).counter().count())
          .isEqualTo(3.0);
    });
  }

  /** With the queue gauges off, a housekeeping tick leaves no queue gauge; the counters stay. */
  @Test
  void queueGaugesAreAPropertyOfTheReplica() {
    var metrics = AutoConfigurations.of(MetricsAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
        CompositeMeterRegistryAutoConfiguration.class);
    for (boolean gauges : new boolean[] {false, true}) {
      runner.withConfiguration(metrics)
          .withPropertyValues("msgqueue.housekeeper.enabled=true", "msgqueue.metrics.queue-gauges=" + gauges)
          .run(context -> {
            MsgQueueRepository repository = context.getBean(MsgQueueRepository.class);
            QueueSpec queue = QueueSpec.durable("starter-gauges-" + gauges);
            repository.bindQueue(queue);
            repository.publish(queue, "{}");
            context.getBean(Housekeeper.class).runOnce();
            MeterRegistry registry = context.getBean(MeterRegistry.class);
            assertThat(registry.get("msgqueue.messages.published").tag("queue", queue.name()).counter().count())
                .isEqualTo(1.0);
            assertThat(registry.find("msgqueue.queue.messages").tag("queue", queue.name()).gauges())
                .as("queue gauges with msgqueue.metrics.queue-gauges=%s", gauges).hasSize(gauges ? 4 : 0);
          });
    }
  }

  @Test
  void anApplicationThatBindsTheMetersItselfKeepsItsBinding() {
    runner.withUserConfiguration(OwnMetrics.class).run(context -> {
      assertThat(context).doesNotHaveBean(MsgQueueMeterBinder.class);
      MsgQueueRepository repository = context.getBean(MsgQueueRepository.class);
      repository.publish(QueueSpec.autoDeleted("starter-own-metrics"), "{}");
      assertThat(context.getBean(OwnMetrics.class).registry.get("msgqueue.messages.published").counter().count())
          .isEqualTo(1.0);
    });
  }

  @Test
  void propertiesBindToTheRepositoryConfiguration() {
    runner.withPropertyValues("msgqueue.keep-alive-interval=2m", "msgqueue.reap-idle-threshold=2h",
        "msgqueue.wakeup-notifications=false", "msgqueue.listener.enabled=false",
        "msgqueue.housekeeper.interval=90s").run(context -> {
          MsgQueueConfig config = context.getBean(MsgQueueRepository.class).config();
          assertThat(config.keepAliveInterval()).isEqualTo(Duration.ofMinutes(2));
          assertThat(config.reapIdleThreshold()).isEqualTo(Duration.ofHours(2));
          assertThat(config.wakeupNotifications()).isFalse();
          assertThat(context).doesNotHaveBean(WakeupListener.class);
          assertThat(context.getBean(Housekeeper.class).interval()).isEqualTo(Duration.ofSeconds(90));
        });
  }

  @Test
  void aBadValueFailsStartupNamingTheSetting() {
    runner.withPropertyValues("msgqueue.keep-alive-interval=-5s").run(context -> {
      assertThat(context).hasFailed();
      assertThat(context.getStartupFailure()).rootCause()
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("keepAliveInterval");
      assertThat(context.getStartupFailure()).hasStackTraceContaining("invalid msgqueue.* configuration");
    });
  }

  @Test
  void aBadHousekeeperIntervalFailsStartupNamingTheSetting() {
    runner.withPropertyValues("msgqueue.housekeeper.interval=10ms").run(context -> {
      assertThat(context).hasFailed();
      assertThat(context.getStartupFailure()).hasStackTraceContaining("invalid msgqueue.housekeeper.interval");
    });
  }

  @Test
  void theHousekeeperRunsAndItsLastRunIsInTheHealthDetails() throws Exception {
    runner.withPropertyValues("msgqueue.housekeeper.enabled=true").run(context -> {
      Housekeeper housekeeper = context.getBean(Housekeeper.class);
      housekeeper.runOnce();
      assertThat(health(context).health().getDetails())
          .hasEntrySatisfying("housekeeperLastRun", run -> assertThat(run.toString()).startsWith("COMPLETED at"));
    });
    runner.withPropertyValues("msgqueue.housekeeper.enabled=false")
        .run(context -> assertThat(context).doesNotHaveBean(Housekeeper.class));
  }

  @Test
  void aListenerBeanReceivesMessages() {
    runner.withUserConfiguration(Listeners.class).run(context -> {
      Listeners listeners = context.getBean(Listeners.class);
      MsgQueueRepository repository = context.getBean(MsgQueueRepository.class);
      long first = repository.publish(QueueSpec.durable("starter-orders"), "{\"order\": 1}");
      long second = repository.publish(QueueSpec.durable("starter-orders"), "{\"order\": 2}");
      repository.publish(QueueSpec.durable("starter-orders-payloads"), "{\"order\": 1}");
      repository.publish(QueueSpec.durable("starter-orders-payloads"), "{\"order\": 2}");

      assertThat(listeners.received.await(30, TimeUnit.SECONDS)).isTrue();
      assertThat(listeners.ids).containsExactlyInAnyOrder(first, second);
      assertThat(listeners.payloads).contains("{\"order\": 1}", "{\"order\": 2}");
    });
  }

  @Test
  void healthGoesDownWhileTheDatabaseRefusesConnectionsAndUpWhenItIsBack() throws Exception {
    runner.run(context -> {
      HealthIndicator health = health(context);
      awaitTrue(() -> health.health().getStatus().equals(Status.UP), "UP once listening");

      try (Connection admin = PostgresServer.get().adminConnection(); Statement statement = admin.createStatement()) {
        // Plain SQL: database-level DDL and a server function on backends, outside the schema jOOQ generated.
        statement.execute("ALTER DATABASE \"" + db.name() + "\" WITH ALLOW_CONNECTIONS false");
        try {
          statement.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
              + " WHERE application_name = 'msgqueue-wakeup-listener' AND datname = '" + db.name() + "'");
          awaitTrue(() -> health.health().getStatus().equals(Status.DOWN), "DOWN while it cannot reconnect");
          assertThat(health.health().getDetails())
              .containsEntry("listener", "reconnecting (subscribers poll meanwhile)")
              .hasEntrySatisfying("database", state -> assertThat(state.toString()).startsWith("unreachable: "));
        } finally {
          statement.execute("ALTER DATABASE \"" + db.name() + "\" WITH ALLOW_CONNECTIONS true");
        }
      }
      awaitTrue(() -> health.health().getStatus().equals(Status.UP), "UP after it reconnected");
    });
  }

  @Test
  void shutdownLeavesNoClaimedButUnackedMessageInLeaseMode() {
    QueueSpec queue = QueueSpec.durable("starter-slow");
    runner.withUserConfiguration(SlowListener.class)
        .withPropertyValues("msgqueue.subscriber.concurrency=4", "msgqueue.subscriber.mode=lease",
            "msgqueue.subscriber.lease=30s")
        .run(context -> {
          MsgQueueRepository repository = context.getBean(MsgQueueRepository.class);
          for (int i = 0; i < 40; i++) {
            repository.publish(queue, "{\"n\": " + i + "}");
          }
          SlowListener listener = context.getBean(SlowListener.class);
          assertThat(listener.started.await(30, TimeUnit.SECONDS)).isTrue();
          context.close(); // stops the subscribers (in-flight handlers finish and ack) before the DataSource closes
        });

    int assigned = db.dsl().fetchCount(MESSAGE_QUEUE_ITEM,
        MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(queue.name()).and(MESSAGE_QUEUE_ITEM.STATUS.eq(MessageQueueItemStatus.ASSIGNED)));
    int left = db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(queue.name()));
    assertThat(assigned).as("claimed but not acked after shutdown").isZero();
    assertThat(left).as("some messages were still waiting when it stopped").isPositive();
  }

  @Test
  void listenersRunInTheHeldTransactionModeUnlessTheyNameAnotherAndALeaseAloneFailsTheStart() {
    runner.withUserConfiguration(ModeListeners.class).run(context -> {
      assertThat(context).hasNotFailed();
      List<Subscriber> subscribers = context.getBean(MsgQueueListenerRegistrar.class).subscribers();
      java.util.Map<String, ConsumeMode> modes = new java.util.HashMap<>();
      subscribers.forEach(subscriber -> modes.put(subscriber.queue().name(), subscriber.mode()));
      assertThat(modes).containsEntry("starter-default-mode", ConsumeMode.TRANSACTION)
          .containsEntry("starter-lease-mode", ConsumeMode.LEASE)
          .containsEntry("starter-take-mode", ConsumeMode.AT_MOST_ONCE);
    });
    runner.withUserConfiguration(SlowListener.class).withPropertyValues("msgqueue.subscriber.lease=30s")
        .run(context -> assertThat(context).hasFailed().getFailure().rootCause()
            .hasMessageContaining("set mode(ConsumeMode.LEASE) too"));
  }

  private static HealthIndicator health(org.springframework.context.ApplicationContext context) {
    return context.getBean("msgqueueHealthIndicator", HealthIndicator.class);
  }

  private static void awaitTrue(BooleanSupplier condition, String what) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting: " + what);
      }
      Thread.sleep(10);
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class Listeners {
    final Set<Long> ids = ConcurrentHashMap.newKeySet();
    final Set<String> payloads = ConcurrentHashMap.newKeySet();
    final CountDownLatch received = new CountDownLatch(4);

    @MsgQueueListener(queue = "starter-orders")
    void onOrder(ClaimedMessage message) {
      ids.add(message.id());
      received.countDown();
    }

    @MsgQueueListener(queue = "starter-orders-payloads")
    void onPayload(String payload) {
      payloads.add(payload);
      received.countDown();
    }

    @Bean
    String unrelatedBean() {
      return "not a listener";
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class OwnMetrics {
    final SimpleMeterRegistry registry = new SimpleMeterRegistry();

    @Bean(destroyMethod = "close")
    MicrometerMetrics ownMetrics(MsgQueueRepository repository) {
      return MicrometerMetrics.bind(registry, repository);
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class ModeListeners {
    @MsgQueueListener(queue = "starter-default-mode")
    void inTransaction(String payload) { }

    @MsgQueueListener(queue = "starter-lease-mode", mode = "lease", lease = "30s")
    void leased(String payload) { }

    @MsgQueueListener(queue = "starter-take-mode", mode = "at-most-once")
    void taken(String payload) { }
  }

  @Configuration(proxyBeanMethods = false)
  static class SlowListener {
    final CountDownLatch started = new CountDownLatch(4);

    @MsgQueueListener(queue = "starter-slow")
    void handle(String payload) throws InterruptedException {
      started.countDown();
      Thread.sleep(200);
    }
  }
}
