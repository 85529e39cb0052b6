package dev.msgqueue;

import dev.msgqueue.internal.sql.NotifyStatements;
import dev.msgqueue.internal.support.Arguments;
import dev.msgqueue.internal.support.DaemonThreads;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArraySet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one LISTEN connection of a process: receives the wake-ups publishers send (see
 * {@link MsgQueueConfig#wakeupNotifications()}) and wakes the {@link Subscriber}s of the named queue, so they claim at
 * once instead of at their next poll. Create one per process, pass it to every subscriber, close it after them.
 *
 * <p>It holds a dedicated connection, opened by the {@link ConnectionFactory} you give it, not one taken from your
 * pool (a LISTEN connection is held forever). If the connection drops, it wakes all its subscribers (they stop backing
 * off their idle polls while it is down), reconnects with a capped exponential backoff, and after every (re)connect
 * wakes them all again, since notifications sent meanwhile are lost. Subscribers keep polling regardless, so a wake-up
 * is only ever a shortcut.
 */
public final class WakeupListener implements AutoCloseable {
  /** Opens the listener's dedicated connection, for example {@code () -> DriverManager.getConnection(url, props)}. */
  @FunctionalInterface
  public interface ConnectionFactory {
    Connection connect() throws SQLException;
  }

  private static final Logger log = LoggerFactory.getLogger(WakeupListener.class);
  private static final int RECEIVE_TIMEOUT_MILLIS = 500;
  private static final Duration MIN_BACKOFF = Duration.ofMillis(100);
  private static final Duration MAX_BACKOFF = Duration.ofSeconds(10);
  // A half-open TCP connection (peer gone without a FIN) would otherwise look like a quiet channel forever.
  private static final Duration HEALTH_CHECK_INTERVAL = Duration.ofSeconds(30);

  private final ConnectionFactory factory;
  private final Map<String, Set<Runnable>> subscribers = new ConcurrentHashMap<>();
  private final Thread thread;
  private final AtomicInteger connects = new AtomicInteger();
  private volatile boolean closed;
  private volatile Connection connection;
  private volatile int backendPid;

  private WakeupListener(ConnectionFactory factory) {
    this.factory = factory;
    this.thread = DaemonThreads.newThread("msgqueue-wakeup-listener", this::run);
  }

  /**
   * Starts listening on a dedicated connection from {@code factory}. Returns at once; the first connect happens in the
   * background (see {@link #isListening()}), and is retried until it succeeds.
   */
  public static WakeupListener start(ConnectionFactory factory) {
    WakeupListener listener = new WakeupListener(Arguments.requireNonNull(factory, "factory"));
    listener.thread.start();
    return listener;
  }

  /** Whether the LISTEN connection is up right now. */
  public boolean isListening() {
    return connection != null;
  }

  /** Stops listening and closes the connection; waits up to a few seconds for the listener thread. */
  @Override
  public void close() {
    closed = true;
    thread.interrupt();
    try {
      thread.join(TimeUnit.SECONDS.toMillis(5));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    closeConnection();
  }

  /** Calls {@code wake} (quickly, on the listener thread) on every wake-up for {@code queue}; returns the undo. */
  Runnable register(String queue, Runnable wake) {
    subscribers.computeIfAbsent(queue, name -> new CopyOnWriteArraySet<>()).add(wake);
    return () -> subscribers.computeIfPresent(queue, (name, set) -> {
      set.remove(wake);
      return set.isEmpty() ? null : set;
    });
  }

  /** How many times the connection was established (1 + reconnects). */
  int connects() {
    return connects.get();
  }

  /** The server process id of the current LISTEN connection, 0 when down. */
  int backendPid() {
    return connection == null ? 0 : backendPid;
  }

  private void run() {
    Duration backoff = MIN_BACKOFF;
    long nextHealthCheck = 0;
    while (!closed) {
      try {
        if (connection == null) {
          connect();
          backoff = MIN_BACKOFF;
          nextHealthCheck = System.nanoTime() + HEALTH_CHECK_INTERVAL.toNanos();
          subscribers.values().forEach(set -> set.forEach(WakeupListener::wakeSafely));
        }
        PGNotification[] notifications = connection.unwrap(PGConnection.class).getNotifications(RECEIVE_TIMEOUT_MILLIS);
        if (notifications != null && notifications.length > 0) {
          nextHealthCheck = System.nanoTime() + HEALTH_CHECK_INTERVAL.toNanos();
          for (PGNotification notification : notifications) {
            Set<Runnable> woken = subscribers.get(notification.getParameter());
            if (woken != null) {
              woken.forEach(WakeupListener::wakeSafely);
            }
          }
        } else if (System.nanoTime() - nextHealthCheck >= 0) {
          nextHealthCheck = System.nanoTime() + HEALTH_CHECK_INTERVAL.toNanos();
          if (!connection.isValid(5)) {
            throw new SQLException("LISTEN connection failed its health check");
          }
        }
      } catch (VirtualMachineError fatal) {
        log.error("msgqueue wake-up listener thread stopped; subscribers find messages by polling only", fatal);
        closeConnection();
        throw fatal;
      } catch (SQLException | RuntimeException | Error e) {
        // Anything else, a driver's own Error included, is treated as a lost connection: the thread never dies of it.
        boolean wasListening = connection != null;
        closeConnection();
        if (closed) {
          break;
        }
        if (wasListening) {
          // Subscribers back off their idle polls while this listens: woken now, each claims once and returns to
          // its poll interval, since wake-ups stop until the reconnect.
          subscribers.values().forEach(set -> set.forEach(WakeupListener::wakeSafely));
        }
        log.warn("msgqueue wake-up LISTEN connection lost or unavailable ({}); reconnecting in {} ms"
            + " (subscribers keep polling meanwhile)", e.getMessage(), backoff.toMillis());
        log.debug("LISTEN connection failure", e);
        if (!sleep(backoff)) {
          break;
        }
        backoff = backoff.multipliedBy(2).compareTo(MAX_BACKOFF) > 0 ? MAX_BACKOFF : backoff.multipliedBy(2);
      }
    }
    closeConnection();
  }

  private void connect() throws SQLException {
    Connection opened = factory.connect();
    try {
      opened.setAutoCommit(true);
      NotifyStatements.listen(opened);
      backendPid = opened.unwrap(PGConnection.class).getBackendPID();
    } catch (SQLException | RuntimeException e) {
      try {
        opened.close();
      } catch (SQLException closing) {
        e.addSuppressed(closing);
      }
      throw e;
    }
    connection = opened;
    int count = connects.incrementAndGet();
    if (count > 1) {
      log.info("msgqueue wake-up LISTEN connection re-established (connect #{})", count);
    }
  }

  private void closeConnection() {
    Connection current = connection;
    connection = null;
    if (current != null) {
      try {
        current.close();
      } catch (SQLException e) {
        log.debug("closing the LISTEN connection failed", e);
      }
    }
  }

  private static void wakeSafely(Runnable wake) {
    try {
      wake.run();
    } catch (VirtualMachineError fatal) {
      throw fatal;
    } catch (RuntimeException | Error e) {
      log.warn("a subscriber's wake-up callback failed", e);
    }
  }

  private boolean sleep(Duration duration) {
    try {
      Thread.sleep(duration.toMillis());
      return true;
    } catch (InterruptedException e) {
      return false;
    }
  }
}
