package dev.msgqueue;

import dev.msgqueue.internal.consume.ConsumerPipeline;
import dev.msgqueue.internal.consume.ConsumerThreads;
import dev.msgqueue.internal.consume.HeldConnections;
import dev.msgqueue.internal.consume.HeldPipeline;
import dev.msgqueue.internal.consume.Pipeline;
import dev.msgqueue.internal.consume.PipelineSettings;
import dev.msgqueue.internal.consume.QueueStore;
import dev.msgqueue.internal.support.Arguments;
import dev.msgqueue.internal.support.Contexts;
import java.time.Duration;

/**
 * Consumes one queue: runs a handler on each of its messages with bounded concurrency, in one of three
 * {@link ConsumeMode}s. Build with {@link #builder}; {@link #close()} stops it gracefully.
 *
 * <ul>
 *   <li><b>Held transactions ({@link ConsumeMode#TRANSACTION}, the default).</b> Handler lanes (at most
 *       {@code concurrency + 1}, each a transaction on a pooled connection) lock up to {@code batchSize} messages
 *       with {@code FOR UPDATE SKIP LOCKED}, run their handlers one after the other inside that transaction, delete
 *       the handled messages and commit: a handler's writes through its {@link TransactionalMessageHandler}'s
 *       transaction commit exactly when its message is removed. At most {@code concurrency} lanes run handlers at
 *       once; the extra lane has its batch locked and waits for its turn, so locking overlaps handling. A handler
 *       that throws rolls back its lane's transaction; the batch is then handled again one message per transaction,
 *       and the failed message (not run again) goes to the retry policy (by default to {@code <queue>-dead-letters}
 *       after 5 deliveries, {@link RetryPolicy#defaults}). The server ends a transaction idle past
 *       {@link Builder#transactionTimeout} (a hung or dead consumer gives its messages back at once); a lane stops
 *       starting handlers once half of it has passed. A delivery cut short that way, or by a crash, counts toward
 *       the dead letter, and a message whose delivery ended without commit is handled alone, so a message that kills
 *       its consumer takes no other delivery with it. {@link Builder#start()} refuses a subscriber whose lanes would
 *       leave the pool without a free connection ({@code docs/consuming.md} has the rule). {@code prefetch},
 *       {@code ackDelay}, {@code lease} and {@code maxHandlerTime} do not apply.</li>
 *   <li><b>Claims ({@link ConsumeMode#LEASE}, {@link ConsumeMode#AT_MOST_ONCE}).</b> A claim takes up to
 *       {@code batchSize} messages into the free handler room plus a bounded buffer of {@code prefetch} messages
 *       waiting for a handler (by default two batches); its room is reserved before the statement is sent, so the
 *       messages claimed or being claimed never exceed {@code concurrency + prefetch}. While the handlers have run
 *       dry, a claim is sent as soon as at least half a batch fits, and while claims find full batches several run
 *       at once (up to four, each on its own connection), so quick handlers drain at the claims' overlapped rate;
 *       while messages wait, a claim is sent only when a whole batch fits and less than a batch waits or is on its
 *       way. At most once, a claim takes its messages: it deletes them as it returns them. In lease mode a claim
 *       marks them ASSIGNED until a deadline, and while more than a batch of handled messages waits for its ack, no
 *       claim is sent.</li>
 *   <li><b>Polling.</b> Lanes and claims go out again at once while they find messages, then after a wake-up,
 *       after room frees, or at the next poll. After messages were found, the first empty attempt is followed by
 *       others after 1, 2, 4, ... ms up to the poll interval, since publishers commit in groups. While the
 *       {@link WakeupListener} is connected the idle poll interval doubles after each empty poll, up to
 *       {@link Builder#maxIdlePollInterval}; it returns to the poll interval when messages are found or the listener
 *       is not connected. Polling never stops. While it is backed off, a message that becomes claimable by time (a
 *       publish or release delay running out, a retry backoff, a lapsed lease) is found up to that long after it
 *       became due, since only publishes send wake-ups.</li>
 *   <li><b>Threads.</b> Claims, acks, lease renewals and keep-alives run as tasks on threads shared by all
 *       subscribers of one repository (at most {@value ConsumerThreads#MAX_WORKERS} workers and one timer, named
 *       {@code msgqueue-consume-*}); handlers and held lanes run on handler threads shared by them too
 *       ({@code msgqueue-handler-*}), at most {@code concurrency} (held: {@code concurrency + 1}) at once per
 *       subscriber. A thread is started only when none is idle, ends after 10 s without work, and all of them stop
 *       when the last subscriber closes: an idle subscriber holds no thread.</li>
 *   <li><b>Acks (lease mode).</b> A handler that returns has its message acked together with the others that
 *       finished about then: receipt-checked statements of at most {@code batchSize} receipts each, when
 *       {@code batchSize} acks are pending, {@code ackDelay} after the first pending one, and on close (up to four
 *       statements at once). A receipt that no longer matches (its lease ran out and another claim took it) deletes
 *       nothing, while the rest of the batch is deleted. A failing ack statement is tried again after 50, 100, 200 and
 *       400 ms; if its fifth attempt fails too, its messages are released to the queue (PENDING, delivered again),
 *       the release itself tried up to five times. Only if all of that fails are they redelivered after the lease,
 *       logged as an error. The lease of each running handler is renewed whenever less than half of it remains, for
 *       up to {@code maxHandlerTime} from the handler's start. A buffered message starts only while at least half its
 *       lease remains; otherwise it is released to the queue unstarted.</li>
 *   <li><b>Failures.</b> A handler that throws leaves its message to the mode: retried by the retry policy (held
 *       transactions, and lease mode with one), redelivered after the lease (lease mode without one), or gone (at
 *       most once). None of them blocks other messages.</li>
 *   <li><b>What a crash does.</b> Held transactions: the open transactions roll back and their messages are claimable
 *       at once, their handlers' writes undone. Lease mode: messages are redelivered when their leases run out. At
 *       most once: up to {@code concurrency + prefetch} messages are lost (8 + 200 with the defaults), those running
 *       and those claimed but not started; an at-most-once claim whose commit went unanswered is resolved by asking
 *       the server whether it committed (the {@code msgqueue.messages.unresolved} meter counts those it could not
 *       tell, and an error log names their ids).</li>
 *   <li><b>Queue.</b> {@link Builder#start()} binds the queue; while running it keeps the queue alive every
 *       {@link MsgQueueConfig#keepAliveInterval()}, so an auto-deleted queue with a live subscriber is never reaped.
 *       If the keep-alive finds the queue row busy (another transaction is writing it), the queue exists and nothing
 *       more is done; only a missing queue is re-created, with a bounded lock wait. Consuming never locks the queue
 *       row. Closing an at-most-once subscriber puts the messages its claims took and no handler started back under
 *       their ids, PENDING and claimable at once, binding the queue again if it went missing meanwhile.</li>
 *   <li><b>Wake-ups.</b> With a {@link WakeupListener}, a publish wakes the subscriber at once; it also looks once
 *       more {@link MsgQueueConfig#wakeupWindow()} later, for messages whose notification was coalesced away.</li>
 * </ul>
 */
public final class Subscriber implements AutoCloseable {
  /** Default handler concurrency. */
  public static final int DEFAULT_CONCURRENCY = 8;
  /** Default largest claim, and the ack flush size. */
  public static final int DEFAULT_BATCH_SIZE = 100;
  /**
   * The default prefetch, in batches: room for two whole claims in flight besides the running handlers, so quick
   * handlers' claims overlap (docs/consuming.md has the measurements). Busy handlers keep one to two batches ahead
   * whatever the prefetch, so the second batch does not add to what a crash can lose while handlers are busy.
   */
  static final int DEFAULT_PREFETCH_BATCHES = 2;
  /** Default longest wait of a finished handler's ack for others to share its statement. */
  public static final Duration DEFAULT_ACK_DELAY = Duration.ofMillis(5);
  /** The longest {@code ackDelay}. */
  public static final Duration MAX_ACK_DELAY = Duration.ofSeconds(1);
  /** Default longest time a handler's lease is renewed for (lease mode). */
  public static final Duration DEFAULT_MAX_HANDLER_TIME = Duration.ofMinutes(30);
  /** The most messages the buffer ahead of the handlers may hold. */
  public static final int MAX_PREFETCH = 10_000;
  /** The shortest poll interval. */
  public static final Duration MIN_POLL_INTERVAL = Duration.ofMillis(10);
  /** The longest poll interval. */
  public static final Duration MAX_POLL_INTERVAL = Duration.ofHours(1);
  /** The default of {@link Builder#maxIdlePollInterval}. */
  public static final Duration DEFAULT_MAX_IDLE_POLL_INTERVAL = Duration.ofSeconds(30);
  /** The longest close timeout, of {@link Builder#closeTimeout} and {@link #close(Duration)}. */
  public static final Duration MAX_CLOSE_TIMEOUT = Duration.ofHours(1);
  /** The default lease of {@link ConsumeMode#LEASE}. */
  public static final Duration DEFAULT_LEASE = Duration.ofSeconds(30);
  /** The default of {@link Builder#transactionTimeout}. */
  public static final Duration DEFAULT_TRANSACTION_TIMEOUT = Duration.ofSeconds(60);
  /** The shortest {@link Builder#transactionTimeout}. */
  public static final Duration MIN_TRANSACTION_TIMEOUT = Duration.ofSeconds(1);
  /** The longest {@link Builder#transactionTimeout}. */
  public static final Duration MAX_TRANSACTION_TIMEOUT = Duration.ofHours(1);
  /**
   * What {@link ConsumeMode#TRANSACTION} appends to the queue's name for the dead-letter queue of its default retry
   * policy ({@link RetryPolicy#defaults}).
   */
  public static final String DEFAULT_DEAD_LETTER_SUFFIX = "-dead-letters";

  private final QueueSpec queue;
  private final ConsumeMode mode;
  private final Duration closeTimeout;
  private final Pipeline pipeline;
  private final Runnable unregisterWakeups;

  private Subscriber(Builder builder, RetryPolicy retryPolicy, HeldConnections connections) {
    this.queue = builder.queue;
    this.mode = builder.mode;
    this.closeTimeout = builder.closeTimeout;
    WakeupListener wakeups = builder.wakeups;
    MsgQueueConfig config = builder.repository.config();
    Duration lease = mode == ConsumeMode.LEASE ? builder.effectiveLease() : null;
    PipelineSettings settings = new PipelineSettings(builder.concurrency, builder.batchSize,
        builder.effectivePrefetch(), builder.pollInterval, builder.maxIdlePollInterval, lease,
        retryPolicy != null && mode == ConsumeMode.LEASE, builder.maxHandlerTime, builder.ackDelay,
        config.keepAliveInterval(), config.wakeupWindow(), wakeups == null ? null : wakeups::isListening);
    QueueStore store = new QueueStore(builder.repository.context(), ClaimedMessageAccess.INSTANCE, queue, mode, lease,
        retryPolicy, builder.transactionTimeout);
    ConsumerThreads threads = ConsumerThreads.acquire(builder.repository);
    if (mode == ConsumeMode.TRANSACTION) {
      this.pipeline = new HeldPipeline(store, builder.transactionalHandler(), settings, builder.transactionTimeout,
          threads, connections);
    } else {
      this.pipeline = new ConsumerPipeline(store, builder.handler, settings, threads);
    }
    this.unregisterWakeups = wakeups == null ? () -> { } : wakeups.register(queue.name(), pipeline::wake);
  }

  /**
   * A builder for a subscriber of {@code queue} on {@code repository} (whose configuration gives the keep-alive
   * interval and the wake-up window), in {@link ConsumeMode#TRANSACTION} unless {@link Builder#mode} says otherwise.
   */
  public static Builder builder(MsgQueueRepository repository, QueueSpec queue, MessageHandler handler) {
    return new Builder(repository, queue, Arguments.requireNonNull(handler, "handler"), null);
  }

  /**
   * A builder for a subscriber of {@code queue} whose handler writes in the transaction that holds its message
   * ({@link ConsumeMode#TRANSACTION}, the only mode it takes): its writes commit exactly when the message is removed.
   */
  public static Builder builder(MsgQueueRepository repository, QueueSpec queue, TransactionalMessageHandler handler) {
    return new Builder(repository, queue, null, Arguments.requireNonNull(handler, "handler"));
  }

  /** The mode this subscriber delivers in. */
  public ConsumeMode mode() {
    return mode;
  }

  public QueueSpec queue() {
    return queue;
  }

  /** Closes with the builder's close timeout; see {@link #close(Duration)}. */
  @Override
  public void close() {
    close(closeTimeout);
  }

  /**
   * Stops taking messages, lets the running handlers finish, then returns; waits at most {@code timeout}.
   * Held transactions: each lane commits what its handlers handled, and the rest of its batch goes back to the queue
   * with that commit. Lease and at-most-once: waits for the claims already sent, releases the buffered (claimed, not
   * started) messages to the queue and flushes the acks. Handlers still running after the timeout are interrupted and
   * their messages not removed: a held transaction rolls back (its messages are claimable at once, the delivery
   * counted as failed), a lease runs out (redelivered), an at-most-once message is lost (its claim took it). A claim
   * still in the database then releases its messages when it returns. Do not call it from a handler: it would wait
   * for that handler to finish, that is for the whole timeout.
   *
   * @param timeout zero or positive, at most {@link #MAX_CLOSE_TIMEOUT}
   * @return whether every running handler finished within the timeout
   */
  public boolean close(Duration timeout) {
    Arguments.requireWithin(timeout, "timeout", Duration.ZERO, MAX_CLOSE_TIMEOUT);
    if (!pipeline.isClosing()) {
      unregisterWakeups.run();
    }
    return pipeline.close(timeout);
  }

  /** Claims at once (called by the {@link WakeupListener}). */
  void wake() {
    pipeline.wake();
  }

  boolean isClosing() {
    return pipeline.isClosing();
  }

  long claimRounds() {
    return pipeline.claimRounds();
  }

  long ackFlushes() {
    return pipeline.ackFlushes();
  }

  long leaseRenewals() {
    return pipeline.leaseRenewals();
  }

  long wakeups() {
    return pipeline.wakeups();
  }

  long acked() {
    return pipeline.acked();
  }

  long deadLettered() {
    return pipeline.deadLettered();
  }

  long released() {
    return pipeline.released();
  }

  /** Messages of at-most-once takes whose commit went unanswered and whose outcome the server could not tell. */
  long unresolved() {
    return pipeline.unresolved();
  }

  /** The name prefix of the threads this subscriber shares with the others of its repository. */
  String sharedThreadPrefix() {
    return pipeline.sharedThreadPrefix();
  }

  /** The most receipts one ack statement of this subscriber carried so far. */
  int largestAck() {
    return pipeline.largestAck();
  }

  /** The most messages held at once: claimed or being claimed, and not yet handled. */
  int mostHeld() {
    return pipeline.mostHeld();
  }

  /** Configures a {@link Subscriber}; every value is checked by {@link #start()}. */
  public static final class Builder {
    private final MsgQueueRepository repository;
    private final QueueSpec queue;
    private final MessageHandler handler;
    private final TransactionalMessageHandler transactionalHandler;
    private ConsumeMode mode = ConsumeMode.TRANSACTION;
    private Duration transactionTimeout = DEFAULT_TRANSACTION_TIMEOUT;
    private int concurrency = DEFAULT_CONCURRENCY;
    private int batchSize = DEFAULT_BATCH_SIZE;
    private Integer prefetch; // null: DEFAULT_PREFETCH_BATCHES batches
    private Duration pollInterval = Duration.ofSeconds(1);
    private Duration maxIdlePollInterval = DEFAULT_MAX_IDLE_POLL_INTERVAL;
    private Duration lease;
    private Duration maxHandlerTime = DEFAULT_MAX_HANDLER_TIME;
    private RetryPolicy retryPolicy;
    private Duration ackDelay = DEFAULT_ACK_DELAY;
    private WakeupListener wakeups;
    private Duration closeTimeout = Duration.ofSeconds(30);

    private Builder(MsgQueueRepository repository, QueueSpec queue, MessageHandler handler,
        TransactionalMessageHandler transactionalHandler) {
      this.repository = Arguments.requireNonNull(repository, "repository");
      this.queue = Arguments.requireNonNull(queue, "queue");
      this.handler = handler;
      this.transactionalHandler = transactionalHandler;
    }

    /**
     * How messages are delivered: {@link ConsumeMode#TRANSACTION} (the default, at least once, the handler's writes
     * commit with the message's removal), {@link ConsumeMode#LEASE} (at least once, for handlers longer than a
     * transaction should stay open) or {@link ConsumeMode#AT_MOST_ONCE}. The table on {@link ConsumeMode} compares
     * them.
     */
    public Builder mode(ConsumeMode value) {
      this.mode = Arguments.requireNonNull(value, "mode");
      return this;
    }

    /**
     * {@link ConsumeMode#TRANSACTION}: the longest a held transaction may stay idle while a handler runs, and on
     * PostgreSQL 17 and later the longest it may last, both enforced by the server, which ends a session past it
     * (its messages come back at once, and the delivery counts as failed). A lane stops starting handlers once half of
     * it has passed since it locked its batch and commits what it handled, so a batch of slow handlers ends well
     * within it: a single handler longer than half of it belongs in {@link ConsumeMode#LEASE}. In
     * [{@link Subscriber#MIN_TRANSACTION_TIMEOUT}, {@link Subscriber#MAX_TRANSACTION_TIMEOUT}]; default
     * {@link Subscriber#DEFAULT_TRANSACTION_TIMEOUT}.
     */
    public Builder transactionTimeout(Duration value) {
      this.transactionTimeout = Arguments.requireWithin(value, "transactionTimeout", MIN_TRANSACTION_TIMEOUT,
          MAX_TRANSACTION_TIMEOUT);
      return this;
    }

    /** How many handlers run at once, in [1, 1000]; default {@value Subscriber#DEFAULT_CONCURRENCY}. */
    public Builder concurrency(int value) {
      this.concurrency = value;
      return this;
    }

    /**
     * The most messages one claim takes and one ack statement deletes, in [1, 1000]; default
     * {@value Subscriber#DEFAULT_BATCH_SIZE}.
     */
    public Builder batchSize(int value) {
      this.batchSize = value;
      return this;
    }

    /**
     * Lease and at-most-once modes: the most messages claimed ahead of the handlers, waiting for a free handler or on
     * their way in claims, in [0, {@value Subscriber#MAX_PREFETCH}]; default: two batches, room for two whole claims
     * in flight; {@code n} batches leave room for n claims in flight at once while handlers are quick (up to four);
     * one batch keeps one claim in flight, for the smallest loss in a crash (at most once). Busy handlers fill less
     * of it: while messages wait, a claim is sent only if less than a batch waits or is on its way. At most once, a
     * crash loses at most {@code concurrency + prefetch} messages (those running and those waiting); 0 claims only
     * into free handlers (in claims of at least half a batch or half the handlers, up to four in flight at once). In
     * lease mode a waiting message is started only while at least half its lease remains, else released to the queue
     * unstarted. Held transactions lock their batches in their lanes and take no prefetch.
     */
    public Builder prefetch(int value) {
      this.prefetch = value;
      return this;
    }

    /**
     * How long an idle subscriber waits between claims when no wake-up comes; default 1 s, in
     * [{@link Subscriber#MIN_POLL_INTERVAL}, {@link Subscriber#MAX_POLL_INTERVAL}].
     */
    public Builder pollInterval(Duration value) {
      this.pollInterval = Arguments.requireWithin(value, "pollInterval", MIN_POLL_INTERVAL, MAX_POLL_INTERVAL);
      return this;
    }

    /**
     * The longest wait between idle polls while the {@link #wakeups WakeupListener} is connected: the wait doubles
     * after each empty poll from {@link #pollInterval} up to this, and is back at {@code pollInterval} when a claim
     * finds messages or the listener is not connected. A message that becomes claimable by time rather than by a
     * publish (a publish or release delay running out, a retry backoff, a lapsed lease) sends no wake-up, so it is
     * claimed at most this long after it became due. A value at or below {@code pollInterval} turns the back-off off.
     * Default 30 s ({@link Subscriber#DEFAULT_MAX_IDLE_POLL_INTERVAL}), in [{@link Subscriber#MIN_POLL_INTERVAL},
     * {@link Subscriber#MAX_POLL_INTERVAL}].
     */
    public Builder maxIdlePollInterval(Duration value) {
      this.maxIdlePollInterval =
          Arguments.requireWithin(value, "maxIdlePollInterval", MIN_POLL_INTERVAL, MAX_POLL_INTERVAL);
      return this;
    }

    /**
     * {@link ConsumeMode#LEASE}: how long a claim holds a message: one not acked within it (a handler that threw, or
     * a crashed process) is redelivered. While a handler runs its lease is renewed, up to {@link #maxHandlerTime}.
     * Default {@link Subscriber#DEFAULT_LEASE}; in [1 ms, a year]. Only for lease mode: set
     * {@code mode(ConsumeMode.LEASE)} too.
     */
    public Builder lease(Duration value) {
      this.lease = MsgQueueRepository.requireValidLease(value);
      return this;
    }

    /**
     * What happens to a message whose handler throws: it is retried after the policy's exponential backoff with
     * jitter, and moved to its dead-letter queue after {@code maxDeliveries} deliveries; deliveries cut short by a
     * crash count too (a lease that ran out, a held transaction that ended without commit). See
     * {@link MsgQueueRepository#fail}. {@link ConsumeMode#TRANSACTION}: default
     * {@code RetryPolicy.defaults(queue + "-dead-letters")}. {@link ConsumeMode#LEASE}: without one (the default)
     * a failed message is redelivered when its lease runs out, without limit until it expires. Not for
     * {@link ConsumeMode#AT_MOST_ONCE}.
     */
    public Builder retryPolicy(RetryPolicy value) {
      this.retryPolicy = Arguments.requireNonNull(value, "retryPolicy");
      return this;
    }

    /**
     * Lease mode: how long a running handler's lease is renewed for, from its start; after that its message is
     * redelivered when the lease runs out. In (0, a year]; default 30 minutes.
     */
    public Builder maxHandlerTime(Duration value) {
      this.maxHandlerTime = Arguments.requirePositiveAtMost(value, "maxHandlerTime", MsgQueueConfig.MAX_MESSAGE_LIFETIME);
      return this;
    }

    /**
     * The longest a finished handler's ack waits for others to share its statement, in [0, 1 s]; default 5 ms. A
     * full batch of acks is flushed at once, and close() flushes what is pending.
     */
    public Builder ackDelay(Duration value) {
      this.ackDelay = Arguments.requireWithin(value, "ackDelay", Duration.ZERO, MAX_ACK_DELAY);
      return this;
    }

    /**
     * The process's {@link WakeupListener}, for claims at once after a publish; default (and {@code null}): none,
     * polling only.
     */
    public Builder wakeups(WakeupListener value) {
      this.wakeups = value;
      return this;
    }

    /**
     * The longest {@link Subscriber#close()} waits for running handlers; default 30 s, zero or positive, at most
     * {@link Subscriber#MAX_CLOSE_TIMEOUT}.
     */
    public Builder closeTimeout(Duration value) {
      this.closeTimeout = Arguments.requireWithin(value, "closeTimeout", Duration.ZERO, MAX_CLOSE_TIMEOUT);
      return this;
    }

    int effectivePrefetch() {
      return prefetch == null ? Math.min(MAX_PREFETCH, DEFAULT_PREFETCH_BATCHES * batchSize) : prefetch;
    }

    Duration effectiveLease() {
      return lease == null ? DEFAULT_LEASE : lease;
    }

    /** The handler as the held-transaction mode runs it. */
    TransactionalMessageHandler transactionalHandler() {
      return transactionalHandler != null ? transactionalHandler : (message, transaction) -> handler.handle(message);
    }

    /** The retry policy the mode runs with: the one set, or the held-transaction mode's default. */
    private RetryPolicy effectiveRetryPolicy() {
      if (retryPolicy != null || mode != ConsumeMode.TRANSACTION) {
        return retryPolicy;
      }
      String deadLetters = queue.name() + DEFAULT_DEAD_LETTER_SUFFIX;
      try {
        return RetryPolicy.defaults(deadLetters);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("the default dead-letter queue of \"" + queue.name() + "\" ("
            + e.getMessage() + "): set a retryPolicy naming one", e);
      }
    }

    /**
     * Binds the queue (creating it, or updating its attributes to the spec) and starts claiming.
     *
     * @throws IllegalArgumentException for an invalid setting
     */
    public Subscriber start() {
      Arguments.requireWithin(concurrency, "concurrency", 1, 1_000);
      Arguments.requireWithin(batchSize, "batchSize", 1, 1_000);
      Arguments.requireWithin(effectivePrefetch(), "prefetch", 0, MAX_PREFETCH);
      Arguments.requireWithin(pollInterval, "pollInterval", MIN_POLL_INTERVAL, MAX_POLL_INTERVAL);
      Arguments.requireWithin(maxIdlePollInterval, "maxIdlePollInterval", MIN_POLL_INTERVAL, MAX_POLL_INTERVAL);
      Arguments.requireWithin(transactionTimeout, "transactionTimeout", MIN_TRANSACTION_TIMEOUT,
          MAX_TRANSACTION_TIMEOUT);
      if (lease != null) {
        MsgQueueRepository.requireValidLease(lease);
        if (mode != ConsumeMode.LEASE) {
          throw new IllegalArgumentException("a lease is set but the mode is " + mode + ": the lease applies to"
              + " ConsumeMode.LEASE, set mode(ConsumeMode.LEASE) too (TRANSACTION is the default mode)");
        }
      }
      if (transactionalHandler != null && mode != ConsumeMode.TRANSACTION) {
        throw new IllegalArgumentException("a handler that takes the transaction runs in ConsumeMode.TRANSACTION"
            + " only, and the mode is " + mode);
      }
      if (retryPolicy != null && mode == ConsumeMode.AT_MOST_ONCE) {
        throw new IllegalArgumentException("a retry policy needs an at-least-once mode (TRANSACTION or LEASE), and the"
            + " mode is AT_MOST_ONCE");
      }
      RetryPolicy policy = effectiveRetryPolicy();
      if (policy != null && policy.deadLetterQueue().equals(queue.name())) {
        throw new IllegalArgumentException("the retry policy's dead-letter queue must be another queue than \""
            + queue.name() + "\"");
      }
      Arguments.requirePositiveAtMost(maxHandlerTime, "maxHandlerTime", MsgQueueConfig.MAX_MESSAGE_LIFETIME);
      Arguments.requireWithin(ackDelay, "ackDelay", Duration.ZERO, MAX_ACK_DELAY);
      Arguments.requireWithin(closeTimeout, "closeTimeout", Duration.ZERO, MAX_CLOSE_TIMEOUT);
      HeldConnections connections = null;
      if (mode == ConsumeMode.TRANSACTION) {
        if (Contexts.overOneConnection(repository.context().statements())) {
          throw new IllegalArgumentException("ConsumeMode.TRANSACTION needs a repository that takes connections from"
              + " a pool or data source, not one bound to a single connection");
        }
        connections = HeldConnections.acquire(repository, repository.context().own(),
            HeldPipeline.connectionsFor(concurrency), queue.name());
      }
      Subscriber subscriber;
      try {
        subscriber = new Subscriber(this, policy, connections);
      } catch (RuntimeException | Error e) {
        if (connections != null) {
          connections.release();
        }
        throw e;
      }
      try {
        subscriber.pipeline.start();
      } catch (RuntimeException e) {
        subscriber.unregisterWakeups.run();
        throw e;
      }
      return subscriber;
    }
  }
}
