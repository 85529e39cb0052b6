package dev.msgqueue.spring;

import dev.msgqueue.WakeupListener;
import java.sql.DriverManager;
import java.util.Optional;
import java.util.Properties;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.core.env.Environment;

/**
 * Connections of msgqueue's own, outside the application's pool: the LISTEN connection (held for good) and the health
 * check's (short timeouts, so a check answers within about a second during an outage instead of waiting for the pool).
 * They go to {@code msgqueue.listener.url} or else {@code spring.datasource.url}, with the matching user and password.
 */
final class DirectConnections {
  private final String url;
  private final String username;
  private final String password;

  private DirectConnections(String url, String username, String password) {
    this.url = url;
    this.username = username;
    this.password = password;
  }

  /** The settings in {@code environment}; {@link Optional#empty()} when neither URL is set. */
  static Optional<DirectConnections> of(MsgQueueProperties.Listener listener, Environment environment) {
    Binder binder = Binder.get(environment);
    String url = listener.getUrl() != null ? listener.getUrl() : springDataSource(binder, "url");
    if (url == null) {
      return Optional.empty();
    }
    String username = listener.getUsername() != null ? listener.getUsername() : springDataSource(binder, "username");
    String password = listener.getPassword() != null ? listener.getPassword() : springDataSource(binder, "password");
    return Optional.of(new DirectConnections(url, username, password));
  }

  private static String springDataSource(Binder binder, String property) {
    return binder.bind("spring.datasource." + property, String.class).orElse(null);
  }

  /**
   * Opens connections named {@code applicationName} (in {@code pg_stat_activity}) with {@code settings} added to the
   * credentials; settings in the URL itself take precedence (pgjdbc's rule).
   */
  WakeupListener.ConnectionFactory factory(String applicationName, Properties settings) {
    Properties properties = new Properties();
    properties.putAll(settings);
    if (username != null) {
      properties.setProperty("user", username);
    }
    if (password != null) {
      properties.setProperty("password", password);
    }
    properties.setProperty("ApplicationName", applicationName);
    return () -> DriverManager.getConnection(url, properties);
  }
}
