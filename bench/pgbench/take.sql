-- The at-most-once take: one statement, one transaction per batch of 100.
DELETE FROM "MessageQueueItem" WHERE id = ANY(ARRAY(SELECT id FROM "MessageQueueItem"
  WHERE "queueId" = 'pgbench' AND "readAfter" <= date_trunc('milliseconds', timezone('UTC', now()))
    AND "expiresAt" > date_trunc('milliseconds', timezone('UTC', now())) AND status = 'PENDING'
  ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED))
RETURNING id, payload, (extract(epoch FROM "expiresAt") * 1000)::bigint;
