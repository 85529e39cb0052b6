package dev.msgqueue.internal.sql;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.jooq.DSLContext;
import org.jooq.Param;
import org.jooq.Query;
import org.jooq.ResultQuery;
import org.jooq.conf.SettingsTools;

/**
 * The hot statements (claim, ack) built with jOOQ's typed API and rendered once per shape and configuration, then run
 * as that SQL text with each call's bind values, through the same context (so its listeners, statement deadlines and
 * failure translation apply as to any statement).
 *
 * <p>Why: building and rendering the typed query was most of the client's time per claim or ack of 100 messages
 * (profiled in the benchmark's one-thread claim+ack loop). Every call of one shape renders the same text; only its
 * bind values differ.
 *
 * <p>The text is cached in the {@link org.jooq.Configuration#data() data} of the context's configuration: the
 * rendering depends on the configuration's dialect and settings (a schema mapping, say), and a repository runs its
 * claims and acks on one configuration for its whole life. A context derived per call renders once per call, as
 * without the cache.
 */
public final class RenderedStatements {
  // JFR of the benchmark's one-thread claim+ack loop before the cache: query construction and rendering about 55% of
  // the loop thread's samples, result mapping 11%, pgjdbc 9%.
  private static final String CACHE = RenderedStatements.class.getName();

  private RenderedStatements() { }

  /**
   * The statement of {@code shape}, bound to {@code binds}: {@code typed} is built and rendered on the first call of
   * {@code shape} on this configuration only, and must bind exactly {@code binds}, in this order (checked then).
   * A bind is a plain value, which jOOQ binds by its Java type, or a {@link Param} to give it a type. jOOQ writes an
   * array bind as {@code cast(? as type[])} in any statement, so an array arrives cast twice, which PostgreSQL folds
   * away when it parses the statement.
   *
   * @param shape everything the rendered text depends on besides the bind values (inlined limits, which columns)
   */
  public static ResultQuery<?> resultQuery(
      DSLContext ctx, Object shape, Supplier<? extends Query> typed, Object... binds) {
    return ctx.resultQuery(sql(ctx, shape, typed, binds), binds);
  }

  /** Like {@link #resultQuery} for a statement whose result is not read: @return the statement, to execute */
  public static Query query(DSLContext ctx, Object shape, Supplier<? extends Query> typed, Object... binds) {
    return ctx.query(sql(ctx, shape, typed, binds), binds);
  }

  private static String sql(DSLContext ctx, Object shape, Supplier<? extends Query> typed, Object... binds) {
    @SuppressWarnings("unchecked")
    Map<Object, String> cache = (Map<Object, String>) ctx.configuration().data()
        .computeIfAbsent(CACHE, key -> new ConcurrentHashMap<Object, String>());
    String sql = cache.get(shape);
    if (sql == null) {
      Query query = typed.get();
      List<Object> expected = new ArrayList<>(binds.length);
      for (Object bind : binds) {
        expected.add(bind instanceof Param<?> param ? param.getValue() : bind);
      }
      if (!sameValues(query.getBindValues(), expected)) {
        throw new IllegalStateException("the statement of " + shape + " binds " + query.getBindValues()
            + ", not the values it is run with: " + expected);
      }
      // Formatted, as docs/statements.sql shows it: the text is sent once per connection (pgjdbc then runs the
      // server-side prepared statement by name), so the whitespace costs nothing per call.
      sql = ctx.configuration().derive(SettingsTools.clone(ctx.settings()).withRenderFormatted(true)).dsl()
          .render(query);
      cache.put(shape, sql);
    }
    return sql;
  }

  private static boolean sameValues(List<Object> actual, List<Object> expected) {
    if (actual.size() != expected.size()) {
      return false;
    }
    for (int i = 0; i < actual.size(); i++) {
      if (!Objects.deepEquals(actual.get(i), expected.get(i))) {
        return false;
      }
    }
    return true;
  }
}
