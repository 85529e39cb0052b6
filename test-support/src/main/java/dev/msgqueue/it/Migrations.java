package dev.msgqueue.it;

import java.sql.Connection;
import java.util.Map;
import liquibase.Scope;
import liquibase.UpdateSummaryOutputEnum;
import liquibase.command.CommandScope;
import liquibase.command.core.RollbackCountCommandStep;
import liquibase.command.core.UpdateCommandStep;
import liquibase.command.core.helpers.DbUrlConnectionArgumentsCommandStep;
import liquibase.command.core.helpers.ShowSummaryArgument;
import liquibase.database.Database;
import liquibase.database.DatabaseFactory;
import liquibase.database.jvm.JdbcConnection;
import liquibase.exception.LiquibaseException;
import liquibase.resource.ClassLoaderResourceAccessor;
import liquibase.ui.LoggerUIService;

/**
 * Applies and rolls back the msgqueue changelog from the msgqueue-migrations jar on the classpath, as a consuming
 * service does (Liquibase's CommandScope API). Liquibase's console output (the update summary) goes to its log
 * instead, so it stays out of test and benchmark reports. Liquibase leaves the connection with autocommit off.
 */
public final class Migrations {
  /** The changelog's classpath location, the one a service includes from its own changelog. */
  public static final String CHANGELOG = "db/changelog/msgqueue/db.changelog-master.xml";

  private Migrations() { }

  public static void update(Connection connection) {
    update(connection, CHANGELOG);
  }

  /** Applies {@code changelog}, a classpath resource (a service's own changelog that includes ours, say). */
  public static void update(Connection connection, String changelog) {
    run(connection, UpdateCommandStep.COMMAND_NAME, changelog, null);
  }

  public static void rollback(Connection connection, int changeSets) {
    run(connection, RollbackCountCommandStep.COMMAND_NAME, CHANGELOG, changeSets);
  }

  /**
   * One Liquibase command at a time in this JVM. Liquibase keeps its changelog-lock bookkeeping JVM-wide: an update
   * that finishes resets every database's lock service, so another update still running on another database skips
   * releasing its lock, and the next command on that database waits out the lock (5 minutes) and fails. Test classes
   * run in parallel and each migrates its own database.
   */
  private static final Object ONE_COMMAND_AT_A_TIME = new Object();

  private static void run(Connection connection, String[] command, String changelog, Integer count) {
    synchronized (ONE_COMMAND_AT_A_TIME) {
      runAlone(connection, command, changelog, count);
    }
  }

  private static void runAlone(Connection connection, String[] command, String changelog, Integer count) {
    try {
      Database database = DatabaseFactory.getInstance()
          .findCorrectDatabaseImplementation(new JdbcConnection(connection));
      Map<String, Object> scopeValues = Map.of(
          Scope.Attr.resourceAccessor.name(), new ClassLoaderResourceAccessor(),
          Scope.Attr.ui.name(), new LoggerUIService());
      Scope.child(scopeValues, () -> {
        CommandScope scope = new CommandScope(command)
            .addArgumentValue(DbUrlConnectionArgumentsCommandStep.DATABASE_ARG, database)
            .addArgumentValue(UpdateCommandStep.CHANGELOG_FILE_ARG, changelog);
        if (count != null) {
          scope.addArgumentValue(RollbackCountCommandStep.COUNT_ARG, count);
        } else {
          scope.addArgumentValue(ShowSummaryArgument.SHOW_SUMMARY_OUTPUT, UpdateSummaryOutputEnum.LOG);
        }
        scope.execute();
      });
    } catch (LiquibaseException e) {
      throw new IllegalStateException("liquibase " + String.join(" ", command) + " of " + changelog + " failed: "
          + e.getMessage(), e);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
