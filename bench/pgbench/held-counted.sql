-- held.sql with the crash count's column: whether each row's last locker ended without commit (xmax widened against
-- the snapshot, then pg_xact_status), as HeldStatements.lock reads it.
BEGIN;
SELECT array_agg(id) AS ids, count(ended) AS n FROM (SELECT id, payload,
    CASE WHEN xmax::text <> '0' AND ((n & 4294967295) - xmax::text::bigint + 4294967296) % 4294967296
      BETWEEN 1 AND 2147483647 THEN pg_xact_status((n - ((n & 4294967295) - xmax::text::bigint + 4294967296)
      % 4294967296)::text::xid8) = 'aborted' ELSE false END AS ended
  FROM "MessageQueueItem", (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS n) snapshot
  WHERE "queueId" = 'pgbench' AND status = 'PENDING'
    AND "readAfter" <= date_trunc('milliseconds', timezone('UTC', now()))
    AND "expiresAt" > date_trunc('milliseconds', timezone('UTC', now()))
  ORDER BY id LIMIT 100 FOR UPDATE OF "MessageQueueItem" SKIP LOCKED) locked \gset
DELETE FROM "MessageQueueItem" WHERE id = ANY(:ids::bigint[]);
COMMIT;
