package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the rooms of one subscriber's pipeline share: the store and threads, the settings they all read, the messages
 * held, the hand-offs between rooms, the retries, and the counters. It knows none of the rooms.
 */
final class PipelineContext {
  /**
   * The pipeline's one logger, under the coordinator's name so that one setting covers the lines of every room; named
   * by string so that the rooms do not depend on the coordinator.
   */
  static final Logger LOG = LoggerFactory.getLogger("dev.msgqueue.internal.consume.ConsumerPipeline");
  static final long NEVER = Long.MAX_VALUE;
  /** The most claims (and, separately, ack statements) of one subscriber in flight at once. */
  static final int MAX_STATEMENTS_IN_FLIGHT = 4;
  /** Attempts of one hand-back. */
  static final int HAND_BACK_ATTEMPTS = 5;

  final ConsumerStore store;
  final PipelineThreads threads;
  final PipelineSettings settings;
  final Retrying retrying;
  final String queue;
  final int batchSize;
  final Duration lease;
  final long leaseNanos;
  final boolean retries;

  /** Every message claimed and not yet acked, failed or handed back, by id. */
  final Map<Long, Held> held = new ConcurrentHashMap<>();
  /** Claimed messages waiting for a handler. */
  final ReadyMessages ready = new ReadyMessages();
  /** Claimed messages that will not be started: handed back by the next housekeeping round or by close. */
  final ConcurrentLinkedQueue<Held> unstarted = new ConcurrentLinkedQueue<>();
  /** Failed handlers waiting for the retry policy (retries only): settled by a housekeeping round or by close. */
  final ConcurrentLinkedQueue<Failure> failures = new ConcurrentLinkedQueue<>();
  /**
   * Lease mode: a renewal replaces receipts, so it excludes the ack statements and failure settlements that read
   * them (those share it among themselves); an ack therefore never sends a receipt a renewal is about to replace.
   */
  final ReadWriteLock receipts = new ReentrantReadWriteLock();

  final AtomicLong claimRounds = new AtomicLong();
  final AtomicLong ackFlushes = new AtomicLong();
  final AtomicLong leaseRenewals = new AtomicLong();
  final AtomicLong wakeups = new AtomicLong();
  final AtomicLong acked = new AtomicLong();
  final AtomicLong failed = new AtomicLong();
  final AtomicLong released = new AtomicLong();
  final AtomicLong deadLettered = new AtomicLong();
  final AtomicLong unresolved = new AtomicLong();
  final AtomicInteger largestAck = new AtomicInteger();

  PipelineContext(ConsumerStore store, PipelineSettings settings, PipelineThreads threads) {
    this.store = store;
    this.settings = settings;
    this.threads = threads;
    this.queue = store.queueName();
    this.retrying = new Retrying(threads, queue);
    this.batchSize = settings.batchSize();
    this.lease = settings.lease();
    this.retries = settings.retries();
    this.leaseNanos = lease == null ? 0 : lease.toNanos();
  }

  long now() {
    return threads.nanoTime();
  }

  /**
   * Takes the receipts lock for reading in lease mode (in the at-most-once mode receipts never change).
   *
   * @return the lock to unlock, or null if none was taken
   */
  Lock readReceipts() {
    if (lease == null) {
      return null;
    }
    Lock lock = receipts.readLock();
    lock.lock();
    return lock;
  }

  static void unlock(Lock lock) {
    if (lock != null) {
      lock.unlock();
    }
  }

  /** Where messages whose settling failed end up, by mode: the tail of a log line. */
  String unsettledFate() {
    return lease != null ? "; they are redelivered after their lease" : "; they were taken and are lost";
  }

  /**
   * Hands {@code messages} back to the queue ({@link ConsumerStore#handBack}), in statements of at most a batch,
   * each repeated by {@link Retrying} if it fails: in the at-most-once mode the claim took them, so a hand-back that
   * fails for good loses them (logged with their ids).
   */
  void handBack(List<ClaimedMessage> messages) {
    for (int from = 0; from < messages.size(); from += batchSize) {
      List<ClaimedMessage> part = List.copyOf(messages.subList(from, Math.min(messages.size(), from + batchSize)));
      HandBack handBack = store.handBack(part);
      retrying.run(new Retrying.Act() {
        @Override
        public int attempts() {
          return HAND_BACK_ATTEMPTS;
        }

        @Override
        public void attempt(int attempt) {
          released.addAndGet(handBack.attempt());
        }

        @Override
        public void gaveUp(RuntimeException last) {
          LOG.error("could not hand back {} message(s) of \"{}\" after {} attempts{}: ids {}", part.size(), queue,
              HAND_BACK_ATTEMPTS, unsettledFate(), ids(part), last);
        }

        @Override
        public String describe() {
          return "handing back " + part.size() + " message(s)";
        }
      });
    }
  }

  static List<Long> ids(List<ClaimedMessage> messages) {
    List<Long> ids = new ArrayList<>(messages.size());
    messages.forEach(message -> ids.add(message.id()));
    return ids;
  }

  boolean submit(Runnable task) {
    try {
      threads.execute(task);
      return true;
    } catch (RejectedExecutionException e) {
      return false;
    }
  }

  record Failure(Held entry, Throwable error) { }
}
