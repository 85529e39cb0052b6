package dev.msgqueue.internal.sql;

import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.val;

import java.time.Duration;
import org.jooq.DSLContext;
import org.jooq.impl.SQLDataType;

/** Settings a transaction gives itself before its statements run. */
public final class SessionSettings {
  private SessionSettings() { }

  /** Bounds every lock wait in the current transaction (PostgreSQL's {@code SET LOCAL lock_timeout}). */
  public static void limitLockWaits(DSLContext tx, Duration lockTimeout) {
    tx.select(function("set_config", SQLDataType.VARCHAR, inline("lock_timeout"), val(lockTimeout.toMillis() + "ms"),
        inline(true))).fetch();
  }}
