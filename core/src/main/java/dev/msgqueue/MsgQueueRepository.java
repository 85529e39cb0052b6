package dev.msgqueue;

import dev.msgqueue.internal.consume.Retries;
import dev.msgqueue.internal.maintenance.Maintenance;
import dev.msgqueue.internal.publish.Payloads;
import dev.msgqueue.internal.publish.PublishCoalescer;
import dev.msgqueue.internal.publish.Publisher;
import dev.msgqueue.internal.publish.Wakeups;
import dev.msgqueue.internal.sql.ClaimStatements;
import dev.msgqueue.internal.sql.QueueStatements;
import dev.msgqueue.internal.sql.Receipt;
import dev.msgqueue.internal.sql.RetryStatements;
import dev.msgqueue.internal.sql.StatisticsStatements;
import dev.msgqueue.internal.support.Arguments;
import dev.msgqueue.internal.support.EventSink;
import dev.msgqueue.internal.support.FailureTranslation;
import dev.msgqueue.internal.support.IntervalThrottle;
import dev.msgqueue.internal.support.MsgQueueEvents;
import dev.msgqueue.internal.support.QueueContext;
import dev.msgqueue.internal.support.StatementDeadlines;
import java.sql.Connection;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
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
public final class MsgQueueRepository {
  /** The most messages {@link #publishBatch} takes in one call (one statement). */
  public static final int MAX_BATCH_SIZE = 10_000;
  /** The shortest lease: the timestamps' precision, so that every re-claim stores a strictly later deadline. */
  public static final Duration MIN_LEASE = Duration.ofMillis(1);

  private final QueueContext context;
  private final Payloads payloads;
  private final Publisher publisher;
  /** Group commit of this repository's own autocommit publishes; {@code null} when off, and in views. */
  private final PublishCoalescer coalescer;
  private final Maintenance maintenance;

  private MsgQueueRepository(QueueContext context, Payloads payloads, Publisher publisher, PublishCoalescer coalescer) {
    this.context = context;
    this.payloads = payloads;
    this.publisher = publisher;
    this.coalescer = coalescer;
    this.maintenance = new Maintenance(context);
  }

  /**
   * A repository over {@code ctx}, which must use the PostgreSQL dialect.
   *
   * @throws IllegalArgumentException if the dialect is not PostgreSQL
   */
  public static MsgQueueRepository create(DSLContext ctx, MsgQueueConfig config) {
    Arguments.requireNonNull(ctx, "ctx");
    Arguments.requireNonNull(config, "config");
    requirePostgres(ctx);
    DSLContext own = bounded(ctx, config);
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
    Arguments.requireNonNull(transactionAware, "transactionAware");
    Arguments.requireNonNull(ownConnections, "ownConnections");
    Arguments.requireNonNull(config, "config");
    requirePostgres(transactionAware);
    return create(bounded(transactionAware, config),
        bounded(DSL.using(ownConnections, SQLDialect.POSTGRES), config), config);
  }

  private static MsgQueueRepository create(DSLContext ctx, DSLContext own, MsgQueueConfig config) {
    QueueContext context = new QueueContext(ctx, own, config, new EventSink(),
        new IntervalThrottle(config.keepAliveInterval(), config.maxTrackedQueues()));
    Publisher publisher = new Publisher(context, Wakeups.from(config));
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
    Arguments.requireNonNull(transactionContext, "transactionContext");
    requirePostgres(transactionContext);
    return new TransactionalQueue(new MsgQueueRepository(
        context.on(bounded(transactionContext, context.config())), payloads, publisher, null));
  }

  public MsgQueueConfig config() {
    return context.config();
  }

  /** What this repository's rooms share: for its subscribers, housekeepers and metrics. */
  QueueContext context() {
    return context;
  }

  /** Publishes a JSON text payload with default options. @return the message id */
  public long publish(QueueSpec spec, String json) {
    return publish(spec, json, PublishOptions.defaults());
  }

  /** Publishes a JSON text payload. @return the message id */
  public long publish(QueueSpec spec, String json, PublishOptions options) {
    JSONB payload = payloads.validate(json);
    return publishOne(spec, payload, options);
  }

  /** Publishes a {@code jsonb} payload with default options. @return the message id */
  public long publish(QueueSpec spec, JSONB payload) {
    return publish(spec, payload, PublishOptions.defaults());
  }

  /** Publishes a {@code jsonb} payload. @return the message id */
  public long publish(QueueSpec spec, JSONB payload, PublishOptions options) {
    JSONB validated = payloads.validate(payload);
    return publishOne(spec, validated, options);
  }

  /** Publishes several payloads to one queue in one statement, with default options. */
  public List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads) {
    return publishBatch(spec, jsonPayloads, PublishOptions.defaults());
  }

  /**
   * Publishes several payloads to one queue in one statement, with the guarantees of a single publish: all are
   * stored or none is.
   *
   * @return the message ids, in the order of {@code jsonPayloads}
   * @throws IllegalArgumentException for a null list, more than {@value #MAX_BATCH_SIZE} payloads, or any invalid
   *     payload (naming its index), before any SQL
   */
  public List<Long> publishBatch(QueueSpec spec, List<String> jsonPayloads, PublishOptions options) {
    Arguments.requireNonNull(jsonPayloads, "payloads");
    if (jsonPayloads.size() > MAX_BATCH_SIZE) {
      throw new IllegalArgumentException(
          "a batch holds at most " + MAX_BATCH_SIZE + " payloads, was " + jsonPayloads.size());
    }
    List<JSONB> validated = new ArrayList<>(jsonPayloads.size());
    for (int i = 0; i < jsonPayloads.size(); i++) {
      try {
        validated.add(payloads.validate(jsonPayloads.get(i)));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("payload " + i + ": " + e.getMessage(), e);
      }
    }
    Duration ttl = requireValid(spec, options);
    return validated.isEmpty() ? List.of() : publishValidated(spec, validated, options.delay(), ttl);
  }

  private long publishOne(QueueSpec spec, JSONB payload, PublishOptions options) {
    Duration ttl = requireValid(spec, options);
    // Only in autocommit: a publish on a connection with autocommit off belongs to that connection's transaction.
    if (coalescer != null && context.statements().connectionResult(Connection::getAutoCommit)) {
      long start = System.nanoTime();
      long id = coalescer.publish(spec, payload, options.delay(), ttl);
      context.report().published(spec.name(), 1, System.nanoTime() - start);
      return id;
    }
    return publishValidated(spec, List.of(payload), options.delay(), ttl).get(0);
  }

  private List<Long> publishValidated(QueueSpec spec, List<JSONB> validated, Duration delay, Duration ttl) {
    long start = System.nanoTime();
    List<Long> ids = publisher.publish(context.statements(), spec, validated, delay, ttl);
    context.report().published(spec.name(), ids.size(), System.nanoTime() - start);
    return ids;
  }

  /**
   * Claims up to {@code max} of the queue's messages that are readable now ({@code "readAfter"} reached) and not
   * expired, lowest id first, marking them ASSIGNED, in one statement. Competing consumers never get the same message
   * and never wait for each other (rows another claim holds are skipped). Without a lease, a claimed message is
   * never claimable again, so if the consumer dies before {@link #ack} it stays ASSIGNED until it expires and
   * {@link #cleanUpExpiredMessages()} removes it.
   *
   * @return the claimed messages, in id order; empty if none is claimable
   * @throws IllegalArgumentException for an invalid queue name or {@code max} outside [1, {@value #MAX_BATCH_SIZE}]
   */
  public List<ClaimedMessage> claim(String queueName, int max) {
    return claimValidated(queueName, max, null);
  }

  /**
   * Like {@link #claim(String, int)}, in lease mode: a message not acked within {@code lease} becomes claimable again
   * (until it expires), so a consumer that dies loses nothing. The claim also takes messages whose earlier lease ran
   * out. Each claim stores a new, strictly later deadline, so a late {@link #ack} from a consumer whose lease ran out
   * deletes nothing once another consumer has re-claimed the message.
   *
   * @param lease at least 1 ms (the timestamps' precision), at most {@link MsgQueueConfig#MAX_MESSAGE_LIFETIME}
   */
  public List<ClaimedMessage> claim(String queueName, int max, Duration lease) {
    return claimValidated(queueName, max, requireValidLease(lease));
  }

  /** @throws IllegalArgumentException unless {@code lease} is in [{@link #MIN_LEASE}, a year] */
  static Duration requireValidLease(Duration lease) {
    return Arguments.requireWithin(lease, "lease", MIN_LEASE, MsgQueueConfig.MAX_MESSAGE_LIFETIME);
  }

  private List<ClaimedMessage> claimValidated(String queueName, int max, Duration lease) {
    QueueSpec.requireValidName(queueName);
    if (max < 1 || max > MAX_BATCH_SIZE) {
      throw new IllegalArgumentException("max must be in [1, " + MAX_BATCH_SIZE + "], was " + max);
    }
    long start = System.nanoTime();
    List<ClaimedMessage> claimed = ClaimStatements.claim(context.statements(), queueName, max, lease,
        (receipt, payload) -> new ClaimedMessage(queueName, payload, receipt));
    claimed.sort(Comparator.comparingLong(ClaimedMessage::id));
    long redelivered = claimed.stream().filter(ClaimedMessage::redelivered).count();
    if (redelivered > 0) {
      context.report().redelivered(queueName, (int) redelivered);
    }
    context.report().claimed(queueName, claimed.size(), System.nanoTime() - start);
    return claimed;
  }

  /**
   * Deletes the claimed messages whose claim is still theirs: still ASSIGNED under the same receipt. A message whose
   * lease ran out and that another consumer re-claimed (or that was released, or expired and was cleaned up) is left
   * alone.
   *
   * @return the ids deleted; fewer than given means some claims were no longer held
   */
  public List<Long> ack(Collection<ClaimedMessage> messages) {
    Arguments.requireNoNulls(messages, "messages");
    if (messages.isEmpty()) {
      return List.of();
    }
    long start = System.nanoTime();
    List<Long> acked =
        new ArrayList<>(ClaimStatements.ack(context.statements(), ClaimedMessage.receipts(messages)));
    Collections.sort(acked);
    reportAcked(messages, acked, System.nanoTime() - start);
    return acked;
  }

  /** Acks one claimed message. @return whether it was deleted (see {@link #ack(Collection)}) */
  public boolean ack(ClaimedMessage message) {
    return !ack(List.of(Arguments.requireNonNull(message, "message"))).isEmpty();
  }

  /**
   * Releases a claimed message, in either mode: it is PENDING again and claimable from now + {@code delay} (until it
   * expires), unless the claim is no longer held.
   *
   * @return whether it was released
   */
  public boolean release(ClaimedMessage message, Duration delay) {
    Arguments.requireNonNull(message, "message");
    Arguments.requireWithin(delay, "delay", Duration.ZERO, MsgQueueConfig.MAX_MESSAGE_LIFETIME);
    boolean released = ClaimStatements.release(context.statements(), message.receipt(), delay) > 0;
    if (released) {
      context.report().released(message.queueName());
    }
    return released;
  }

  /**
   * Extends the lease of a claimed message (lease mode), so a slow but alive handler keeps it: its new deadline is
   * now + {@code lease}, or 1 ms past the current deadline if that is later (a deadline only moves forward). Returns
   * the message under its new receipt, which {@link #ack}, {@link #release}, {@link #fail} and further extensions must
   * use: the old receipt stops matching. In the default mode the deadline is the expiry, so extending also postpones
   * the expiry check of the claim (the item's {@code "expiresAt"} is unchanged).
   *
   * @return the message under its new receipt, or empty if the claim is no longer held (acked, released, failed,
   *     extended already under this receipt, or re-claimed by another consumer after the lease ran out)
   * @throws IllegalArgumentException for a null message or a lease outside [{@link #MIN_LEASE}, a year], before any
   *     SQL
   */
  public Optional<ClaimedMessage> extendLease(ClaimedMessage message, Duration lease) {
    Arguments.requireNonNull(message, "message");
    requireValidLease(lease);
    return ClaimStatements.extendLease(context.statements(), message.receipt(), lease)
        .map(deadline -> message.withReceipt(message.receipt().extendedTo(deadline)));
  }

  /**
   * {@link #extendLease} for a batch, in one statement.
   *
   * @return the messages whose claim was still held, under their new receipts, in id order; the others are left alone
   * @throws IllegalArgumentException for a null collection or element, more than {@value #MAX_BATCH_SIZE} messages,
   *     or an invalid lease, before any SQL
   */
  public List<ClaimedMessage> extendLeases(Collection<ClaimedMessage> messages, Duration lease) {
    requireMessages(messages);
    requireValidLease(lease);
    if (messages.isEmpty()) {
      return List.of();
    }
    Map<Long, LocalDateTime> deadlines = new HashMap<>();
    ClaimStatements.extendLeases(context.statements(), ClaimedMessage.receipts(messages), lease)
        .forEach(row -> deadlines.put(row.value1(), row.value2()));
    List<ClaimedMessage> extended = new ArrayList<>(deadlines.size());
    for (ClaimedMessage message : messages) {
      LocalDateTime deadline = deadlines.remove(message.id());
      if (deadline != null) {
        extended.add(message.withReceipt(message.receipt().extendedTo(deadline)));
      }
    }
    extended.sort(Comparator.comparingLong(ClaimedMessage::id));
    return extended;
  }

  /**
   * Settles a claimed message whose handler failed (lease mode), by {@code policy}: if this was one of its first
   * {@code maxDeliveries - 1} deliveries it is released, claimable again after the policy's backoff; if it was the
   * {@code maxDeliveries}-th it moves to the policy's dead-letter queue, in one statement, with the error's class and
   * message. Deliveries whose lease ran out count too, once the redelivering claim has counted them. Only the holder
   * of the current receipt can fail a message, once: a consumer racing it with another fail or an ack under the same
   * receipt finds nothing to do.
   *
   * <p>Costs two statements (read the failure count, then release or move), and writes a row in the side table
   * {@code "MessageQueueItemFailure"}; messages that never fail never touch that table.
   *
   * @return what was done
   * @throws IllegalArgumentException for a null argument, or a message that is in the policy's dead-letter queue
   *     already, before any SQL
   */
  public FailureOutcome fail(ClaimedMessage message, Throwable error, RetryPolicy policy) {
    Arguments.requireNonNull(message, "message");
    Arguments.requireNonNull(error, "error");
    Arguments.requireNonNull(policy, "policy");
    if (message.queueName().equals(policy.deadLetterQueue())) {
      throw new IllegalArgumentException("message " + message.id() + " is in the dead-letter queue \""
          + policy.deadLetterQueue() + "\" already: a dead-letter queue's consumer needs a policy naming another one");
    }
    FailureOutcome outcome = Retries.fail(context.statements(), message.queueName(), message.receipt(), error, policy,
        failed -> policy.backoff(failed, () -> ThreadLocalRandom.current().nextDouble()));
    if (outcome == FailureOutcome.DEAD_LETTERED) {
      context.report().deadLettered(message.queueName(), 1);
    }
    return outcome;
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
    if (max < 1 || max > MAX_BATCH_SIZE) {
      throw new IllegalArgumentException("max must be in [1, " + MAX_BATCH_SIZE + "], was " + max);
    }
    List<DeadLetter> letters = new ArrayList<>();
    for (var row : RetryStatements.deadLetters(context.statements(), deadLetterQueue, afterId, max)) {
      letters.add(new DeadLetter(row.value1(), row.value2().data(), row.value3(), deadLetterQueue, row.value4(),
          row.value5(), row.value6(), utcInstant(row.value7()), utcInstant(row.value8())));
    }
    return letters;
  }

  /**
   * Moves a dead letter back to the queue it came from, PENDING and claimable now, with a fresh set of deliveries
   * and the configured default TTL; it keeps its id. A dead letter that a consumer of the dead-letter queue holds
   * right now is not moved. One statement when it moves; a second, lock-free read tells why when it does not.
   *
   * @return {@link RepublishOutcome#REPUBLISHED}, or why nothing was done: {@link RepublishOutcome#NOT_FOUND},
   *     {@link RepublishOutcome#NOT_A_DEAD_LETTER} (a live message, one republished already included) or
   *     {@link RepublishOutcome#HELD}
   * @throws QueueNotFoundException if its original queue no longer exists (bind it, then re-publish); the caller's
   *     transaction is not aborted
   */
  public RepublishOutcome republishDeadLetter(long messageId) {
    Duration ttl = context.config().defaultMessageTtl();
    if (RetryStatements.republish(context.statements(), messageId, ttl).isPresent()) {
      return RepublishOutcome.REPUBLISHED;
    }
    return RetryStatements.whyNotRepublished(context.statements(), messageId);
  }

  /**
   * Creates the queue or updates its attributes to {@code spec}, and marks it active now. Takes an exclusive lock on
   * the queue row until the surrounding transaction ends; publishers are not blocked by it.
   */
  public void bindQueue(QueueSpec spec) {
    Arguments.requireNonNull(spec, "spec");
    QueueStatements.bind(context.statements(), spec);
    context.keepAlives().done(spec.name());
  }

  /**
   * Marks the queue active now, as a consumer's keep-alive. Never waits: if another transaction is writing the queue
   * row right now (a keep-alive, or the reaper deleting it), it writes nothing.
   *
   * @return whether {@code "lastActive"} was written; {@code false} if the queue does not exist or its row is busy
   */
  public boolean keepAlive(String queueName) {
    QueueSpec.requireValidName(queueName);
    boolean written = QueueStatements.keepAlive(context.statements(), queueName) > 0;
    if (written) {
      context.keepAlives().done(queueName);
    }
    return written;
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

  /** Reports an ack per queue (an ack's messages usually share one), its duration with the first message's queue. */
  private void reportAcked(Collection<ClaimedMessage> messages, List<Long> acked, long nanos) {
    String first = messages.iterator().next().queueName();
    if (messages.stream().allMatch(m -> m.queueName().equals(first))) {
      context.report().acked(first, acked.size(), nanos);
      return;
    }
    Set<Long> ackedIds = new HashSet<>(acked);
    Map<String, Integer> perQueue = new HashMap<>();
    for (ClaimedMessage message : messages) {
      if (ackedIds.remove(message.id())) {
        perQueue.merge(message.queueName(), 1, Integer::sum);
      }
    }
    perQueue.forEach((queue, count) -> context.report().acked(queue, count, queue.equals(first) ? nanos : 0));
  }

  /** Validates a batch of claimed messages before any SQL. */
  private static void requireMessages(Collection<ClaimedMessage> messages) {
    Arguments.requireNoNulls(messages, "messages");
    if (messages.size() > MAX_BATCH_SIZE) {
      throw new IllegalArgumentException(
          "a batch holds at most " + MAX_BATCH_SIZE + " messages, was " + messages.size());
    }
  }

  private Duration requireValid(QueueSpec spec, PublishOptions options) {
    Arguments.requireNonNull(spec, "queue spec");
    Arguments.requireNonNull(options, "publish options");
    return options.effectiveTtl(context.config());
  }

  /**
   * The caller's context (same connection or data source) with every statement bounded by the statement timeout and
   * its failures translated into msgqueue's typed exceptions.
   */
  private static DSLContext bounded(DSLContext ctx, MsgQueueConfig config) {
    return ctx.configuration()
        .deriveAppending(new StatementDeadlines(config.statementTimeout()), new FailureTranslation())
        .dsl();
  }

  private static Instant utcInstant(LocalDateTime utc) {
    return utc == null ? null : utc.toInstant(ZoneOffset.UTC);
  }

  private static void requirePostgres(DSLContext ctx) {
    if (ctx.dialect().family() != SQLDialect.POSTGRES) {
      throw new IllegalArgumentException("msgqueue needs the POSTGRES dialect, the context has " + ctx.dialect());
    }
  }
}
