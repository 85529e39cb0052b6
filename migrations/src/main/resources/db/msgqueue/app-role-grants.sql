-- The privileges a service's database role needs to run the whole msgqueue API (publish, claim/ack/release, bindQueue,
-- touch, lease extension, retries and dead letters, the reaper, expired-message cleanup, Subscriber, WakeupListener,
-- Housekeeper), and nothing more. Run it after
-- `liquibase update` as the owner of the schema and of the tables (typically the migration role that applied the
-- changelog; a role that owns only the tables gets a mere warning for the first GRANT), replacing msgqueue_app with
-- your service's role and public with the schema the changelog was applied to.
--
-- Not needed, and deliberately not granted:
--   * CREATE on the schema or TEMPORARY on the database: msgqueue runs no DDL at run time.
--   * TRUNCATE, REFERENCES, TRIGGER, or any grant option; anything on DATABASECHANGELOG / DATABASECHANGELOGLOCK.
--   * pg_notify / LISTEN (wake-ups), the Housekeeper's pg_try_advisory_xact_lock, now(), timezone(): callable by
--     every role (EXECUTE is granted to PUBLIC).
--   * the enum type "MessageQueueItemStatus": USAGE on types is granted to PUBLIC by default.
-- USAGE on the identity sequence of "MessageQueueItem"."id" lets publishBatch draw the ids of a batch of 100 or more
-- ahead of copying it (COPY: less WAL and server work per message than the insert). Without it, publishBatch logs a
-- warning once and inserts every batch instead.
-- UPDATE is needed on both tables also for the row locks (SELECT ... FOR UPDATE / FOR NO KEY UPDATE / FOR KEY SHARE)
-- that the claim, the keep-alive and the reaper take.
GRANT USAGE ON SCHEMA public TO msgqueue_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE public."MessageQueue", public."MessageQueueItem",
  public."MessageQueueItemFailure" TO msgqueue_app;
GRANT USAGE ON SEQUENCE public."MessageQueueItem_id_seq" TO msgqueue_app;
