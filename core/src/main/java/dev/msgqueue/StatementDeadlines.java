package dev.msgqueue;

import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Bounds every statement msgqueue runs, lock waits included: a statement still running {@code timeout} after it
 * started is cancelled ({@link Statement#cancel()}; PostgreSQL then fails it with 57014, which
 * {@link FailureTranslation} turns into {@link MsgQueueTimeoutException}).
 *
 * <p>Why not JDBC's query timeout: pgjdbc implements it with a timer task scheduled and cancelled per statement on a
 * JVM-wide {@link java.util.Timer}, and with 32 publishers that cost a measurable share of publish throughput. Here a
 * statement costs one map insertion and removal, and one daemon thread for the whole library looks for overdue
 * statements every {@value #CHECK_MILLIS} ms. pgjdbc's cancel only acts on a statement that is still executing, so a
 * cancel racing the statement's completion cannot hit the connection's next statement.
 */
final class StatementDeadlines implements ExecuteListener {
  private static final long serialVersionUID = 1L;
  static final long CHECK_MILLIS = 50;
  private static final Logger log = LoggerFactory.getLogger(StatementDeadlines.class);
  private static final Map<Statement, Long> RUNNING = new ConcurrentHashMap<>();
  private static final String STATEMENT = StatementDeadlines.class.getName() + ".statement";

  static {
    Thread watchdog = new Thread(StatementDeadlines::cancelOverdueStatements, "msgqueue-statement-deadlines");
    watchdog.setDaemon(true);
    watchdog.start();
  }

  private final long timeoutNanos;

  StatementDeadlines(Duration timeout) {
    this.timeoutNanos = timeout.toNanos();
  }

  @Override
  public void executeStart(ExecuteContext ctx) {
    Statement statement = ctx.statement();
    if (statement != null) {
      ctx.data(STATEMENT, statement);
      RUNNING.put(statement, System.nanoTime() + timeoutNanos);
    }
  }

  @Override
  public void end(ExecuteContext ctx) {
    Object statement = ctx.data(STATEMENT);
    if (statement != null) {
      RUNNING.remove(statement);
    }
  }

  private static void cancelOverdueStatements() {
    while (true) {
      try {
        Thread.sleep(CHECK_MILLIS);
      } catch (InterruptedException e) {
        return;
      }
      try {
        cancelOverdue(System.nanoTime());
      } catch (VirtualMachineError fatal) {
        log.error("msgqueue's statement deadline thread stopped: statementTimeout is no longer enforced", fatal);
        throw fatal;
      } catch (RuntimeException | Error e) {
        // The watchdog must outlive any one statement's failure, or no statement would be bounded any more.
        log.error("msgqueue's statement deadline check failed; checking again in {} ms", CHECK_MILLIS, e);
      }
    }
  }

  private static void cancelOverdue(long now) {
    RUNNING.forEach((statement, deadline) -> {
      if (now - deadline > 0 && RUNNING.remove(statement, deadline)) {
        try {
          statement.cancel();
        } catch (SQLException | RuntimeException | LinkageError e) {
          log.debug("could not cancel an overdue statement", e);
        }
      }
    });
  }
}
