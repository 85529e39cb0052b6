package dev.msgqueue.internal.support;

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
 * {@link FailureTranslation} turns into {@link dev.msgqueue.MsgQueueTimeoutException}).
 *
 * <p>Why not JDBC's query timeout: pgjdbc implements it with a timer task scheduled and cancelled per statement on a
 * JVM-wide {@link java.util.Timer}, and with 32 publishers that cost a measurable share of publish throughput. Here a
 * statement costs one map insertion and removal, and one daemon thread for the whole library looks for overdue
 * statements every {@value #CHECK_MILLIS} ms. pgjdbc's cancel only acts on a statement that is still executing, so a
 * cancel racing the statement's completion cannot hit the connection's next statement.
 *
 * <p>The watchdog thread owns itself: the first statement starts it, and it ends once no statement has been running
 * for {@value #IDLE_EXIT_MILLIS} ms, so a library that stops being used (an application undeployed from a container,
 * say) leaves no thread behind; the next statement starts a new one.
 */
public final class StatementDeadlines implements ExecuteListener {
  private static final long serialVersionUID = 1L;
  public static final long CHECK_MILLIS = 50;
  public static final long IDLE_EXIT_MILLIS = 2_000;
  public static final String THREAD_NAME = "msgqueue-statement-deadlines";
  private static final Logger log = LoggerFactory.getLogger(StatementDeadlines.class);
  private static final Map<Statement, Long> RUNNING = new ConcurrentHashMap<>();
  private static final String STATEMENT = StatementDeadlines.class.getName() + ".statement";
  private static final Object WATCHDOG_LOCK = new Object();
  /**
   * Whether a watchdog is running (or about to look at {@link #RUNNING} once more before it ends). A statement is put
   * into {@link #RUNNING} before this is read, and the watchdog clears this before its last look at {@link #RUNNING}:
   * so either the watchdog sees the statement and stays, or the statement sees false and starts a new watchdog.
   */
  private static volatile boolean watching;

  private final long timeoutNanos;

  public StatementDeadlines(Duration timeout) {
    this.timeoutNanos = timeout.toNanos();
  }

  @Override
  public void executeStart(ExecuteContext ctx) {
    Statement statement = ctx.statement();
    if (statement != null) {
      ctx.data(STATEMENT, statement);
      RUNNING.put(statement, System.nanoTime() + timeoutNanos);
      if (!watching) {
        startWatchdog();
      }
    }
  }

  @Override
  public void end(ExecuteContext ctx) {
    Object statement = ctx.data(STATEMENT);
    if (statement != null) {
      RUNNING.remove(statement);
    }
  }

  private static void startWatchdog() {
    synchronized (WATCHDOG_LOCK) {
      if (watching) {
        return;
      }
      watching = true;
      DaemonThreads.newThread(THREAD_NAME, StatementDeadlines::cancelOverdueStatements).start();
    }
  }

  private static void cancelOverdueStatements() {
    long idleSince = System.nanoTime();
    while (true) {
      try {
        Thread.sleep(CHECK_MILLIS);
      } catch (InterruptedException e) {
        synchronized (WATCHDOG_LOCK) {
          watching = false;
        }
        return;
      }
      long now = System.nanoTime();
      if (!RUNNING.isEmpty()) {
        idleSince = now;
        try {
          cancelOverdue(now);
        } catch (VirtualMachineError fatal) {
          synchronized (WATCHDOG_LOCK) {
            watching = false; // the next statement starts a new watchdog
          }
          log.error("msgqueue's statement deadline thread stopped; the next statement starts a new one", fatal);
          throw fatal;
        } catch (RuntimeException | Error e) {
          // The watchdog must outlive any one statement's failure, or no statement would be bounded any more.
          log.error("msgqueue's statement deadline check failed; checking again in {} ms", CHECK_MILLIS, e);
        }
      } else if (now - idleSince >= IDLE_EXIT_MILLIS * 1_000_000L && endIfStillIdle()) {
        return;
      }
    }
  }

  private static boolean endIfStillIdle() {
    synchronized (WATCHDOG_LOCK) {
      watching = false;
      if (RUNNING.isEmpty()) {
        return true;
      }
      // A statement started in between and saw this watchdog as running: stay for it.
      watching = true;
      return false;
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
