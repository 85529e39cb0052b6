package dev.msgqueue.it;

import static org.assertj.core.api.Assertions.assertThat;

import liquibase.integration.commandline.LiquibaseCommandLine;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.parallel.Isolated;

/**
 * The schema applies through the Liquibase command line too, with the changelog read from the msgqueue-migrations
 * jar on the classpath: the same entry point the {@code liquibase} CLI runs.
 *
 * <p>Isolated: the CLI builds its argument model from Liquibase's global scope, which other test classes' Liquibase
 * runs change concurrently (seen as "Unexpected argument(s): --changelog-file" under parallel classes).
 */
@Isolated
class LiquibaseCliIT {

  @Test
  void updateThroughTheCommandLineAppliesTheChangelogFromTheJar() {
    try (TestDatabase db = TestDatabase.createEmpty("liquibase-cli")) {
      int exitCode = new LiquibaseCommandLine().execute(new String[] {
          "--show-banner=false",
          "--url=" + db.jdbcUrl(),
          "update",
          "--changelog-file=" + Migrations.CHANGELOG});

      assertThat(exitCode).isZero();
      assertThat(MigrationsIT.tableNames(db.dsl())).contains("MessageQueue", "MessageQueueItem");
      assertThat(MigrationsIT.changeLog(db.dsl())).hasSizeGreaterThanOrEqualTo(4)
          .allMatch(row -> row.endsWith("EXECUTED"));
    }
  }
}
