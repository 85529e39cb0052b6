-- Lease mode with a no-op handler: the lease claim of 100, then the receipt-checked ack, each in its own transaction
-- (the claim's rows come back as two arrays, since pgbench carries one row into the next statement).
WITH claimed AS (UPDATE "MessageQueueItem" SET status = 'ASSIGNED',
    "readAfter" = date_trunc('milliseconds', timezone('UTC', now())) + interval '30 seconds'
  FROM (SELECT array_agg(id) AS ids, array_agg(id) FILTER (WHERE status = 'ASSIGNED') AS redelivered
        FROM (SELECT id, status FROM "MessageQueueItem" WHERE "queueId" = 'pgbench'
                AND "readAfter" <= date_trunc('milliseconds', timezone('UTC', now()))
                AND "expiresAt" > date_trunc('milliseconds', timezone('UTC', now()))
              ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED) locked) c
  WHERE id = ANY(c.ids)
  RETURNING id, payload, (extract(epoch FROM "readAfter") * 1000)::bigint AS millis)
SELECT array_agg(id) AS ids, array_agg(millis) AS deadlines FROM claimed \gset
DELETE FROM "MessageQueueItem" USING (SELECT z.id, timestamp '1970-01-01' + interval '1 millisecond' * z.millis
    AS deadline FROM unnest(:ids::bigint[], :deadlines::bigint[]) AS z (id, millis)) r
  WHERE "MessageQueueItem".id = r.id AND "readAfter" = r.deadline AND status = 'ASSIGNED';
