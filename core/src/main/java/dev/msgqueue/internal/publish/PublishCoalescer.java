package dev.msgqueue.internal.publish;

import dev.msgqueue.MsgQueueConnectionException;
import dev.msgqueue.MsgQueueTimeoutException;
import dev.msgqueue.QueueNotFoundException;
import dev.msgqueue.QueueSpec;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import org.jooq.DSLContext;
import org.jooq.JSONB;

/**
 * Group commit for single-message autocommit publishes: concurrent publishes to the same queue (same spec, delay and
 * TTL) from different threads go out as one {@link Publisher#publish} of all their messages, one statement and one
 * commit, and each caller gets back its own id or its own exception.
 *
 * <p>No added latency when idle: a publish that finds no flush in progress for its lane flushes at once, alone.
 * Publishes arriving while a flush is in flight wait and form the next batch (at most {@value #MAX_BATCH} messages),
 * flushed by the first of them as soon as the flush in flight ends. There is no timer.
 *
 * <p>Failures: a lost connection or a timeout is the whole batch's, and each caller gets its own
 * {@link MsgQueueConnectionException} ("outcome unknown") or {@link MsgQueueTimeoutException}; a missing durable queue
 * is every caller's ({@link QueueNotFoundException}, they all named it). Any other failure of a batch of several may
 * be one caller's alone, so each caller then publishes its message again by itself, on its own thread: one caller's
 * problem never becomes another's.
 *
 * <p>Never used inside a caller's transaction: those publishes belong to that transaction.
 */
public final class PublishCoalescer {
  /** The most single-message publishes one coalesced statement carries. */
  public static final int MAX_BATCH = 1_000;

  /** What a waiting caller is told to do instead of receiving its id. */
  private enum Turn { FLUSH, PUBLISH_ALONE }

  private final Publisher publisher;
  private final DSLContext own;
  private final Map<Lane, LaneState> lanes = new ConcurrentHashMap<>();

  /** @param own the repository's own context; each flush takes one connection from it, in autocommit */
  public PublishCoalescer(Publisher publisher, DSLContext own) {
    this.publisher = publisher;
    this.own = own;
  }

  /** Publishes one validated message in autocommit, together with whatever concurrent publishes share its lane. */
  public long publish(QueueSpec spec, JSONB payload, Duration delay, Duration ttl) {
    Lane lane = new Lane(spec, delay, ttl);
    LaneState state = lanes.computeIfAbsent(lane, key -> new LaneState());
    Request request = new Request(payload);
    boolean flushNow;
    synchronized (state) {
      flushNow = !state.flushing;
      if (flushNow) {
        state.flushing = true;
      } else {
        state.waiting.add(request);
      }
    }
    if (!flushNow) {
      Object outcome = request.outcome.join();
      if (outcome != Turn.FLUSH) {
        return settle(outcome, lane, payload);
      }
    }
    flush(lane, state, request);
    return settle(request.outcome.join(), lane, payload);
  }

  /** Flushes {@code first} and up to {@code MAX_BATCH - 1} waiting requests, then hands the lane on. */
  private void flush(Lane lane, LaneState state, Request first) {
    List<Request> batch = new ArrayList<>();
    batch.add(first);
    synchronized (state) {
      while (batch.size() < MAX_BATCH && !state.waiting.isEmpty()) {
        batch.add(state.waiting.poll());
      }
    }
    // A waiting request was handed this turn through its outcome: it needs a fresh one for its result.
    first.outcome = new CompletableFuture<>();
    try {
      List<JSONB> payloads = new ArrayList<>(batch.size());
      batch.forEach(request -> payloads.add(request.payload));
      List<Long> ids = publisher.publish(own, lane.spec(), payloads, lane.delay(), lane.ttl());
      for (int i = 0; i < batch.size(); i++) {
        batch.get(i).outcome.complete(ids.get(i));
      }
    } catch (QueueNotFoundException | MsgQueueConnectionException | MsgQueueTimeoutException e) {
      batch.forEach(request -> request.outcome.complete(new Failure(e)));
    } catch (RuntimeException | Error e) {
      if (batch.size() == 1) {
        first.outcome.complete(new Failure(e));
      } else {
        first.outcome.complete(Turn.PUBLISH_ALONE);
        batch.subList(1, batch.size()).forEach(request -> request.outcome.complete(Turn.PUBLISH_ALONE));
      }
    } finally {
      handOn(lane, state);
    }
  }

  /** Lets the first waiting request flush next, or marks the lane idle (and forgets it, bounding the memory). */
  private void handOn(Lane lane, LaneState state) {
    Request next;
    synchronized (state) {
      next = state.waiting.poll();
      if (next == null) {
        state.flushing = false;
        // A publish holding this state object still coalesces on it correctly; the next one gets a fresh state.
        lanes.remove(lane, state);
        return;
      }
    }
    next.outcome.complete(Turn.FLUSH);
  }

  private long settle(Object outcome, Lane lane, JSONB payload) {
    if (outcome instanceof Long id) {
      return id;
    }
    if (outcome == Turn.PUBLISH_ALONE) {
      return publisher.publish(own, lane.spec(), List.of(payload), lane.delay(), lane.ttl()).get(0);
    }
    throw ((Failure) outcome).forThisCaller(lane.spec());
  }

  /** Publishes that may share a statement: the same queue spec, and the same delay and TTL for every message. */
  private record Lane(QueueSpec spec, Duration delay, Duration ttl) { }

  private static final class LaneState {
    boolean flushing;
    final ArrayDeque<Request> waiting = new ArrayDeque<>();
  }

  private static final class Request {
    final JSONB payload;
    /** Completed with the id, a {@link Failure}, or a {@link Turn}. */
    volatile CompletableFuture<Object> outcome = new CompletableFuture<>();

    Request(JSONB payload) {
      this.payload = payload;
    }
  }

  /** A batch failure, rethrown in each caller's thread as its own exception (with the batch's as the cause). */
  private record Failure(Throwable cause) {
    RuntimeException forThisCaller(QueueSpec spec) {
      if (cause instanceof MsgQueueConnectionException) {
        return new MsgQueueConnectionException(cause.getMessage(), cause);
      }
      if (cause instanceof MsgQueueTimeoutException) {
        return new MsgQueueTimeoutException(cause.getMessage(), cause);
      }
      if (cause instanceof QueueNotFoundException) {
        return new QueueNotFoundException(spec.name());
      }
      if (cause instanceof RuntimeException runtime) {
        return runtime;
      }
      throw (Error) cause;
    }
  }
}
