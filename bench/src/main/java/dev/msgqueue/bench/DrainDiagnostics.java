package dev.msgqueue.bench;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.coalesce;
import static org.jooq.impl.DSL.count;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.sum;
import static org.jooq.impl.DSL.table;

import java.math.BigDecimal;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record;
import org.jooq.Table;
import org.jooq.impl.SQLDataType;

/**
 * The server's counters around one drain, to explain why one drain of the same preload is slower than another: WAL
 * (bytes, full-page images, records, waits for a full WAL buffer, segment files in pg_wal), checkpoints, buffers the
 * backends had to write themselves, and the item table's buffer hits and reads (heap and indexes) and sizes. WAL,
 * checkpoints and backend writes are server-wide; the block counters are the item table's (the drain's backends
 * report them when they exit, so read them after the drain's pool is closed).
 */
final class DrainDiagnostics {
  private static final Table<Record> PG_STAT_WAL = table(name("pg_catalog", "pg_stat_wal"));
  private static final Table<Record> PG_STAT_BGWRITER = table(name("pg_catalog", "pg_stat_bgwriter"));
  private static final Table<Record> PG_STAT_CHECKPOINTER = table(name("pg_catalog", "pg_stat_checkpointer"));
  private static final Table<Record> PG_STAT_IO = table(name("pg_catalog", "pg_stat_io"));
  private static final Table<Record> PG_STATIO_USER_TABLES = table(name("pg_catalog", "pg_statio_user_tables"));
  // Plain SQL: a set-returning function without generated classes; jOOQ renders a bare name without the call.
  private static final Table<?> PG_LS_WALDIR = table("pg_catalog.pg_ls_waldir()");

  private DrainDiagnostics() { }

  /** The counters at one moment; {@link #minus} makes a drain's share of them. */
  record Counters(long walBytes, long walRecords, long walFullPageImages, long walBuffersFull, long walFiles,
      long checkpoints, long backendBufferWrites, long heapBlocksHit, long heapBlocksRead, long indexBlocksHit,
      long indexBlocksRead, long tableBytes, long indexBytes) {
    Counters minus(Counters before) {
      return new Counters(walBytes - before.walBytes, walRecords - before.walRecords,
          walFullPageImages - before.walFullPageImages, walBuffersFull - before.walBuffersFull,
          walFiles - before.walFiles, checkpoints - before.checkpoints,
          backendBufferWrites - before.backendBufferWrites, heapBlocksHit - before.heapBlocksHit,
          heapBlocksRead - before.heapBlocksRead, indexBlocksHit - before.indexBlocksHit,
          indexBlocksRead - before.indexBlocksRead, tableBytes, indexBytes);
    }

    long blocks() {
      return heapBlocksHit + heapBlocksRead + indexBlocksHit + indexBlocksRead;
    }
  }

  static Counters read(DSLContext ctx, int serverVersionNum) {
    Record wal = ctx.select(field(name("wal_records"), Long.class), field(name("wal_fpi"), Long.class),
        field(name("wal_buffers_full"), Long.class)).from(PG_STAT_WAL).fetchOne();
    long walFiles = ctx.select(count()).from(PG_LS_WALDIR).fetchOne(0, Long.class);
    long checkpoints;
    long backendWrites;
    if (serverVersionNum >= 170000) {
      checkpoints = ctx.select(field(name("num_timed"), Long.class).plus(field(name("num_requested"), Long.class)))
          .from(PG_STAT_CHECKPOINTER).fetchOne(0, Long.class);
      backendWrites = ctx.select(coalesce(sum(field(name("writes"), Long.class)), BigDecimal.ZERO))
          .from(PG_STAT_IO).where(field(name("backend_type"), String.class).eq(inline("client backend")))
          .fetchOne(0, Long.class);
    } else {
      Record bgwriter = ctx.select(
              field(name("checkpoints_timed"), Long.class).plus(field(name("checkpoints_req"), Long.class)),
              field(name("buffers_backend"), Long.class))
          .from(PG_STAT_BGWRITER).fetchOne();
      checkpoints = bgwriter.get(0, Long.class);
      backendWrites = bgwriter.get(1, Long.class);
    }
    Field<Long> heapHit = field(name("heap_blks_hit"), Long.class);
    Field<Long> heapRead = field(name("heap_blks_read"), Long.class);
    Field<Long> indexHit = field(name("idx_blks_hit"), Long.class);
    Field<Long> indexRead = field(name("idx_blks_read"), Long.class);
    Record blocks = ctx.select(heapHit, heapRead, indexHit, indexRead).from(PG_STATIO_USER_TABLES)
        .where(field(name("relname"), String.class).eq(MESSAGE_QUEUE_ITEM.getName()))
        .and(field(name("schemaname"), String.class).eq(function("current_schema", SQLDataType.VARCHAR)))
        .fetchOne();
    Field<Object> itemTable = function("to_regclass", SQLDataType.OTHER, inline(ctx.render(MESSAGE_QUEUE_ITEM)));
    Record sizes = ctx.select(function("pg_relation_size", SQLDataType.BIGINT, itemTable),
        function("pg_indexes_size", SQLDataType.BIGINT, itemTable)).fetchOne();
    return new Counters(BenchSql.currentWalBytes(ctx), wal.get(0, Long.class), wal.get(1, Long.class),
        wal.get(2, Long.class), walFiles, checkpoints, backendWrites, blocks.get(heapHit), blocks.get(heapRead),
        blocks.get(indexHit), blocks.get(indexRead), sizes.get(0, Long.class), sizes.get(1, Long.class));
  }
}
