package dev.msgqueue.internal.consume;

import java.lang.reflect.Method;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.OptionalInt;
import javax.sql.DataSource;
import org.jooq.ConnectionProvider;
import org.jooq.DSLContext;
import org.jooq.impl.DataSourceConnectionProvider;

/**
 * The pooled connections the held-transaction lanes of one owner (a repository) hold. Each lane holds a connection
 * for its transaction while its handlers run, so lanes must never take the whole pool: the keep-alives, the delivery
 * counts and the service's own work need connections too, and a pool whose every connection a lane holds would make
 * each of them wait out the pool's timeout. The rule, when the pool's maximum size can be read:
 * <ul>
 *   <li>a subscriber starts only if its own lanes ({@code concurrency + 1}) leave at least one connection free;</li>
 *   <li>the lanes of all subscribers of the repository together leave at least one connection free: a lane that
 *       would take the last one does not start, and starts when another lane gives its connection back.</li>
 * </ul>
 * For a data source whose size cannot be read, lanes are not counted (the pool's own timeout bounds every wait).
 */
public final class HeldConnections {
  /** Connections the rule keeps free of lanes. */
  static final int SPARE = 1;
  private static final Map<Object, HeldConnections> BY_OWNER = new IdentityHashMap<>();
  /** The getters of a pool's largest size, in the pools services use: HikariCP, Commons DBCP 2, Tomcat JDBC, c3p0. */
  private static final String[] MAXIMUM_GETTERS = {"getMaximumPoolSize", "getMaxTotal", "getMaxActive", "getMaxPoolSize"};

  private final Object owner;
  /** How many lanes may hold a connection at once, or -1 if the pool's size is not known. */
  private final int lanes;
  private int held; // guarded by this
  private int users; // guarded by BY_OWNER
  private final Deque<Runnable> waiting = new ArrayDeque<>(); // guarded by this

  private HeldConnections(Object owner, OptionalInt poolSize) {
    this.owner = owner;
    this.lanes = poolSize.isPresent() ? Math.max(0, poolSize.getAsInt() - SPARE) : -1;
  }

  /**
   * The connections of {@code owner}'s pool ({@code pool}: the repository's own connections), for a subscriber of
   * {@code queue} whose lanes are {@code subscriberLanes}; every call needs one {@link #release()}.
   *
   * @throws IllegalStateException if the pool's maximum is known and leaves no connection free beside that
   *     subscriber's lanes
   */
  public static HeldConnections acquire(Object owner, DSLContext pool, int subscriberLanes, String queue) {
    OptionalInt maximum = maximumPoolSize(pool);
    if (maximum.isPresent() && subscriberLanes + SPARE > maximum.getAsInt()) {
      throw new IllegalStateException("the held-transaction subscriber of \"" + queue + "\" holds up to "
          + subscriberLanes + " pooled connections at once (one per running handler, and one batch locked ahead),"
          + " and " + SPARE + " more must stay free: the pool needs at least " + (subscriberLanes + SPARE)
          + " connections, and its maximum is " + maximum.getAsInt() + ". Raise the pool's maximum size, lower the"
          + " concurrency, or use ConsumeMode.LEASE");
    }
    synchronized (BY_OWNER) {
      HeldConnections connections = BY_OWNER.computeIfAbsent(owner, key -> new HeldConnections(key, maximum));
      connections.users++;
      return connections;
    }
  }

  /** Connections not counted: for a pool whose size is not known, and for tests. */
  static HeldConnections uncounted() {
    HeldConnections connections = new HeldConnections(new Object(), OptionalInt.empty());
    connections.users = 1;
    return connections;
  }

  /** Gives up one use; the last one forgets the owner. */
  public void release() {
    synchronized (BY_OWNER) {
      if (--users == 0) {
        BY_OWNER.remove(owner);
      }
    }
  }

  /**
   * Takes a connection for a lane, if one may be taken now. If not, {@code whenFree} runs once after another lane
   * gives one back (on that lane's thread), unless it waits already.
   *
   * @return whether the lane may start
   */
  boolean tryHold(Runnable whenFree) {
    if (lanes < 0) {
      return true;
    }
    synchronized (this) {
      if (held < lanes) {
        held++;
        return true;
      }
      if (!waiting.contains(whenFree)) {
        waiting.add(whenFree);
      }
      return false;
    }
  }

  /** A lane gave its connection back: the longest-waiting subscriber may start a lane. */
  void giveBack() {
    if (lanes < 0) {
      return;
    }
    Runnable next;
    synchronized (this) {
      held--;
      next = waiting.poll();
    }
    if (next != null) {
      next.run();
    }
  }

  /** Stops waiting for a connection (a subscriber closing). */
  void stopWaiting(Runnable whenFree) {
    synchronized (this) {
      waiting.remove(whenFree);
    }
  }

  /** The maximum size of the pool behind {@code ctx}, when it is a pool whose size can be read. */
  static OptionalInt maximumPoolSize(DSLContext ctx) {
    ConnectionProvider provider = ctx.configuration().connectionProvider();
    if (!(provider instanceof DataSourceConnectionProvider dataSourceProvider)) {
      return OptionalInt.empty();
    }
    return maximumPoolSize(dataSourceProvider.dataSource());
  }

  static OptionalInt maximumPoolSize(DataSource dataSource) {
    for (String getter : MAXIMUM_GETTERS) {
      try {
        Method method = dataSource.getClass().getMethod(getter);
        Object value = method.invoke(dataSource);
        if (value instanceof Integer size && size > 0) {
          return OptionalInt.of(size);
        }
      } catch (ReflectiveOperationException | RuntimeException e) {
        // not this pool's getter
      }
    }
    return OptionalInt.empty();
  }
}
