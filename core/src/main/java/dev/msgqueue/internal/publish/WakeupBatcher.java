package dev.msgqueue.internal.publish;

import dev.msgqueue.internal.sql.NotifyStatements;
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.jooq.DSLContext;

/**
 * Group commit for the wake-up notifications of autocommit publishes, across queues: a notification that finds none
 * in flight is sent at once, alone; the ones arriving meanwhile, whatever their queue, wait and go out together as the
 * next statement ({@link NotifyStatements#notifyWakeups}), sent by the first of them as soon as the one in flight
 * ends. There is no timer, so an idle publisher pays nothing.
 *
 * <p>Why: a transaction that notifies takes PostgreSQL's database-wide notification lock from its pre-commit until
 * its commit record is flushed, so notifying transactions commit one at a time, each with a WAL flush of its own
 * (notifying assigns a transaction id). Publishing to many queues, nearly every publish is its queue's first in the
 * wake-up window and notifies: one such commit per message, in series. Batched, one commit carries the notifications
 * of every publish that arrived while the previous one was in flight.
 *
 * <p>A caller returns once its own notification has been sent (or has failed), as before; it waits for at most the
 * one in flight and its own batch, which it would otherwise have waited for at the server's notification lock.
 */
final class WakeupBatcher {
  private final Object lock = new Object();
  /** Guarded by {@link #lock}: whether a notification statement is in flight. */
  private boolean sending;
  /** Guarded by {@link #lock}: the batch that goes out when the one in flight ends; {@code null} if none waits. */
  private Batch next;

  /** Sends the wake-up of {@code queue} through {@code ctx} (in autocommit), alone or with others'. */
  void send(DSLContext ctx, String queue) {
    Batch batch;
    boolean sendsBatch;
    synchronized (lock) {
      if (!sending) {
        sending = true;
        batch = null;
        sendsBatch = false;
      } else {
        sendsBatch = next == null;
        if (sendsBatch) {
          next = new Batch();
        }
        batch = next;
        batch.queues.add(queue);
      }
    }
    if (batch == null) {
      try {
        NotifyStatements.notifyWakeup(ctx, queue);
      } finally {
        handOn();
      }
      return;
    }
    if (sendsBatch) {
      batch.turn.join();
      try {
        // handOn took the batch out of next under the lock: no queue is added to it any more.
        NotifyStatements.notifyWakeups(ctx, batch.queues);
        batch.sent.complete(null);
      } catch (RuntimeException | Error e) {
        batch.sent.completeExceptionally(e);
        throw e;
      } finally {
        handOn();
      }
      return;
    }
    try {
      batch.sent.join();
    } catch (CompletionException e) {
      // The batch's failure, rethrown in this caller's thread (the sender's stack is in the cause).
      throw new IllegalStateException("the wake-up notification of \"" + queue + "\" failed", e.getCause());
    }
  }

  /** Lets the waiting batch go out next, or marks nothing in flight. */
  private void handOn() {
    Batch waiting;
    synchronized (lock) {
      waiting = next;
      next = null;
      if (waiting == null) {
        sending = false;
        return;
      }
    }
    waiting.turn.complete(null);
  }

  private static final class Batch {
    /** Guarded by the batcher's lock until the batch is taken out of {@code next}. */
    final Set<String> queues = new LinkedHashSet<>();
    /** Completed when the batch's sender may send it. */
    final CompletableFuture<Void> turn = new CompletableFuture<>();
    final CompletableFuture<Void> sent = new CompletableFuture<>();
  }
}
