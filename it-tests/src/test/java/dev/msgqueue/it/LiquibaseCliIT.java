package dev.msgqueue.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The schema applies through the Liquibase command line too, with the changelog read from the msgqueue-migrations
 * jar on the classpath: the CLI's own entry point, in a JVM of its own.
 */
class LiquibaseCliIT {

  @Test
  void updateThroughTheCommandLineAppliesTheChangelogFromTheJar(@TempDir Path tmp) throws Exception {
    try (TestDatabase db = TestDatabase.createEmpty("liquibase-cli")) {
      LiquibaseCli cli = LiquibaseCli.update(db.jdbcUrl(), tmp.resolve("liquibase.out"));

      assertThat(cli.exitCode()).as("exit code; output:%n%s", cli.output()).isZero();
      assertThat(MigrationsIT.tableNames(db.dsl())).contains("MessageQueue", "MessageQueueItem");
      MigrationsIT.assertAppliedFresh(MigrationsIT.changeLog(db.dsl()));
    }
  }
}
