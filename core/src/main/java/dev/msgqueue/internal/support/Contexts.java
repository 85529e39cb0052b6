package dev.msgqueue.internal.support;

import dev.msgqueue.MsgQueueConfig;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DefaultConnectionProvider;

/** The contexts msgqueue runs its statements on, derived from the ones a service hands it. */
public final class Contexts {
  private Contexts() { }

  /**
   * The caller's context (same connection or data source) with every statement bounded by the statement timeout and
   * its failures translated into msgqueue's typed exceptions.
   *
   * @throws IllegalArgumentException for a null context or one whose dialect is not PostgreSQL
   */
  public static DSLContext bounded(DSLContext ctx, String name, MsgQueueConfig config) {
    Arguments.requireNonNull(ctx, name);
    if (ctx.dialect().family() != SQLDialect.POSTGRES) {
      throw new IllegalArgumentException("msgqueue needs the POSTGRES dialect, the context has " + ctx.dialect());
    }
    return ctx.configuration()
        .deriveAppending(new StatementDeadlines(config.statementTimeout()), new FailureTranslation())
        .dsl();
  }

  /**
   * Whether {@code ctx} runs its statements on one connection it was given ({@code DSL.using(connection)}), which no
   * other thread may use meanwhile, rather than on connections it takes from a data source or pool.
   */
  public static boolean overOneConnection(DSLContext ctx) {
    return ctx.configuration().connectionProvider() instanceof DefaultConnectionProvider;
  }
}
