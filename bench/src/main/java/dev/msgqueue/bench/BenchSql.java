package dev.msgqueue.bench;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static org.jooq.impl.DSL.count;
import static org.jooq.impl.DSL.currentOffsetDateTime;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import java.io.IOException;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.jooq.types.DayToSecond;

/**
 * The benchmark's own statements: the server-side clock every strategy uses, and reads of PostgreSQL's statistics
 * views. The catalog views have no generated classes, so they are addressed by quoted name through jOOQ (still
 * rendered and bound by jOOQ, no SQL strings).
 */
final class BenchSql {
  private static final Table<Record> PG_STAT_ACTIVITY = table(name("pg_catalog", "pg_stat_activity"));
  private static final Table<Record> PG_STAT_USER_TABLES = table(name("pg_catalog", "pg_stat_user_tables"));

  private BenchSql() { }

  /**
   * {@code timezone('UTC', now())}, the expression core's statements use for every timestamp (the columns are
   * {@code timestamp} without time zone), so all strategies write the same values the same way.
   */
  static Field<LocalDateTime> utcNow() {
    return function("timezone", SQLDataType.LOCALDATETIME, inline("UTC"), currentOffsetDateTime());
  }

  static Field<LocalDateTime> utcNowPlus(Duration duration) {
    return utcNow().plus(val(DayToSecond.valueOf(duration)));
  }

  static Field<LocalDateTime> utcNowMinus(Duration duration) {
    return utcNow().minus(val(DayToSecond.valueOf(duration)));
  }

  /**
   * The server's WAL insert position, in bytes since 0/0. Not {@code pg_current_wal_lsn}, the write position: with
   * {@code synchronous_commit} off (the embedded server) commits do not write the WAL, the WAL writer does every
   * 200 ms, so a short window could see none of its own WAL.
   */
  static long currentWalBytes(DSLContext ctx) {
    BigDecimal bytes = ctx.select(function("pg_wal_lsn_diff", SQLDataType.NUMERIC,
            function("pg_current_wal_insert_lsn", SQLDataType.OTHER), inline("0/0")))
        .fetchOne(0, BigDecimal.class);
    return bytes.longValueExact();
  }

  /** Rows counted by one {@link #serverSpeedProbeMillis} run: about 100-150 ms of one core here. */
  private static final int SPEED_PROBE_ROWS = 3_000_000;

  /**
   * How fast the server's CPU is right now: the median of three runs, in milliseconds, of one fixed count over a
   * set-returning function in the select list (streamed, so no tuplestore and no I/O: CPU only). On a shared
   * virtual machine the same drain's server CPU per message moves with what other tenants run; this probe, taken
   * beside each drain, tells the machine's speed apart from the library's.
   */
  static double serverSpeedProbeMillis(DSLContext ctx) {
    double[] millis = new double[3];
    for (int i = 0; i < millis.length; i++) {
      long start = System.nanoTime();
      ctx.select(count()).from(ctx.select(function("generate_series", SQLDataType.INTEGER, inline(1),
          inline(SPEED_PROBE_ROWS)).as("g")).asTable("s")).fetchOne(0, Long.class);
      millis[i] = (System.nanoTime() - start) / 1e6;
    }
    Arrays.sort(millis);
    return millis[1];
  }

  /** Linux's USER_HZ, the unit of {@code /proc/<pid>/stat} CPU times, on every common architecture. */
  private static final long CLOCK_TICKS_PER_SECOND = 100;

  static int backendPid(DSLContext ctx) {
    return ctx.select(function("pg_backend_pid", SQLDataType.INTEGER)).fetchOne(0, Integer.class);
  }

  /**
   * Sessions of this database waiting for a heavyweight lock right now, by {@code wait_event} (tuple,
   * transactionid, extend, ...).
   */
  static Map<String, Integer> sessionsWaitingOnLocks(DSLContext ctx) {
    Field<String> waitEvent = field(name("wait_event"), String.class);
    Map<String, Integer> waiting = new LinkedHashMap<>();
    ctx.select(waitEvent, count())
        .from(PG_STAT_ACTIVITY)
        .where(field(name("datname"), String.class).eq(function("current_database", SQLDataType.VARCHAR)))
        .and(field(name("wait_event_type"), String.class).eq("Lock"))
        .groupBy(waitEvent)
        .forEach(row -> waiting.put(row.value1(), row.value2()));
    return waiting;
  }

  static int liveBackends(DSLContext ctx, Collection<Integer> pids) {
    return ctx.select(count())
        .from(PG_STAT_ACTIVITY)
        .where(field(name("pid"), Integer.class).in(pids))
        .fetchOne(0, Integer.class);
  }

  /** The other sessions of this database right now (a cell's pool, say), by backend pid. */
  static List<Integer> otherBackends(DSLContext ctx) {
    return ctx.select(field(name("pid"), Integer.class))
        .from(PG_STAT_ACTIVITY)
        .where(field(name("datname"), String.class).eq(DSL.currentCatalog()))
        .and(field(name("pid"), Integer.class).ne(function("pg_backend_pid", SQLDataType.INTEGER)))
        .fetch(0, Integer.class);
  }

  /**
   * The CPU time the given server backends have used so far (user + system, from {@code /proc/<pid>/stat}), or -1 if
   * the server is not on this machine or its processes cannot be read. Per message it is the server's share of a
   * cell, which a shared, noisy machine does not distort the way it distorts the rate.
   */
  static long backendCpuNanos(Collection<Integer> pids) {
    long ticks = 0;
    for (int pid : pids) {
      try {
        String stat = Files.readString(Path.of("/proc", Integer.toString(pid), "stat"));
        // Fields after the command name in parentheses: state is the 3rd field, utime the 14th, stime the 15th.
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        ticks += Long.parseLong(fields[11]) + Long.parseLong(fields[12]);
      } catch (IOException | RuntimeException e) {
        return -1;
      }
    }
    return ticks * (1_000_000_000L / CLOCK_TICKS_PER_SECOND);
  }

  /** Cumulative row writes to {@code "MessageQueue"} since the statistics were last reset. */
  static ParentRowCounters parentRowCounters(DSLContext ctx) {
    Field<Long> updated = field(name("n_tup_upd"), Long.class);
    Field<Long> inserted = field(name("n_tup_ins"), Long.class);
    Field<Long> deleted = field(name("n_tup_del"), Long.class);
    Record counters = ctx.select(updated, inserted, deleted)
        .from(PG_STAT_USER_TABLES)
        .where(field(name("relname"), String.class).eq(MESSAGE_QUEUE.getName()))
        .and(field(name("schemaname"), String.class).eq(function("current_schema", SQLDataType.VARCHAR)))
        .fetchOne();
    if (counters == null) {
      throw new IllegalStateException("pg_stat_user_tables has no row for \"" + MESSAGE_QUEUE.getName() + "\"");
    }
    return new ParentRowCounters(counters.get(updated), counters.get(inserted), counters.get(deleted));
  }

  /**
   * Flushes this session's pending table statistics at its next idle point (PostgreSQL 15+), so that counters read
   * by another session include this session's writes.
   */
  static void flushStatistics(DSLContext ctx, int serverVersionNum) {
    if (serverVersionNum >= 150000) {
      ctx.select(function("pg_stat_force_next_flush", SQLDataType.OTHER)).fetch();
    }
  }

  static int serverVersionNum(DSLContext ctx) {
    return Integer.parseInt(setting(ctx, "server_version_num"));
  }

  static String setting(DSLContext ctx, String settingName) {
    return ctx.select(function("current_setting", SQLDataType.VARCHAR, val(settingName))).fetchOne(0, String.class);
  }

  /** The settings that shape these figures, as PostgreSQL reports them (with units). */
  static Map<String, String> relevantSettings(DSLContext ctx) {
    Map<String, String> settings = new LinkedHashMap<>();
    settings.put("version", ctx.select(function("version", SQLDataType.VARCHAR)).fetchOne(0, String.class));
    for (String setting : new String[] {"max_connections", "shared_buffers", "synchronous_commit", "fsync",
        "full_page_writes", "wal_level", "wal_buffers", "max_wal_size", "checkpoint_timeout", "autovacuum"}) {
      settings.put(setting, setting(ctx, setting));
    }
    return settings;
  }

  record ParentRowCounters(long updates, long inserts, long deletes) {
    ParentRowCounters minus(ParentRowCounters before) {
      return new ParentRowCounters(updates - before.updates, inserts - before.inserts, deletes - before.deletes);
    }
  }
}
