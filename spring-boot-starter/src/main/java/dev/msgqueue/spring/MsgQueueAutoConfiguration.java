package dev.msgqueue.spring;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.MessageQueueRepository;
import dev.msgqueue.MicrometerMetrics;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.WakeupListener;
import io.micrometer.core.instrument.MeterRegistry;
import java.sql.DriverManager;
import java.util.Arrays;
import java.util.Properties;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.ExecuteListenerProvider;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.health.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.actuate.health.HealthIndicator;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.jdbc.DataSourceProperties;
import org.springframework.boot.autoconfigure.jooq.ExceptionTranslatorExecuteListener;
import org.springframework.boot.autoconfigure.jooq.JooqAutoConfiguration;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.datasource.TransactionAwareDataSourceProxy;

/**
 * msgqueue for a Spring Boot application with a jOOQ {@link DSLContext}:
 * <ul>
 *   <li>a {@link MessageQueueRepository} over the application's {@code DSLContext}, so a publish inside a
 *       {@code @Transactional} method joins that transaction (Boot's {@code DSLContext} runs on the transaction's
 *       connection), while the keep-alive and the re-creation of a reaped queue run on the pool's own connections in
 *       autocommit, so no publisher waits for another one's transaction;</li>
 *   <li>a {@link WakeupListener} on a connection of its own (never a pooled one: a LISTEN is held for good), from
 *       {@code msgqueue.listener.*} or else {@code spring.datasource.*};</li>
 *   <li>a {@link Housekeeper} (the reaper and the expired-message cleanup on an interval, one replica per tick);</li>
 *   <li>a subscriber for every {@link MsgQueueListener} method, stopped before the {@code DataSource} closes;</li>
 *   <li>with Actuator, a {@code msgqueue} health indicator;</li>
 *   <li>with a Micrometer {@code MeterRegistry}, msgqueue's meters.</li>
 * </ul>
 * Every bean backs off when the application defines its own.
 */
@AutoConfiguration(after = JooqAutoConfiguration.class)
@ConditionalOnClass({MessageQueueRepository.class, DSLContext.class})
@ConditionalOnBean(DSLContext.class)
@EnableConfigurationProperties(MsgQueueProperties.class)
public class MsgQueueAutoConfiguration {

  @Bean
  @ConditionalOnMissingBean
  public MsgQueueConfig msgQueueConfig(MsgQueueProperties properties) {
    return properties.toConfig();
  }

  @Bean
  @ConditionalOnMissingBean
  public MessageQueueRepository messageQueueRepository(DSLContext dsl, DataSource dataSource, MsgQueueConfig config) {
    // Statements on the application's context join a @Transactional method's transaction; the keep-alive and the
    // re-creation of a reaped queue run in autocommit on the pool itself, so no publisher waits for that transaction.
    return MessageQueueRepository.create(withoutSpringExceptionTranslation(dsl), unproxied(dataSource), config);
  }

  /** The pool behind a transaction-aware proxy: connections of their own, outside any caller's transaction. */
  static DataSource unproxied(DataSource dataSource) {
    return dataSource instanceof TransactionAwareDataSourceProxy proxy ? proxy.getTargetDataSource() : dataSource;
  }

  /**
   * The application's context (same connection provider, so the same transactions) without Boot's exception
   * translator: msgqueue reads PostgreSQL's SQLSTATEs itself (a 23503 is how a publish finds a reaped queue to heal)
   * and throws its own typed exceptions, which the translator would turn into Spring's before msgqueue sees them.
   */
  static DSLContext withoutSpringExceptionTranslation(DSLContext dsl) {
    ExecuteListenerProvider[] kept = Arrays.stream(dsl.configuration().executeListenerProviders())
        .filter(provider -> !(provider.provide() instanceof ExceptionTranslatorExecuteListener))
        .toArray(ExecuteListenerProvider[]::new);
    return dsl.configuration().derive(kept).dsl();
  }

  @Bean(destroyMethod = "close")
  @ConditionalOnMissingBean
  @ConditionalOnProperty(prefix = "msgqueue.listener", name = "enabled", matchIfMissing = true)
  public WakeupListener msgQueueWakeupListener(
      MsgQueueProperties properties, ObjectProvider<DataSourceProperties> dataSourceProperties) {
    MsgQueueProperties.Listener listener = properties.getListener();
    DataSourceProperties dataSource = dataSourceProperties.getIfAvailable();
    String url = listener.getUrl() != null ? listener.getUrl()
        : dataSource != null ? dataSource.determineUrl() : null;
    if (url == null) {
      throw new IllegalStateException("msgqueue.listener.url is not set and there is no spring.datasource.url: set"
          + " one, or msgqueue.listener.enabled=false to find messages by polling only");
    }
    Properties connectionProperties = new Properties();
    String username = listener.getUsername() != null ? listener.getUsername()
        : dataSource != null ? dataSource.determineUsername() : null;
    String password = listener.getPassword() != null ? listener.getPassword()
        : dataSource != null ? dataSource.determinePassword() : null;
    if (username != null) {
      connectionProperties.setProperty("user", username);
    }
    if (password != null) {
      connectionProperties.setProperty("password", password);
    }
    connectionProperties.setProperty("ApplicationName", "msgqueue-wakeup-listener");
    return WakeupListener.start(() -> DriverManager.getConnection(url, connectionProperties));
  }

  /**
   * Reaps idle auto-deleted queues and deletes expired messages every {@code msgqueue.housekeeper.interval}; across
   * replicas one works per tick and the others skip it without waiting. Closed when the context closes.
   */
  @Bean(destroyMethod = "close")
  @ConditionalOnMissingBean
  @ConditionalOnProperty(prefix = "msgqueue.housekeeper", name = "enabled", matchIfMissing = true)
  public Housekeeper msgQueueHousekeeper(MessageQueueRepository repository, MsgQueueProperties properties) {
    Housekeeper.Builder builder = Housekeeper.builder(repository);
    try {
      builder.interval(properties.getHousekeeper().getInterval());
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("invalid msgqueue.housekeeper.interval: " + e.getMessage(), e);
    }
    return builder.build().start();
  }

  @Bean
  public static MsgQueueListenerRegistrar msgQueueListenerRegistrar(ObjectProvider<MessageQueueRepository> repository,
      ObjectProvider<WakeupListener> wakeups, ObjectProvider<MsgQueueProperties> properties) {
    return new MsgQueueListenerRegistrar(repository, wakeups, properties);
  }

  /**
   * msgqueue's meters ({@code msgqueue.*}: counters, timers, and the statistics gauges the housekeeper refreshes) in
   * the application's {@link MeterRegistry}, with Micrometer on the classpath.
   */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(MeterRegistry.class)
  @ConditionalOnBean(MeterRegistry.class)
  static class MetricsConfiguration {
    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    MicrometerMetrics msgQueueMetrics(MeterRegistry registry, MessageQueueRepository repository,
        MsgQueueProperties properties) {
      return MicrometerMetrics.bind(registry, repository, properties.getMetrics().getMaxQueueTags());
    }
  }

  /** The {@code msgqueue} health indicator, with Actuator on the classpath. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(HealthIndicator.class)
  @ConditionalOnEnabledHealthIndicator("msgqueue")
  static class HealthConfiguration {
    @Bean
    @ConditionalOnMissingBean(name = "msgQueueHealthIndicator")
    MsgQueueHealthIndicator msgQueueHealthIndicator(DSLContext dsl, ObjectProvider<WakeupListener> wakeups,
        ObjectProvider<Housekeeper> housekeeper) {
      return new MsgQueueHealthIndicator(dsl, wakeups.getIfAvailable(), housekeeper.getIfAvailable());
    }
  }
}
