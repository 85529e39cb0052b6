package dev.msgqueue.spring;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.MicrometerMetrics;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.WakeupListener;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.ExecuteListener;
import org.jooq.ExecuteListenerProvider;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.jdbc.datasource.TransactionAwareDataSourceProxy;
import org.springframework.util.ClassUtils;

/**
 * msgqueue for a Spring Boot application with a jOOQ {@link DSLContext}:
 * <ul>
 *   <li>a {@link MsgQueueRepository} over the application's {@code DSLContext}, so a publish inside a
 *       {@code @Transactional} method joins that transaction (Boot's {@code DSLContext} runs on the transaction's
 *       connection), while the keep-alive and the re-creation of a reaped queue run on the pool's own connections in
 *       autocommit, so no publisher waits for another one's transaction;</li>
 *   <li>a {@link WakeupListener} on a connection of its own (never a pooled one: a LISTEN is held for good), from
 *       {@code msgqueue.listener.*} or else {@code spring.datasource.*};</li>
 *   <li>a {@link Housekeeper} (the reaper and the expired-message cleanup on an interval, one replica per tick);</li>
 *   <li>a subscriber for every {@link MsgQueueListener} method, stopped before the {@code DataSource} closes;</li>
 *   <li>with Actuator, the {@code msgqueue} health indicator ({@link MsgQueueHealth});</li>
 *   <li>with Micrometer, msgqueue's meters as a {@code MeterBinder}, which Boot binds to every registry it
 *       creates.</li>
 * </ul>
 * Every bean backs off when the application defines its own. It runs on Spring Boot 3.5 and 4.0: it names the classes
 * that moved between the two lines (jOOQ's auto-configuration and exception translator, the health API) by name only.
 */
@AutoConfiguration(afterName = {
    "org.springframework.boot.autoconfigure.jooq.JooqAutoConfiguration", // Boot 3
    "org.springframework.boot.jooq.autoconfigure.JooqAutoConfiguration"}) // Boot 4
@ConditionalOnClass({MsgQueueRepository.class, DSLContext.class})
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
  public MsgQueueRepository msgQueueRepository(DSLContext dsl, DataSource dataSource, MsgQueueConfig config) {
    // Statements on the application's context join a @Transactional method's transaction; the keep-alive and the
    // re-creation of a reaped queue run in autocommit on the pool itself, so no publisher waits for that transaction.
    return MsgQueueRepository.create(withoutSpringExceptionTranslation(dsl), unproxied(dataSource), config);
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
        .filter(provider -> !isSpringExceptionTranslator(provider.provide()))
        .toArray(ExecuteListenerProvider[]::new);
    return dsl.configuration().derive(kept).dsl();
  }

  private static final List<String> EXCEPTION_TRANSLATORS = List.of(
      "org.springframework.boot.autoconfigure.jooq.ExceptionTranslatorExecuteListener", // Boot 3
      "org.springframework.boot.jooq.autoconfigure.ExceptionTranslatorExecuteListener"); // Boot 4

  private static boolean isSpringExceptionTranslator(ExecuteListener listener) {
    ClassLoader loader = listener.getClass().getClassLoader();
    return EXCEPTION_TRANSLATORS.stream().anyMatch(name -> ClassUtils.isPresent(name, loader)
        && ClassUtils.resolveClassName(name, loader).isInstance(listener));
  }

  @Bean(destroyMethod = "close")
  @ConditionalOnMissingBean
  @ConditionalOnProperty(prefix = "msgqueue.listener", name = "enabled", matchIfMissing = true)
  public WakeupListener msgQueueWakeupListener(MsgQueueProperties properties, Environment environment) {
    DirectConnections connections = DirectConnections.of(properties.getListener(), environment)
        .orElseThrow(() -> new IllegalStateException("msgqueue.listener.url is not set and there is no"
            + " spring.datasource.url: set one, or msgqueue.listener.enabled=false to find messages by polling only"));
    return WakeupListener.start(connections.factory("msgqueue-wakeup-listener", new Properties()));
  }

  /**
   * Reaps idle auto-deleted queues and deletes expired messages every {@code msgqueue.housekeeper.interval}; across
   * replicas one works per tick and the others skip it without waiting. Closed when the context closes.
   */
  @Bean(destroyMethod = "close")
  @ConditionalOnMissingBean
  @ConditionalOnProperty(prefix = "msgqueue.housekeeper", name = "enabled", matchIfMissing = true)
  public Housekeeper msgQueueHousekeeper(MsgQueueRepository repository, MsgQueueProperties properties) {
    Housekeeper.Builder builder = Housekeeper.builder(repository);
    try {
      builder.interval(properties.getHousekeeper().getInterval());
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("invalid msgqueue.housekeeper.interval: " + e.getMessage(), e);
    }
    return builder.build().start();
  }

  @Bean
  public static MsgQueueListenerRegistrar msgQueueListenerRegistrar(ObjectProvider<MsgQueueRepository> repository,
      ObjectProvider<WakeupListener> wakeups, ObjectProvider<MsgQueueProperties> properties) {
    return new MsgQueueListenerRegistrar(repository, wakeups, properties);
  }

  /**
   * msgqueue's meters ({@code msgqueue.*}: counters, timers, and the statistics gauges the housekeeper refreshes) in
   * every registry Spring Boot creates, with Micrometer on the classpath. Backs off when the application binds
   * {@link MicrometerMetrics} itself.
   */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(MeterBinder.class)
  static class MetricsConfiguration {
    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean(value = MicrometerMetrics.class, name = "msgqueueMeterBinder")
    MsgQueueMeterBinder msgqueueMeterBinder(MsgQueueRepository repository, MsgQueueProperties properties) {
      return new MsgQueueMeterBinder(repository, properties.getMetrics().getMaxQueueTags(),
          properties.getMetrics().isQueueGauges());
    }
  }

  /** The {@code msgqueue} health component, with Actuator: one check, reported through the running Boot line's API. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "org.springframework.boot.actuate.endpoint.annotation.Endpoint")
  static class HealthConfiguration {
    /**
     * The check, over a connection of its own with at most a second to connect, log in and answer; with no URL to
     * open one (a DataSource bean the application builds itself), over the pool, which may wait for the pool's
     * connection timeout during an outage.
     */
    @Bean
    @ConditionalOnMissingBean
    MsgQueueHealth msgqueueHealth(MsgQueueProperties properties, Environment environment, DataSource dataSource,
        ObjectProvider<WakeupListener> wakeups, ObjectProvider<Housekeeper> housekeeper) {
      Properties timeouts = new Properties();
      timeouts.setProperty("connectTimeout", "1");
      timeouts.setProperty("loginTimeout", "1");
      timeouts.setProperty("socketTimeout", "1");
      WakeupListener.ConnectionFactory database = DirectConnections.of(properties.getListener(), environment)
          .map(connections -> connections.factory("msgqueue-health", timeouts))
          .orElse(unproxied(dataSource)::getConnection);
      return new MsgQueueHealth(database, wakeups.getIfAvailable(), housekeeper.getIfAvailable());
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.actuate.health.HealthIndicator")
    @org.springframework.boot.actuate.autoconfigure.health.ConditionalOnEnabledHealthIndicator("msgqueue")
    static class Boot3 {
      @Bean
      @ConditionalOnMissingBean(name = "msgqueueHealthIndicator")
      Boot3HealthIndicator msgqueueHealthIndicator(MsgQueueHealth health) {
        return new Boot3HealthIndicator(health);
      }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.health.contributor.HealthIndicator")
    @org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator("msgqueue")
    static class Boot4 {
      @Bean
      @ConditionalOnMissingBean(name = "msgqueueHealthIndicator")
      Boot4HealthIndicator msgqueueHealthIndicator(MsgQueueHealth health) {
        return new Boot4HealthIndicator(health);
      }
    }
  }
}
