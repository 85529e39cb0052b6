package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.internal.support.StatementDeadlines;
import java.lang.reflect.Proxy;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.ExecuteContext;
import org.junit.jupiter.api.Test;

/**
 * The threads msgqueue owns outlive unexpected failures: they log and keep going. (The subscriber's claiming thread:
 * {@link ConfigurationBoundsTest}.)
 */
class LibraryThreadsTest {

  @Test
  void theWakeupListenerThreadSurvivesAnErrorFromItsConnectionFactory() throws Exception {
    AtomicInteger attempts = new AtomicInteger();
    WakeupListener listener = WakeupListener.start(() -> {
      if (attempts.incrementAndGet() == 1) {
        throw new NoClassDefFoundError("simulated: a driver class failed to load");
      }
      throw new SQLException("no database in this test");
    });
    try {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (attempts.get() < 3 && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      assertThat(attempts.get()).as("connect attempts after the Error").isGreaterThanOrEqualTo(3);
    } finally {
      listener.close();
    }
  }

  @Test
  void theStatementDeadlineWatchdogSurvivesAStatementWhoseCancelThrowsAnError() throws Exception {
    StatementDeadlines deadlines = new StatementDeadlines(Duration.ofMillis(1));
    ExecuteContext broken = context(statement(() -> {
      throw new AssertionError("simulated: cancel fails in a way no driver documents");
    }));
    deadlines.executeStart(broken);
    Thread.sleep(3 * StatementDeadlines.CHECK_MILLIS);
    CountDownLatch cancelled = new CountDownLatch(1);
    ExecuteContext healthy = context(statement(cancelled::countDown));
    deadlines.executeStart(healthy);
    try {
      assertThat(cancelled.await(30, TimeUnit.SECONDS)).as("a later overdue statement is still cancelled").isTrue();
    } finally {
      deadlines.end(broken);
      deadlines.end(healthy);
    }
  }

  private static Statement statement(Runnable onCancel) {
    return (Statement) Proxy.newProxyInstance(Statement.class.getClassLoader(),
        new Class<?>[] {java.sql.PreparedStatement.class},
        (proxy, method, args) -> switch (method.getName()) {
          case "cancel" -> {
            onCancel.run();
            yield null;
          }
          case "hashCode" -> System.identityHashCode(proxy);
          case "equals" -> proxy == args[0];
          default -> throw new UnsupportedOperationException(method.getName());
        });
  }

  private static ExecuteContext context(Statement statement) {
    Map<Object, Object> data = new HashMap<>();
    return (ExecuteContext) Proxy.newProxyInstance(ExecuteContext.class.getClassLoader(),
        new Class<?>[] {ExecuteContext.class}, (proxy, method, args) -> switch (method.getName()) {
          case "statement" -> statement;
          case "data" -> args.length == 1 ? data.get(args[0]) : data.put(args[0], args[1]);
          case "hashCode" -> System.identityHashCode(proxy);
          case "equals" -> proxy == args[0];
          default -> throw new UnsupportedOperationException(method.getName());
        });
  }
}
