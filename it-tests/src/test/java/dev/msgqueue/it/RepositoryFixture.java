package dev.msgqueue.it;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.jooq.tables.records.MessageQueueItemRecord;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.jooq.ExecuteListener;
import org.jooq.TransactionListener;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.impl.DefaultExecuteListenerProvider;
import org.jooq.impl.DefaultTransactionListenerProvider;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The setup the ITs share: the class's own migrated {@link TestDatabase}, a {@link MsgQueueRepository} over it (with
 * the default config unless the test names one), and its {@link QueueRows}. A pooled fixture gives the repository a
 * connection pool of its own; after each test, what the test handed to {@link #closeLater} is closed in reverse order,
 * then the pool.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
public abstract class RepositoryFixture {
  protected final TestDatabase db;
  protected final QueueRows rows;
  protected final MsgQueueConfig config;
  protected final MsgQueueRepository repository;
  /** The repository's pool, or null when it runs on the database's plain data source. */
  protected final HikariDataSource pool;
  private final List<AutoCloseable> toClose = new ArrayList<>();

  /** A repository on the database's plain data source (a new connection per use), with the default config. */
  protected RepositoryFixture(TestDatabase db) {
    this(db, MsgQueueConfig.defaults());
  }

  /** A repository on the database's plain data source, with {@code config}. */
  protected RepositoryFixture(TestDatabase db, MsgQueueConfig config) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
    this.pool = null;
    this.config = config;
    this.repository = MsgQueueRepository.create(db.dataSource(), config);
  }

  /** A repository on a pool of at most {@code poolSize} connections, closed after each test. */
  protected RepositoryFixture(TestDatabase db, int poolSize) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
    this.pool = db.pool(poolSize);
    this.config = MsgQueueConfig.defaults();
    this.repository = MsgQueueRepository.create(pool, config);
  }

  /**
   * A repository over {@code pool} whose every statement {@code listener} sees: for tests that count, hold or fail
   * the library's statements at an exact point.
   */
  public static MsgQueueRepository listenedRepository(
      DataSource pool, ExecuteListener listener, MsgQueueConfig config) {
    return MsgQueueRepository.create(
        DSL.using(pool, SQLDialect.POSTGRES).configuration()
            .derive(new DefaultExecuteListenerProvider(listener)).dsl(),
        config);
  }

  /**
   * {@link #listenedRepository(DataSource, ExecuteListener, MsgQueueConfig)} whose transactions {@code transactions}
   * sees too: for tests that act when a statement's transaction commits (a take's), not when the statement ran.
   */
  public static MsgQueueRepository listenedRepository(
      DataSource pool, ExecuteListener listener, TransactionListener transactions, MsgQueueConfig config) {
    return MsgQueueRepository.create(
        DSL.using(pool, SQLDialect.POSTGRES).configuration()
            .derive(new DefaultExecuteListenerProvider(listener))
            .derive(new DefaultTransactionListenerProvider(transactions)).dsl(),
        config);
  }

  /** Closes {@code closeable} after the test, before the pool. */
  protected final <T extends AutoCloseable> T closeLater(T closeable) {
    toClose.add(closeable);
    return closeable;
  }

  @AfterEach
  final void closeAll() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    if (pool != null) {
      pool.close();
    }
  }

  /** A durable queue, bound. */
  protected final QueueSpec bound(String name) {
    QueueSpec spec = QueueSpec.durable(name);
    repository.bindQueue(spec);
    return spec;
  }

  /** Makes the queue idle for two hours and reaps: the reaper must have deleted it. */
  protected final void reap(String queue) {
    rows.makeIdle(queue, Duration.ofHours(2));
    assertThat(repository.reapIdleQueues()).contains(queue);
  }

  protected final MessageQueueItemRecord row(long id) {
    return rows.item(id);
  }
}
