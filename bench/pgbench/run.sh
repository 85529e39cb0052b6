#!/usr/bin/env bash
# The consumers' statements alone, without the JVM: each script drains 100,000 messages of one queue in batches of
# 100 with pgbench, at 1 and 4 clients, twice, on DATABASE (a scratch database with msgqueue's schema applied, for
# example one left by `java -jar bench/target/msgqueue-bench.jar --keep-database ...`). Prints msg/s per cell.
# usage: bench/pgbench/run.sh DATABASE [psql connection options...]
set -euo pipefail
cd "$(dirname "$0")"
db=$1; shift
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@" -d "$db"; }
load() {
  psql_ "$@" <<'SQL'
TRUNCATE "MessageQueueItem", "MessageQueueItemFailure";
INSERT INTO "MessageQueue" (name, durable, "autoDeleted", exclusive, "lastActive")
  VALUES ('pgbench', true, false, false, timezone('UTC', now())) ON CONFLICT (name) DO NOTHING;
INSERT INTO "MessageQueueItem" (payload, "readAfter", "expiresAt", "queueId")
  SELECT '{"event": "order.created", "tenant": "tenant-0042", "orderId": 1234567, "items": [{"sku": "A-100", "qty": 2}], "source": "bench"}'::jsonb,
         timezone('UTC', now()) - interval '1 second', timezone('UTC', now()) + interval '1 day', 'pgbench'
    FROM generate_series(1, 100000);
VACUUM ANALYZE "MessageQueueItem";
CHECKPOINT;
SQL
}
printf '%-14s %8s %6s %10s\n' script clients round msg/s
for round in 1 2; do
  for script in take held held-counted lease; do
    for clients in 1 4; do
      load "$@"
      start=$(date +%s.%N)
      pgbench -n -M prepared -c "$clients" -j "$clients" -t $((1000 / clients)) -f "$script.sql" "$@" "$db" > /dev/null
      end=$(date +%s.%N)
      left=$(psql_ "$@" -At -c 'SELECT count(*) FROM "MessageQueueItem"')
      printf '%-14s %8d %6d %10.0f  (left %s)\n' "$script" "$clients" "$round" \
        "$(echo "(100000 - $left) / ($end - $start)" | bc -l)" "$left"
    done
  done
done
