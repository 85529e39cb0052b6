package dev.msgqueue;

import dev.msgqueue.internal.maintenance.Maintenance;
import dev.msgqueue.internal.publish.Payloads;
import dev.msgqueue.internal.publish.PublishCoalescer;
import dev.msgqueue.internal.publish.Publisher;
import dev.msgqueue.internal.publish.Wakeups;
import dev.msgqueue.internal.sql.RetryStatements;
import dev.msgqueue.internal.sql.StatisticsStatements;
import dev.msgqueue.internal.support.Arguments;
import dev.msgqueue.internal.support.Contexts;
import dev.msgqueue.internal.support.EventSink;
import dev.msgqueue.internal.support.IntervalThrottle;
import dev.msgqueue.internal.support.QueueContext;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.JSONB;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * Publishes messages to named queues and keeps the queue table tidy. Thread-safe; create one per service and share
 * it (its keep-alive throttle is what keeps the queue row off the publish hot path).
 *
 * <h2>What a publish does</h2>
 * <ol>
 *   <li>Validates the queue spec, payload and options, throwing {@link IllegalArgumentException} before any SQL.</li>
 *   <li>Inserts the message with one statement that takes only a KEY SHARE lock on the queue row (the lock the
 *       foreign key takes anyway): concurrent publishers to one queue never wait for each other.</li>
 *   <li>At most once per {@link MsgQueueConfig#keepAliveInterval()} per queue, writes the keep-alive (the queue's
 *       {@code "lastActive"}) with a statement that never waits, so a queue that is only published to is not
 *       reaped.</li>
 *   <li>If the queue is missing: an auto-deleted queue (the reaper removed it) is re-created with the publisher's
 *       spec together with the message, in one statement; any other queue raises {@link QueueNotFoundException}.
 *       Neither case aborts the caller's transaction.</li>
 * </ol>
 *
 * <h2>Transactions</h2>
 * The repository runs each statement on its {@link DSLContext}. To publish or consume inside your own transaction, take
 * the view {@link #inTransaction(DSLContext)}: what it writes commits or rolls back with your transaction. The
 * publish path assumes READ COMMITTED, PostgreSQL's default. {@link #reapIdleQueues()} and
 * {@link #cleanUpExpiredMessages()} run their own short transactions, one per batch, on the repository's own
 * connections (see {@link #create(DSLContext, DataSource, MsgQueueConfig)}), so called inside a caller's transaction
 * they neither commit nor end it.
 *
 * <p>A publish in your transaction never makes your transaction hold the queue row, so no other publisher or
 * subscriber waits for your commit: the keep-alive write and the re-creation of a reaped auto-deleted queue each
 * commit at once, in autocommit, on a connection of the repository's own context (an empty re-created queue left by
 * a rollback is reaped like any idle queue). That needs a context whose connections are not your transaction's:
 * create the repository over your connection pool itself, and pass your transaction's context to the view. If the
 * repository's own context hands out your transaction's connection (a context over that connection, or a data
 * source such as Spring's {@code TransactionAwareDataSourceProxy}), both writes run inside your transaction instead:
 * still correct, but other publishers to a queue healed that way wait for your commit (at most
 * {@link MsgQueueConfig#statementTimeout()}), and the keep-alive holds the queue row until then.
 */
public final class MsgQueueRepository implements QueueOperations {
  private final QueueContext context;
  private final Payloads payloads;
  private final Publisher publisher;
  /** The operations a view offers, on this repository's context and with its publish coalescing. */
  private final TransactionalQueue operations;
  private final Maintenance maintenance;

  private MsgQueueRepository(QueueContext context, Payloads payloads, Publisher publisher, PublishCoalescer coalescer) {
    this.context = context;
    this.payloads = payloads;
    this.publisher = publisher;
    this.operations = new TransactionalQueue(context, payloads, publisher, coalescer);
    this.maintenance = new Maintenance(context);
  }

  /**
   * A repository over {@code ctx}, which must use the PostgreSQL dialect.
   *
   * @throws IllegalArgumentException if the dialect is not PostgreSQL
   */
  public static MsgQueueRepository create(DSLContext ctx, MsgQueueConfig config) {
    Arguments.requireNonNull(config, "config");
    DSLContext own = Contexts.bounded(ctx, "ctx", config);
    return create(own, own, config);
  }

  /**
   * A repository for a context that joins the caller's current transaction, such as the {@code DSLContext} of
   * Spring's jOOQ integration (a {@code TransactionAwareDataSourceProxy}): its publishes, claims and acks run on
   * {@code transactionAware}, so inside a transaction they commit or roll back with it. The writes that must not be
   * held by a caller's transaction — the keep-alive, the re-creation of a reaped queue, coalesced publishes outside any
   * transaction — run in autocommit on connections from {@code ownConnections} (the pool itself, not a
   * transaction-aware proxy of it), so no publisher ever waits for another caller's transaction. Maintenance
   * ({@link #reapIdleQueues()}, {@link #cleanUpExpiredMessages()}, a {@link Housekeeper} tick and the statistics it
   * reads) runs there too, so it never commits or ends the caller's transaction.
   *
   * @throws IllegalArgumentException for a null argument or a context whose dialect is not PostgreSQL
   */
  public static MsgQueueRepository create(
      DSLContext transactionAware, DataSource ownConnections, MsgQueueConfig config) {
    Arguments.requireNonNull(ownConnections, "ownConnections");
    Arguments.requireNonNull(config, "config");
    return create(Contexts.bounded(transactionAware, "transactionAware", config),
        Contexts.bounded(DSL.using(ownConnections, SQLDialect.POSTGRES), "ownConnections", config), config);
  }

  private static MsgQueueRepository create(DSLContext ctx, DSLContext own, MsgQueueConfig config) {
    QueueContext context = new QueueContext(ctx, own, config, new EventSink(),
        new IntervalThrottle(config.keepAliveInterval(), config.maxTrackedQueues()));
    Publisher publisher = new Publisher(context, Wakeups.from(config, context.own()));
    PublishCoalescer coalescer = config.publishCoalescing() ? new PublishCoalescer(publisher, own) : null;
    return new MsgQueueRepository(context, new Payloads(config.maxPayloadBytes()), publisher, coalescer);
  }

  /** A repository taking a connection from {@code dataSource} per statement (or per batch transaction). */
  public static MsgQueueRepository create(DataSource dataSource, MsgQueueConfig config) {
    return create(DSL.using(Arguments.requireNonNull(dataSource, "dataSource"), SQLDialect.POSTGRES), config);
  }

  /**
   * The operations that belong in a caller's transaction, run on {@code transactionContext}: typically the
   * {@code configuration.dsl()} of a jOOQ transaction, or {@code DSL.using(connection)} of your own open transaction
   * (a connection in autocommit works too: each statement then commits on its own). The view never commits, rolls
   * back or aborts that transaction; maintenance is not on it, since it runs transactions of its own.
   *
   * @throws IllegalArgumentException if the context's dialect is not PostgreSQL
   */
  public TransactionalQueue inTransaction(DSLContext transactionContext) {
    return new TransactionalQueue(
        context.on(Contexts.bounded(transactionContext, "transactionContext", context.config())), payloads, publisher,
        null);
  }

  public MsgQueueConfig config() {
    return context.config();
  }

  /** What this repository's rooms share: for its subscribers, housekeepers and metrics. */
  QueueContext context() {
    return context;
  }

  @Override
  public long publish(QueueSpec spec, String json) {
    return operations.publish(spec, json);
  }

  @Override
  public long publish(QueueSpec spec, String json, PublishOptions options) {
    return operations.publish(spec, json, options);
  }

  @Override
  public long publish(QueueSpec spec, JSONB payload) {
    return operations.publish(spec, payload);
  }

  @Override
  public long publish(QueueSpec spec, JSONB payload, PublishOptions options) {
    return operations.publish(spec, payload, options);
  }

  @Override
  public List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads) {
    return operations.publishBatch(spec, jsonPayloads);
  }

  @Override
  public List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads, PublishOptions options) {
    return operations.publishBatch(spec, jsonPayloads, options);
  }

  @Override
  public List<ClaimedMessage> claim(String queueName, int max) {
    return operations.claim(queueName, max);
  }

  @Override
  public List<ClaimedMessage> claim(String queueName, int max, Duration lease) {
    return operations.claim(queueName, max, lease);
  }

  /** @throws IllegalArgumentException unless {@code lease} is in [{@link #MIN_LEASE}, a year] */
  static Duration requireValidLease(Duration lease) {
    return TransactionalQueue.requireValidLease(lease);
  }

  @Override
  public List<Long> ack(Collection<ClaimedMessage> messages) {
    return operations.ack(messages);
  }

  @Override
  public boolean ack(ClaimedMessage message) {
    return operations.ack(message);
  }

  @Override
  public boolean release(ClaimedMessage message, Duration delay) {
    return operations.release(message, delay);
  }

  @Override
  public Optional<ClaimedMessage> extendLease(ClaimedMessage message, Duration lease) {
    return operations.extendLease(message, lease);
  }

  @Override
  public List<ClaimedMessage> extendLeases(Collection<ClaimedMessage> messages, Duration lease) {
    return operations.extendLeases(messages, lease);
  }

  @Override
  public FailureOutcome fail(ClaimedMessage message, Throwable error, RetryPolicy policy) {
    return operations.fail(message, error, policy);
  }

  /**
   * The oldest dead letters in {@code deadLetterQueue}, lowest id first (unexpired ones only).
   *
   * @throws IllegalArgumentException for an invalid queue name or {@code max} outside [1, {@value #MAX_BATCH_SIZE}]
   */
  public List<DeadLetter> deadLetters(String deadLetterQueue, int max) {
    return deadLetters(deadLetterQueue, 0, max);
  }

  /**
   * The dead letters in {@code deadLetterQueue} with ids above {@code afterId}, lowest id first: to page through
   * them, pass the last id of the previous page.
   *
   * @throws IllegalArgumentException for an invalid queue name or {@code max} outside [1, {@value #MAX_BATCH_SIZE}]
   */
  public List<DeadLetter> deadLetters(String deadLetterQueue, long afterId, int max) {
    QueueSpec.requireValidName(deadLetterQueue);
    Arguments.requireWithin(max, "max", 1, MAX_BATCH_SIZE);
    return RetryStatements.deadLetters(context.statements(), deadLetterQueue, afterId, max);
  }

  @Override
  public RepublishOutcome republishDeadLetter(long messageId) {
    return operations.republishDeadLetter(messageId);
  }

  @Override
  public void bindQueue(QueueSpec spec) {
    operations.bindQueue(spec);
  }

  @Override
  public boolean keepAlive(String queueName) {
    return operations.keepAlive(queueName);
  }

  /**
   * Deletes auto-deleted queues idle for longer than {@link MsgQueueConfig#reapIdleThreshold()} that hold no
   * unexpired message, in batches of {@link MsgQueueConfig#reapBatchSize()}, each batch its own transaction. Never
   * waits for publishers: a queue with an in-flight publish or keep-alive is skipped (and is not idle anyway).
   * Runs on the repository's own connections, never on a transaction the caller has open. {@link Housekeeper} runs
   * this on a schedule.
   *
   * @return the names of the queues deleted
   */
  public List<String> reapIdleQueues() {
    return maintenance.reapIdleQueues();
  }

  /**
   * Deletes expired messages, orphans (whose queue was deleted) included, in batches of
   * {@link MsgQueueConfig#cleanupBatchSize()}, each batch its own transaction; skips rows locked by consumers. Then
   * deletes the failure records (retry counts, dead-letter details) of messages that are gone. Runs on the
   * repository's own connections, never on a transaction the caller has open. {@link Housekeeper} runs this on a
   * schedule.
   *
   * @return how many messages it deleted
   */
  public int cleanUpExpiredMessages() {
    return maintenance.cleanUpExpiredMessages();
  }

  /**
   * How many messages {@code queueName} holds, by state (ready, delayed, in flight, expired), and how long its oldest
   * ready message has waited, from one statement that reads only this queue's messages (an index range) and takes no
   * lock.
   *
   * @return the statistics, or empty if the queue does not exist
   * @throws IllegalArgumentException for an invalid queue name, before any SQL
   */
  public Optional<QueueStatistics> queueStatistics(String queueName) {
    QueueSpec.requireValidName(queueName);
    return StatisticsStatements.ofQueue(context.statements(), queueName).stream().findFirst();
  }

  /**
   * {@link #queueStatistics(String)} for every queue, in name order, from one statement that reads the message table
   * once (not once per queue) and takes no lock. Its cost grows with the number of messages: poll it at the
   * housekeeping interval, not per request.
   */
  public List<QueueStatistics> queueStatistics() {
    return StatisticsStatements.ofAll(context.statements());
  }

  /**
   * The statistics of every queue as a {@link Housekeeper} tick reads them for the statistics gauges, in one
   * statement that takes no lock: exact, as {@link #queueStatistics()}, while the message table holds at most 50,000
   * messages by the planner's estimate ({@code pg_class.reltuples}, kept by autovacuum and ANALYZE), else estimated
   * from a {@code TABLESAMPLE SYSTEM} block sample of about 20,000 messages, so that its cost stays about flat however
   * many messages the table holds ({@link QueueStatisticsSnapshot#sampled()} says which). It still returns a row for
   * every queue, so its cost grows with the number of queues. For a page or a report that must not scan the message
   * table; a queue holding fewer messages than one sampled block's share of the table may show zero or a multiple of
   * that share.
   */
  public QueueStatisticsSnapshot estimatedQueueStatistics() {
    return StatisticsStatements.snapshot(context.statements());
  }

}
