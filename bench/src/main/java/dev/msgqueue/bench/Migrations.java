package dev.msgqueue.bench;

import java.sql.Connection;
import java.util.Map;
import liquibase.Scope;
import liquibase.UpdateSummaryOutputEnum;
import liquibase.command.CommandScope;
import liquibase.command.core.UpdateCommandStep;
import liquibase.command.core.helpers.DbUrlConnectionArgumentsCommandStep;
import liquibase.command.core.helpers.ShowSummaryArgument;
import liquibase.database.Database;
import liquibase.database.DatabaseFactory;
import liquibase.database.jvm.JdbcConnection;
import liquibase.resource.ClassLoaderResourceAccessor;
import liquibase.ui.LoggerUIService;

/**
 * Applies the msgqueue changelog from the msgqueue-migrations jar on the classpath, the way a consuming service does
 * (Liquibase's CommandScope API), so the benchmark measures exactly the released schema.
 */
final class Migrations {
  static final String CHANGELOG = "db/changelog/msgqueue/db.changelog-master.xml";

  private Migrations() { }

  /** Applies the changelog on {@code connection}; Liquibase leaves it with autocommit off, so close it afterwards. */
  static void update(Connection connection) {
    try {
      Database database = DatabaseFactory.getInstance()
          .findCorrectDatabaseImplementation(new JdbcConnection(connection));
      // Liquibase prints an update summary to the console by default; the console is the benchmark's report.
      Map<String, Object> scope = Map.of(
          Scope.Attr.resourceAccessor.name(), new ClassLoaderResourceAccessor(),
          Scope.Attr.ui.name(), new LoggerUIService());
      Scope.child(scope, () -> new CommandScope(UpdateCommandStep.COMMAND_NAME)
          .addArgumentValue(DbUrlConnectionArgumentsCommandStep.DATABASE_ARG, database)
          .addArgumentValue(UpdateCommandStep.CHANGELOG_FILE_ARG, CHANGELOG)
          .addArgumentValue(ShowSummaryArgument.SHOW_SUMMARY_OUTPUT, UpdateSummaryOutputEnum.LOG)
          .execute());
    } catch (Exception e) {
      throw new IllegalStateException("liquibase update of " + CHANGELOG + " failed: " + e.getMessage(), e);
    }
  }
}
