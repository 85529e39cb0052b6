package dev.msgqueue.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.console.Console;
import dev.msgqueue.console.ProcessCounters;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.TestDatabase;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration;
import org.springframework.boot.autoconfigure.jdbc.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.autoconfigure.jooq.JooqAutoConfiguration;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.mock.web.MockHttpServletResponse;
import org.springframework.web.servlet.handler.SimpleUrlHandlerMapping;

/** When the starter serves the console, where, and with what. Served over HTTP in spring-boot-tests. */
@ExtendWith(MsgQueueDatabaseExtension.class)
class MsgQueueConsoleAutoConfigurationTest {
  private final TestDatabase db;
  private final WebApplicationContextRunner web;

  MsgQueueConsoleAutoConfigurationTest(TestDatabase db) {
    this.db = db;
    this.web = new WebApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(DataSourceAutoConfiguration.class,
            DataSourceTransactionManagerAutoConfiguration.class, JooqAutoConfiguration.class,
            MsgQueueAutoConfiguration.class, MsgQueueConsoleAutoConfiguration.class))
        .withPropertyValues("spring.datasource.url=" + db.jdbcUrl(), "msgqueue.listener.enabled=false");
  }

  @Test
  void offUnlessEnabled() {
    web.run(context -> {
      assertThat(context).hasNotFailed();
      assertThat(context).doesNotHaveBean(Console.class);
      assertThat(context).doesNotHaveBean("msgQueueConsoleHandlerMapping");
    });
    web.withPropertyValues("msgqueue.console.enabled=false").run(context ->
        assertThat(context).doesNotHaveBean(Console.class));
  }

  @Test
  void enabledItIsServedAtItsPathReadOnly() {
    web.withPropertyValues("msgqueue.console.enabled=true").run(context -> {
      assertThat(context).hasSingleBean(Console.class);
      MockHttpServletResponse redirect = serve(context.getBean("msgQueueConsoleHandlerMapping",
          SimpleUrlHandlerMapping.class), "GET", "/msgqueue");
      assertThat(redirect.getRedirectedUrl()).isEqualTo("/msgqueue/");
      MockHttpServletResponse session = serve(context.getBean("msgQueueConsoleHandlerMapping",
          SimpleUrlHandlerMapping.class), "GET", "/msgqueue/api/session");
      assertThat(session.getStatus()).isEqualTo(200);
      assertThat(session.getContentAsString(StandardCharsets.UTF_8)).contains("\"actionsEnabled\":false")
          .contains("\"housekeeperInProcess\":true");
      assertThat(session.getHeader("Content-Security-Policy")).contains("default-src 'none'");
    });
  }

  @Test
  void theActionsAndThePathAreSettings() {
    web.withPropertyValues("msgqueue.console.enabled=true", "msgqueue.console.actions-enabled=true",
        "msgqueue.console.path=/ops/queues").run(context -> {
          SimpleUrlHandlerMapping mapping = context.getBean("msgQueueConsoleHandlerMapping",
              SimpleUrlHandlerMapping.class);
          assertThat(mapping.getUrlMap()).containsOnlyKeys("/ops/queues", "/ops/queues/**");
          assertThat(serve(mapping, "GET", "/ops/queues/api/session").getContentAsString(StandardCharsets.UTF_8))
              .contains("\"actionsEnabled\":true");
        });
  }

  @Test
  void aPathThatIsNotOneOfItsOwnFailsTheStartWithTheSettingsName() {
    for (String path : new String[] {"/", "msgqueue", "/msgqueue/", "/msgqueue/**"}) {
      web.withPropertyValues("msgqueue.console.enabled=true", "msgqueue.console.path=" + path).run(context -> {
        assertThat(context).hasFailed();
        assertThat(context.getStartupFailure()).rootCause().hasMessageContaining("invalid msgqueue.console.path");
      });
    }
  }

  @Test
  void notInAServiceWithoutAServletWebServerNorWithoutTheConsoleModule() {
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(DataSourceAutoConfiguration.class, JooqAutoConfiguration.class,
            MsgQueueAutoConfiguration.class, MsgQueueConsoleAutoConfiguration.class))
        .withPropertyValues("spring.datasource.url=" + db.jdbcUrl(), "msgqueue.listener.enabled=false",
            "msgqueue.housekeeper.enabled=false", "msgqueue.console.enabled=true")
        .run(context -> {
          assertThat(context).hasNotFailed();
          assertThat(context).doesNotHaveBean(Console.class);
        });
    web.withPropertyValues("msgqueue.console.enabled=true").withClassLoader(new FilteredClassLoader(Console.class))
        .run(context -> {
          assertThat(context).hasNotFailed();
          assertThat(context).doesNotHaveBean("msgQueueConsole");
        });
  }

  @Test
  void theThroughputViewReadsTheServicesMeterRegistry() {
    web.withPropertyValues("msgqueue.console.enabled=true")
        .withBean(MeterRegistry.class, SimpleMeterRegistry::new)
        .run(context -> {
          assertThat(context).hasSingleBean(ProcessCounters.class);
          assertThat(context.getBean(ProcessCounters.class).totals()).containsKey(ProcessCounters.PUBLISHED);
        });
    web.withPropertyValues("msgqueue.console.enabled=true").run(context ->
        assertThat(context.getBeanProvider(ProcessCounters.class).getIfAvailable()).isNull());
  }

  private static MockHttpServletResponse serve(SimpleUrlHandlerMapping mapping, String method, String uri)
      throws Exception {
    MockHttpServletRequest request = new MockHttpServletRequest(method, uri);
    MockHttpServletResponse response = new MockHttpServletResponse();
    ((ConsoleRequestHandler) mapping.getUrlMap().values().iterator().next()).handleRequest(request, response);
    return response;
  }
}
