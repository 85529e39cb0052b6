package dev.msgqueue.internal.consume;

import dev.msgqueue.ClaimedMessage;
import java.util.List;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntSupplier;
import org.slf4j.Logger;

/**
 * The claiming room: claims into a bounded room (free handlers plus the prefetch buffer) and puts what they find on
 * the ready queue for the {@link HandlerPool}.
 *
 * <p>The room is a semaphore of {@code concurrency + prefetch} permits taken before a claim is sent (as many as it
 * asks for) and given back for what it did not find and as each handler ends: so the messages claimed or being
 * claimed never exceed the free room plus the prefetch. While claims find full batches, up to
 * {@link #maxClaimsInFlight} run at once; otherwise one. A claim goes out only while the handlers have run dry or
 * less than a batch waits for them, counting what the claims in flight will bring: so quick handlers get several
 * claims in flight (their rate is then the claims' overlapped rate, not one claim stream's), while busy handlers
 * keep one to two batches waiting, whatever the prefetch. No claim goes out while more than a batch of handled
 * messages waits for its ack (the ack room's unwritten count): their rows stay ASSIGNED at the front of the queue, and
 * claims that ran ahead of the acks each read past all of them. When claims find nothing, the next poll waits a short
 * recheck that doubles up to the poll interval, then idle polls (longer while wake-ups arrive).
 */
final class Claimer {
  private static final Logger log = PipelineContext.LOG;

  private final PipelineContext context;
  /** Tells the handler pool that messages were put on the ready queue. */
  private final Runnable messagesReady;
  /** Handled messages whose ack is not written yet: rows every claim reads past. */
  private final IntSupplier unwrittenAcks;
  private final String queue;
  private final int batchSize;
  private final int claimThreshold;
  private final int fullBatch;
  private final int maxClaimsInFlight;
  private final int maxUnwrittenAcks;
  private final PollSchedule polls; // guarded by claimLock

  /** Free room: handlers plus prefetch, taken before a claim is sent. */
  private final Semaphore slots;
  private final AtomicInteger leastFreeRoom;

  private final Object claimLock = new Object();
  private int claimsInFlight; // guarded by claimLock
  /** The messages the claims in flight asked for; changed under claimLock, read without it by handlerEnded. */
  private final AtomicInteger claiming = new AtomicInteger();
  private boolean fullClaims; // guarded by claimLock: the last claim found all it asked for
  private PipelineThreads.Cancellable nextPoll; // guarded by claimLock
  private final AtomicLong wakeCount = new AtomicLong();
  private final AtomicBoolean waitingForRoom = new AtomicBoolean();

  private volatile boolean running = true; // written under claimLock

  Claimer(PipelineContext context, Runnable messagesReady, IntSupplier unwrittenAcks) {
    this.context = context;
    this.messagesReady = messagesReady;
    this.unwrittenAcks = unwrittenAcks;
    PipelineSettings settings = context.settings;
    this.queue = context.queue;
    this.batchSize = context.batchSize;
    int capacity = settings.capacity();
    this.fullBatch = Math.min(batchSize, capacity);
    this.claimThreshold = Math.max(1, (fullBatch + 1) / 2);
    this.maxClaimsInFlight =
        Math.max(1, Math.min(PipelineContext.MAX_STATEMENTS_IN_FLIGHT, capacity / claimThreshold));
    this.maxUnwrittenAcks = Math.max(batchSize, settings.concurrency());
    this.polls = new PollSchedule(settings);
    this.slots = new Semaphore(capacity);
    this.leastFreeRoom = new AtomicInteger(capacity);
  }

  /** A wake-up: claims at once, and once more a wake-up window later for notifications coalesced away. */
  void wake() {
    wakeCount.incrementAndGet();
    synchronized (claimLock) {
      polls.woken(context.now());
      claimNow();
    }
  }

  /** Whether claims still put messages to work; a claim that returns after this releases its messages. */
  boolean running() {
    return running;
  }

  /**
   * No claim is sent from now on, and a claim that returns from now on hands its messages back: a claim puts its
   * messages to work under the same lock, so each claim's messages are either with the handlers (where close finds
   * them) or handed back by the claim itself.
   */
  void stop() {
    synchronized (claimLock) {
      running = false;
    }
  }

  /** The most messages claimed or being claimed at once and not yet handled (running, waiting or asked for). */
  int mostHeld() {
    return context.settings.capacity() - leastFreeRoom.get();
  }

  /**
   * Cancels the next poll and waits until {@code deadline} for the claims in flight to return (call after
   * {@link #stop}).
   */
  void awaitClaims(long deadline) throws InterruptedException {
    synchronized (claimLock) {
      cancelNextPoll();
      while (claimsInFlight > 0) {
        long remaining = deadline - System.nanoTime();
        if (remaining <= 0) {
          // Stuck in the database: the claim releases its messages itself when it returns.
          log.warn("subscriber of \"{}\" closes with {} claim(s) still running; their messages are released"
              + " when they return", queue, claimsInFlight);
          break;
        }
        TimeUnit.NANOSECONDS.timedWait(claimLock, remaining);
      }
    }
  }

  /** Sends claims while there is room and fewer than the allowed number run; never blocks. */
  void claimNow() {
    synchronized (claimLock) {
      if (!running) {
        return;
      }
      cancelNextPoll();
      int allowed = fullClaims ? maxClaimsInFlight : 1;
      while (claimsInFlight < allowed) {
        // Set before the room is read: a handler that frees room after this read sees it and claims again.
        waitingForRoom.set(true);
        int free = slots.availablePermits();
        if (!worthClaiming(free)) {
          return;
        }
        waitingForRoom.set(false);
        int wanted = Math.min(batchSize, free);
        slots.acquireUninterruptibly(wanted); // never waits: only this lock's holder takes room
        leastFreeRoom.accumulateAndGet(slots.availablePermits(), Math::min);
        claimsInFlight++;
        claiming.addAndGet(wanted);
        long wakesBefore = wakeCount.get();
        if (!context.submit(() -> claim(wanted, wakesBefore))) {
          claimsInFlight--;
          claiming.addAndGet(-wanted);
          slots.release(wanted);
          return;
        }
      }
    }
  }

  /**
   * One claim's task. Whatever happens, it ends by deciding what follows, so claiming never stops silently: a failure
   * nobody expects is logged and claiming goes on after a poll interval; only a {@link VirtualMachineError} ends the
   * task, logged as such.
   */
  private void claim(int wanted, long wakesBefore) {
    int found = -1;
    try {
      found = claimAndDispatch(wanted);
    } catch (VirtualMachineError fatal) {
      log.error("subscriber of \"{}\": a claim failed fatally; claiming again after the poll interval", queue, fatal);
      throw fatal;
    } catch (RuntimeException | Error e) {
      log.error("subscriber of \"{}\": unexpected failure after a claim; claiming again after the poll interval",
          queue, e);
    } finally {
      claimDone(Math.max(0, found), wanted, found < 0, wakesBefore);
    }
  }

  /** @return how many messages the claim found, or -1 if its statement failed (its room is given back either way) */
  private int claimAndDispatch(int wanted) {
    long claimedAt = context.now(); // before the statement: never later than the deadline the server stores
    List<ClaimedMessage> claimed;
    try {
      claimed = context.store.claim(wanted);
      context.claimRounds.incrementAndGet();
    } catch (UnansweredCommit e) {
      // Its messages keep their room until the server tells whether the take committed.
      slots.release(wanted - e.taken().size());
      context.retrying.run(new ResolveTake(e, claimedAt));
      return -1;
    } catch (RuntimeException | Error e) {
      slots.release(wanted);
      if (e instanceof VirtualMachineError fatal) {
        throw fatal;
      }
      if (e instanceof RuntimeException) {
        // One line per failed poll while the database is away; the stack trace only at debug.
        log.warn("subscriber of \"{}\": claim failed ({}), retrying after the poll interval", queue, e.toString());
        log.debug("claim failure", e);
      } else {
        log.error("subscriber of \"{}\": unexpected failure in a claim; claiming again after the poll interval",
            queue, e);
      }
      return -1;
    }
    int found = claimed.size();
    if (context.retries && !claimed.isEmpty()) {
      try {
        claimed = context.store.countRedeliveries(claimed);
      } catch (RuntimeException e) {
        // Delivered uncounted (never lost): their claim stands, and the next failure or lapse counts again.
        log.warn("subscriber of \"{}\": counting redeliveries failed ({}); delivering them uncounted", queue,
            e.toString());
      }
    }
    slots.release(wanted - claimed.size());
    dispatch(claimed, claimedAt);
    return found;
  }

  /**
   * Puts claimed messages (whose room is taken) to work, or hands them back if the subscriber is closing: under the
   * claim lock, so that {@link #stop} comes either before (handed back here) or after (close finds them held).
   */
  private void dispatch(List<ClaimedMessage> claimed, long claimedAt) {
    if (claimed.isEmpty()) {
      return;
    }
    synchronized (claimLock) {
      if (running) {
        for (ClaimedMessage message : claimed) {
          Held entry = new Held(message, claimedAt, claimedAt + context.leaseNanos);
          context.held.put(message.id(), entry);
          context.ready.add(entry);
        }
        messagesReady.run();
        return;
      }
    }
    slots.release(claimed.size());
    context.handBack(claimed);
  }

  /**
   * A take whose commit went unanswered: asks the server whether its transaction committed. If it did, the messages
   * are this subscriber's and go to work (or back, when closing); if not, they are still in the queue. If the server
   * cannot tell within the attempts, they are counted as perhaps lost and logged with their ids: delivering them
   * could deliver them twice, the one thing the at-most-once mode rules out.
   */
  private final class ResolveTake implements Retrying.Act {
    private static final int ATTEMPTS = 8;
    private final UnansweredCommit unanswered;
    private final long claimedAt;

    ResolveTake(UnansweredCommit unanswered, long claimedAt) {
      this.unanswered = unanswered;
      this.claimedAt = claimedAt;
    }

    @Override
    public int attempts() {
      return ATTEMPTS;
    }

    @Override
    public void attempt(int attempt) {
      List<ClaimedMessage> taken = unanswered.taken();
      if (context.store.committed(unanswered.transactionId())) {
        log.warn("subscriber of \"{}\": the commit of a take of {} message(s) went unanswered, and the server says it"
            + " committed: they are handled", queue, taken.size());
        dispatch(taken, claimedAt);
      } else {
        log.warn("subscriber of \"{}\": the commit of a take of {} message(s) went unanswered, and the server says it"
            + " did not commit: they are still in the queue", queue, taken.size());
        slots.release(taken.size());
      }
      claimIfWaiting();
    }

    @Override
    public void gaveUp(RuntimeException last) {
      List<ClaimedMessage> taken = unanswered.taken();
      log.error("subscriber of \"{}\": the commit of a take of {} message(s) went unanswered and the server could not"
          + " tell whether it committed (transaction {}); if it did they are lost, if not they are delivered from"
          + " the queue: ids {}", queue, taken.size(), unanswered.transactionId(), PipelineContext.ids(taken), last);
      context.store.perhapsLost(taken.size());
      context.unresolved.addAndGet(taken.size()); // counted once logged: what reads the count finds the line written
      slots.release(taken.size());
      claimIfWaiting();
    }

    @Override
    public String describe() {
      return "asking whether an unanswered take of " + unanswered.taken().size() + " message(s) committed";
    }
  }

  /** Decides what follows a claim: another at once, a recheck, a poll later, or nothing while others run. */
  private void claimDone(int found, int wanted, boolean claimFailed, long wakesBefore) {
    synchronized (claimLock) {
      claimsInFlight--;
      claiming.addAndGet(-wanted);
      if (!running) {
        claimLock.notifyAll();
        return;
      }
      fullClaims = found == wanted;
      if (found > 0) {
        polls.found();
        claimNow(); // messages were there: there may be more
        return;
      }
      if (!claimFailed && wakeCount.get() != wakesBefore) {
        claimNow(); // a wake-up came while the claim ran: its message may have committed after the claim's snapshot
        return;
      }
      if (claimsInFlight > 0) {
        return; // the last claim to return decides
      }
      long wait = polls.nextWait(claimFailed, context.now());
      schedulePoll(wait);
    }
  }

  private void schedulePoll(long waitNanos) {
    cancelNextPoll();
    try {
      nextPoll = context.threads.schedule(this::claimNow, waitNanos);
    } catch (RejectedExecutionException e) {
      log.debug("subscriber of \"{}\": the shared threads are shut down, no more polls", queue);
    }
  }

  private void cancelNextPoll() {
    if (nextPoll != null) {
      nextPoll.cancel();
      nextPoll = null;
    }
  }

  /**
   * Whether a claim into {@code free} room is worth its statement. Not while more handled messages wait for their ack
   * than a batch (or the handlers, when there are more of them, since that many can finish within one ack statement's
   * round trip): their rows are ASSIGNED at the front of the queue, and a claim sent now reads past all of them, so
   * claims running ahead of the acks multiply the server's CPU per message. While the
   * buffer has run dry (handlers are about to wait), at least half a batch must fit; claims then overlap each other as
   * far as the room allows. While messages wait, a whole batch must fit, and less than a batch may wait or be on its
   * way: busy handlers need a claim's worth of messages ahead of them, not the whole prefetch, which would only wait
   * longer (in lease mode, past half its lease) and be lost in a crash (in the default mode). Claiming whenever half a
   * batch fits would halve the claims of quick handlers (a claim is sent the moment half of the last one is handled),
   * doubling the statements per message for no gain: the other half is handled long before the claim returns.
   */
  private boolean worthClaiming(int free) {
    // Claims running ahead of the acks measured three times the server's CPU per message.
    if (unwrittenAcks.getAsInt() > maxUnwrittenAcks) {
      return false;
    }
    int waiting = context.ready.count();
    if (waiting == 0) {
      return free >= claimThreshold;
    }
    return free >= fullBatch && waiting + claiming.get() < fullBatch;
  }

  /** A handler ended: gives back its room, and claims again if the claims wait for room. */
  void handlerEnded() {
    slots.release();
    claimIfWaiting();
  }

  /** An ack statement returned: claims held back by unwritten acks may go. */
  void ackWritten() {
    claimIfWaiting();
  }

  private void claimIfWaiting() {
    if (waitingForRoom.get() && worthClaiming(slots.availablePermits()) && waitingForRoom.compareAndSet(true, false)) {
      claimNow();
    }
  }
}
