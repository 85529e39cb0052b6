package dev.msgqueue.spring;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.console.Console;
import dev.msgqueue.console.MicrometerCounters;
import dev.msgqueue.console.ProcessCounters;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Map;
import javax.sql.DataSource;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.web.servlet.DispatcherServlet;
import org.springframework.web.servlet.handler.SimpleUrlHandlerMapping;

/**
 * The operations console inside a Spring Boot service: with msgqueue-console on the classpath, in a servlet web
 * application, and only when {@code msgqueue.console.enabled=true}. Served by Spring MVC under
 * {@code msgqueue.console.path} (default {@code /msgqueue}), so every filter of the service applies to it: with Spring
 * Security, the service's rules decide who may open it, and its CSRF protection guards the console's POSTs as well as
 * the console's own token. The console opens nothing itself. Actions stay off unless
 * {@code msgqueue.console.actions-enabled=true}; each is logged with the authenticated principal.
 *
 * <p>The queue counts come from the service's {@link Housekeeper} (the statistics its ticks read for the queue
 * gauges), the throughput view from the {@code msgqueue.*} counters of the service's meter registry.
 */
@AutoConfiguration(after = MsgQueueAutoConfiguration.class)
@ConditionalOnClass({Console.class, DispatcherServlet.class})
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
@ConditionalOnProperty(prefix = "msgqueue.console", name = "enabled", havingValue = "true")
@ConditionalOnBean(MsgQueueRepository.class)
public class MsgQueueConsoleAutoConfiguration {
  /** Before the application's static resources (which map /** last), after its own request mappings (order 0). */
  static final int HANDLER_ORDER = 1;

  @Bean(destroyMethod = "close")
  @ConditionalOnMissingBean
  public Console msgQueueConsole(MsgQueueRepository repository, DataSource dataSource, MsgQueueProperties properties,
      ObjectProvider<Housekeeper> housekeeper, ObjectProvider<ProcessCounters> counters) {
    MsgQueueProperties.Console settings = properties.getConsole();
    try {
      // The pool itself: the console's reads and purges never join a caller's transaction.
      return Console.builder(repository,
              DSL.using(MsgQueueAutoConfiguration.unproxied(dataSource), SQLDialect.POSTGRES))
          .actionsEnabled(settings.isActionsEnabled())
          .statisticsMaxAge(settings.getStatisticsMaxAge())
          .housekeeper(housekeeper.getIfAvailable())
          .processCounters(counters.getIfAvailable())
          .build();
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("invalid msgqueue.console.* configuration: " + e.getMessage(), e);
    }
  }

  @Bean
  public SimpleUrlHandlerMapping msgQueueConsoleHandlerMapping(Console console, MsgQueueProperties properties) {
    String path = ConsoleRequestHandler.requireValidPath(properties.getConsole().getPath());
    ConsoleRequestHandler handler = new ConsoleRequestHandler(console, path);
    return new SimpleUrlHandlerMapping(Map.of(path, handler, path + "/**", handler), HANDLER_ORDER);
  }

  /** The service's msgqueue meters, for the throughput view, when it has a meter registry. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass({MeterRegistry.class, MicrometerCounters.class})
  static class Counters {
    @Bean
    @ConditionalOnMissingBean
    ProcessCounters msgQueueConsoleCounters(ObjectProvider<MeterRegistry> registries) {
      MeterRegistry registry = registries.getIfUnique();
      // No registry: no bean (a null bean), and the console shows the database's figures only.
      return registry == null ? null : new MicrometerCounters(registry);
    }
  }
}
