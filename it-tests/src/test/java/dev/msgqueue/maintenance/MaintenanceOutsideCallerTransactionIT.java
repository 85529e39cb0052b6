package dev.msgqueue.maintenance;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.HousekeepingRun;
import dev.msgqueue.HousekeepingRun.Outcome;
import dev.msgqueue.MicrometerMetrics;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.jooq.ConnectionProvider;
import org.jooq.ContextTransactionalRunnable;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.impl.DataSourceConnectionProvider;
import org.jooq.impl.DefaultConfiguration;
import org.jooq.impl.ThreadLocalTransactionProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Maintenance (reap, cleanup, a housekeeper tick with its statistics) on a repository created over a context that
 * joins the caller's transaction runs on the repository's own connections: it neither commits nor breaks the caller's
 * transaction, so a publish the caller rolls back is gone.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class MaintenanceOutsideCallerTransactionIT {
  private final TestDatabase db;
  private final QueueRows rows;
  private final MsgQueueConfig config = MsgQueueConfig.defaults();

  MaintenanceOutsideCallerTransactionIT(TestDatabase db) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
  }

  /** Idle and expired rows, so that each maintenance act has real work to commit. */
  private void leaveWorkForMaintenance(String prefix) {
    MsgQueueRepository setup = MsgQueueRepository.create(db.dataSource(), config);
    setup.bindQueue(QueueSpec.autoDeleted(prefix + "-idle"));
    rows.makeIdle(prefix + "-idle", Duration.ofHours(2));
    QueueSpec expiring = QueueSpec.durable(prefix + "-expiring");
    setup.bindQueue(expiring);
    setup.publishBatch(expiring, List.of("{}", "{}"));
    rows.expireItems(expiring.name());
  }

  /** Runs every maintenance act the repository offers, as a caller might inside its transaction. */
  private static HousekeepingRun runAllMaintenance(MsgQueueRepository repository) {
    repository.reapIdleQueues();
    repository.cleanUpExpiredMessages();
    return Housekeeper.builder(repository).build().runOnce();
  }

  private static void assertCompleted(HousekeepingRun run) {
    assertThat(run.failure()).isNull();
    assertThat(run.outcome()).isEqualTo(Outcome.COMPLETED);
  }

  @Test
  void threadBoundConnectionProvider_maintenanceLeavesTheCallersTransactionToTheCaller() throws SQLException {
    leaveWorkForMaintenance("bound");
    ThreadBoundConnections joining = new ThreadBoundConnections(db.dataSource());
    MsgQueueRepository repository = MsgQueueRepository.create(
        DSL.using(joining, SQLDialect.POSTGRES), db.dataSource(), config);
    MicrometerMetrics.bind(new SimpleMeterRegistry(), repository);
    QueueSpec durable = QueueSpec.durable("bound-durable");
    repository.bindQueue(durable);

    long id;
    HousekeepingRun run;
    try (Connection caller = db.dataSource().getConnection()) {
      caller.setAutoCommit(false);
      joining.bind(caller);
      try {
        id = repository.publish(durable, "{}");
        run = runAllMaintenance(repository);
        assertThat(caller.getAutoCommit()).as("the caller's transaction is still open").isFalse();
      } finally {
        joining.unbind();
        caller.rollback();
      }
    }

    assertThat(rows.item(id)).as("rolled back with the caller").isNull();
    assertThat(rows.itemsOf(durable.name())).isZero();
    assertCompleted(run);
  }

  @Test
  void jooqThreadLocalTransactionProvider_maintenanceLeavesTheCallersTransactionToTheCaller() {
    leaveWorkForMaintenance("threadlocal");
    DSLContext joining = DSL.using(new DefaultConfiguration()
        .set(SQLDialect.POSTGRES)
        .set(new ThreadLocalTransactionProvider(new DataSourceConnectionProvider(db.dataSource()))));
    MsgQueueRepository repository = MsgQueueRepository.create(joining, db.dataSource(), config);
    MicrometerMetrics.bind(new SimpleMeterRegistry(), repository);
    QueueSpec durable = QueueSpec.durable("threadlocal-durable");
    repository.bindQueue(durable);
    AtomicLong id = new AtomicLong();
    AtomicReference<HousekeepingRun> run = new AtomicReference<>();

    assertThatThrownBy(() -> joining.transaction((ContextTransactionalRunnable) () -> {
      id.set(repository.publish(durable, "{}"));
      run.set(runAllMaintenance(repository));
      throw new IllegalStateException("the caller rolls back");
    })).hasMessage("the caller rolls back");

    assertThat(id.get()).isPositive();
    assertThat(rows.item(id.get())).as("rolled back with the caller").isNull();
    assertThat(rows.itemsOf(durable.name())).isZero();
    assertCompleted(run.get());
  }

  /**
   * Hands out the connection bound to the current thread (the caller's open transaction) and leaves it open on
   * release, as Spring's {@code TransactionAwareDataSourceProxy} does; a thread with none bound gets a pooled one.
   */
  private static final class ThreadBoundConnections implements ConnectionProvider {
    private final DataSource pool;
    private final ThreadLocal<Connection> bound = new ThreadLocal<>();

    ThreadBoundConnections(DataSource pool) {
      this.pool = pool;
    }

    void bind(Connection connection) {
      bound.set(connection);
    }

    void unbind() {
      bound.remove();
    }

    @Override
    public Connection acquire() {
      Connection connection = bound.get();
      if (connection != null) {
        return connection;
      }
      try {
        return pool.getConnection();
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
    }

    @Override
    public void release(Connection connection) {
      if (connection == bound.get()) {
        return;
      }
      try {
        connection.close();
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
    }
  }
}
