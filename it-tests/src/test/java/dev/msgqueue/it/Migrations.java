package dev.msgqueue.it;

import java.sql.Connection;
import liquibase.Scope;
import liquibase.command.CommandScope;
import liquibase.command.core.RollbackCountCommandStep;
import liquibase.command.core.UpdateCommandStep;
import liquibase.command.core.helpers.DbUrlConnectionArgumentsCommandStep;
import liquibase.database.Database;
import liquibase.database.DatabaseFactory;
import liquibase.database.jvm.JdbcConnection;
import liquibase.exception.LiquibaseException;
import liquibase.resource.ClassLoaderResourceAccessor;

/** Applies and rolls back the msgqueue changelog from the msgqueue-migrations jar, as a consuming service would. */
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

  private static void run(Connection connection, String[] command, String changelog, Integer count) {
    try {
      Database database = DatabaseFactory.getInstance()
          .findCorrectDatabaseImplementation(new JdbcConnection(connection));
      Scope.child(Scope.Attr.resourceAccessor.name(), new ClassLoaderResourceAccessor(), () -> {
        CommandScope scope = new CommandScope(command)
            .addArgumentValue(DbUrlConnectionArgumentsCommandStep.DATABASE_ARG, database)
            .addArgumentValue(UpdateCommandStep.CHANGELOG_FILE_ARG, changelog);
        if (count != null) {
          scope.addArgumentValue(RollbackCountCommandStep.COUNT_ARG, count);
        }
        scope.execute();
      });
    } catch (LiquibaseException e) {
      throw new IllegalStateException("liquibase " + String.join(" ", command) + " failed", e);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
