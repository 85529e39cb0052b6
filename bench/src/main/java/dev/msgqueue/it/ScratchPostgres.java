package dev.msgqueue.it;

import java.io.IOException;
import java.time.Duration;
import java.util.Map;

/**
 * Runs an embedded PostgreSQL 17 until this process is stopped (Ctrl-C), for a task that needs a throwaway server on a
 * machine without one, such as regenerating the typed tables (docs/development.md). Prints the JDBC URL of its empty
 * {@code postgres} database on the first line of standard output. The benchmark jar carries it:
 * {@code java -cp bench/target/msgqueue-bench.jar dev.msgqueue.it.ScratchPostgres}.
 */
public final class ScratchPostgres {
  private ScratchPostgres() { }

  public static void main(String[] args) throws IOException, InterruptedException {
    PostgresServer server = PostgresServer.embedded(Map.of(), Duration.ofSeconds(60));
    Runtime.getRuntime().addShutdownHook(new Thread(server::close, "scratch-postgres-stop"));
    // A command-line tool's output, not library logging: the URL is what the user copies.
    System.out.println(server.adminUrl().value());
    System.out.flush();
    Thread.currentThread().join();
  }
}
