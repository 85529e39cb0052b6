package dev.msgqueue.internal.support;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.impl.DefaultConfiguration;
import org.jooq.impl.DefaultExecuteListenerProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The deadline watchdog against a JDBC connection stand-in whose statements run until cancelled: an overdue statement
 * is cancelled, the watchdog thread ends once nothing runs, and the next statement starts it again.
 */
@Timeout(30)
class StatementDeadlinesTest {

  @Test
  void anOverdueStatementIsCancelledAndTheWatchdogEndsWhenIdleAndComesBackForTheNextStatement() throws Exception {
    HangingConnection connection = new HangingConnection();
    DSLContext ctx = DSL.using(new DefaultConfiguration()
        .set(connection.proxy())
        .set(SQLDialect.POSTGRES)
        .set(new DefaultExecuteListenerProvider(new StatementDeadlines(Duration.ofMillis(200)))));

    assertThatThrownBy(() -> ctx.execute("select pg_sleep(3600)"))
        .hasRootCauseMessage("canceling statement due to user request");
    assertThat(connection.cancels.get()).as("cancels").isEqualTo(1);

    awaitNoWatchdog(Duration.ofMillis(StatementDeadlines.IDLE_EXIT_MILLIS).plusSeconds(5));

    assertThatThrownBy(() -> ctx.execute("select pg_sleep(3600)"))
        .hasRootCauseMessage("canceling statement due to user request");
    assertThat(connection.cancels.get()).as("the second statement is cancelled by a new watchdog").isEqualTo(2);
    awaitNoWatchdog(Duration.ofMillis(StatementDeadlines.IDLE_EXIT_MILLIS).plusSeconds(5));
  }

  @Test
  void aStatementThatEndsInTimeIsNotCancelled() throws Exception {
    HangingConnection connection = new HangingConnection();
    connection.hang = false;
    DSLContext ctx = DSL.using(new DefaultConfiguration()
        .set(connection.proxy())
        .set(SQLDialect.POSTGRES)
        .set(new DefaultExecuteListenerProvider(new StatementDeadlines(Duration.ofMillis(200)))));

    ctx.execute("select 1");
    Thread.sleep(StatementDeadlines.CHECK_MILLIS * 6);

    assertThat(connection.cancels.get()).isZero();
  }

  private static void awaitNoWatchdog(Duration atMost) throws InterruptedException {
    long deadline = System.nanoTime() + atMost.toNanos();
    while (watchdogAlive()) {
      assertThat(System.nanoTime() - deadline).as("the watchdog thread is still alive after %s idle", atMost)
          .isNegative();
      Thread.sleep(20);
    }
  }

  private static boolean watchdogAlive() {
    return Thread.getAllStackTraces().keySet().stream()
        .anyMatch(thread -> thread.getName().equals(StatementDeadlines.THREAD_NAME) && thread.isAlive());
  }

  /** A connection whose statements block until {@link java.sql.Statement#cancel()}, as a lock wait would. */
  private static final class HangingConnection {
    final AtomicInteger cancels = new AtomicInteger();
    volatile boolean hang = true;

    Connection proxy() {
      return (Connection) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {Connection.class},
          (self, method, args) -> switch (method.getName()) {
            case "prepareStatement" -> statement();
            case "getMetaData" -> serverVersion15();
            default -> defaultValue(method.getReturnType());
          });
    }

    /** Answers jOOQ's version check, which otherwise logs that it could not read one. */
    private DatabaseMetaData serverVersion15() {
      return (DatabaseMetaData) Proxy.newProxyInstance(getClass().getClassLoader(),
          new Class<?>[] {DatabaseMetaData.class}, (self, method, args) -> switch (method.getName()) {
            case "getDatabaseMajorVersion" -> 15;
            case "getDatabaseProductVersion" -> "15.0";
            default -> defaultValue(method.getReturnType());
          });
    }

    private PreparedStatement statement() {
      CountDownLatch cancelled = new CountDownLatch(1);
      return (PreparedStatement) Proxy.newProxyInstance(getClass().getClassLoader(),
          new Class<?>[] {PreparedStatement.class}, (self, method, args) -> {
            String name = method.getName();
            if (name.equals("cancel")) {
              cancels.incrementAndGet();
              cancelled.countDown();
              return null;
            }
            if (name.startsWith("execute")) {
              if (hang && !cancelled.await(20, TimeUnit.SECONDS)) {
                throw new SQLException("never cancelled", "XX000");
              }
              if (hang) {
                throw new SQLException("canceling statement due to user request", "57014");
              }
              return defaultValue(method.getReturnType());
            }
            return defaultValue(method.getReturnType());
          });
    }

    private static Object defaultValue(Class<?> type) {
      if (type == boolean.class) {
        return false;
      }
      if (type == int.class) {
        return 0;
      }
      if (type == long.class) {
        return 0L;
      }
      return null;
    }
  }
}
