package dev.msgqueue.bench;

import java.sql.Connection;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * A session of the benchmark database that watches a measured run from a daemon thread of its own, so that its
 * queries never run on the measured connections and its backend can be left out of the run's server CPU
 * ({@link #pid()}). Closing it stops the thread and rethrows what the thread failed with.
 */
abstract class SamplingSession implements AutoCloseable {
  private final Connection connection;
  private final DSLContext session;
  private final int pid;
  private final Thread thread;
  private volatile Exception failure;

  SamplingSession(BenchDatabase database, String threadName) throws Exception {
    this.connection = database.connect();
    this.session = DSL.using(connection, SQLDialect.POSTGRES);
    this.pid = BenchSql.backendPid(session);
    this.thread = new Thread(this::runSampling, threadName);
    thread.setDaemon(true);
  }

  /** Samples until interrupted (or done); runs on the session's own thread. */
  abstract void sample() throws Exception;

  final DSLContext session() {
    return session;
  }

  /** The session's backend, whose CPU time is not the measured run's. */
  final int pid() {
    return pid;
  }

  final void start() {
    thread.start();
  }

  private void runSampling() {
    try {
      sample();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Exception e) {
      failure = e;
    }
  }

  @Override
  public void close() throws Exception {
    thread.interrupt();
    thread.join(10_000);
    connection.close();
    if (failure != null) {
      throw failure;
    }
  }
}
