-- The held transaction with a no-op handler: lock a batch of 100 (its ids come back as one array, since pgbench
-- carries one row into the next statement), delete them, commit.
BEGIN;
SELECT array_agg(id) AS ids, count(payload) AS n FROM (SELECT id, payload FROM "MessageQueueItem"
  WHERE "queueId" = 'pgbench' AND status = 'PENDING'
    AND "readAfter" <= date_trunc('milliseconds', timezone('UTC', now()))
    AND "expiresAt" > date_trunc('milliseconds', timezone('UTC', now()))
  ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED) locked \gset
DELETE FROM "MessageQueueItem" WHERE id = ANY(:ids::bigint[]);
COMMIT;
