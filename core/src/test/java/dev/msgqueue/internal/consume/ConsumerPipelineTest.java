package dev.msgqueue.internal.consume;

import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.MessageHandler;
import dev.msgqueue.TestMessages;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;

/**
 * The consuming pipeline over a store in memory and threads the test runs itself: the exact order of claims, handler
 * ends, timers and close, and what the pipeline asks of the database each time. No test sleeps.
 */
class ConsumerPipelineTest {
  private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);
  private static final Duration LEASE = Duration.ofSeconds(30);

  private final ManualThreads threads = new ManualThreads();
  private final FakeStore store = new FakeStore(threads);
  private final List<Long> handled = Collections.synchronizedList(new ArrayList<>());

  private static PipelineSettings settings(int concurrency, int batchSize, int prefetch, Duration lease) {
    return new PipelineSettings(concurrency, batchSize, prefetch, Duration.ofSeconds(1), Duration.ofSeconds(30),
        lease, false, Duration.ofMinutes(30), Duration.ofMillis(5), Duration.ofSeconds(30), Duration.ofMillis(100),
        null);
  }

  private ConsumerPipeline pipeline(PipelineSettings settings, MessageHandler handler) {
    return new ConsumerPipeline(store, handler, settings, threads);
  }

  private ConsumerPipeline recording(PipelineSettings settings) {
    return pipeline(settings, message -> handled.add(message.id()));
  }

  private static String ids(long from, long to) {
    return LongStream.rangeClosed(from, to).boxed().toList().toString();
  }

  @Test
  void claimsInFlightAndHeldMessagesNeverExceedTheRoom() {
    store.publish(1, 500);
    ConsumerPipeline pipeline = recording(settings(4, 10, 20, null));
    pipeline.start();
    Random random = new Random(42); // a fixed interleaving of claims, handlers and time, the same on every run
    for (int step = 0; step < 100_000 && handled.size() < 500; step++) {
      switch (random.nextInt(3)) {
        case 0 -> threads.runWorker();
        case 1 -> threads.runHandler();
        default -> threads.advance(random.nextInt(3) * MS);
      }
    }
    assertThat(handled).hasSize(500).doesNotHaveDuplicates();
    // The room is concurrency + prefetch = 24: claimed, unhandled messages plus what the claim answered asked for.
    assertThat(store.mostOutstandingWithAsked).isLessThanOrEqualTo(24);
    assertThat(pipeline.mostHeld()).isBetween(10, 24);
    threads.runAll();
    assertThat(pipeline.close(Duration.ZERO)).isTrue();
  }

  @Test
  void aClaimThatReturnsAfterCloseHandsItsMessagesBackUnstarted() {
    store.publish(1, 10);
    ConsumerPipeline pipeline = recording(settings(1, 10, 10, null));
    pipeline.start();
    assertThat(threads.queuedWorkers()).as("the first claim, sent but not answered yet").isEqualTo(1);

    assertThat(pipeline.close(Duration.ZERO)).isTrue();
    assertThat(threads.released()).isTrue();
    threads.runAll(); // the claim's statement returns only now

    assertThat(store.events()).containsExactly("t=0 bind", "t=0 claim(10)->" + ids(1, 10), "t=0 handBack" + ids(1, 10));
    assertThat(handled).isEmpty();
    assertThat(store.outstanding).isZero();
  }

  @Test
  void closeWaitsForAClaimPuttingItsMessagesToWorkThenHandsThemBack() throws Exception {
    store.publish(1, 10);
    ConsumerPipeline pipeline = recording(settings(1, 10, 10, null));
    AtomicReference<Thread> closer = new AtomicReference<>();
    AtomicBoolean closeWasBlocked = new AtomicBoolean();
    threads.onHandlerTask = task -> {
      if (closer.get() != null) {
        return;
      }
      // The claim is putting its messages to work, under the claim lock: a close now must wait for it.
      Thread closing = new Thread(() -> pipeline.close(Duration.ZERO), "test-closer");
      closer.set(closing);
      closing.start();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (closing.getState() != Thread.State.BLOCKED && closing.isAlive() && System.nanoTime() < deadline) {
        Thread.onSpinWait();
      }
      closeWasBlocked.set(closing.getState() == Thread.State.BLOCKED);
    };
    pipeline.start();
    threads.runWorker(); // the claim: it returns 10 messages and puts them to work while close() is called
    closer.get().join(TimeUnit.SECONDS.toMillis(30));
    threads.runAll(); // the handler task queued before close: it must start nothing now

    assertThat(closeWasBlocked).as("close waited for the claim putting its messages to work").isTrue();
    assertThat(closer.get().isAlive()).isFalse();
    assertThat(store.events()).containsExactly("t=0 bind", "t=0 claim(10)->" + ids(1, 10), "t=0 handBack" + ids(1, 10));
    assertThat(handled).isEmpty();
  }

  @Test
  void aClaimAndACloseRacingOnRealThreadsNeverStrandAMessage() throws Exception {
    // The bounded stress run beside the deterministic tests above: a real claim thread and a real closing thread.
    for (int round = 0; round < 300; round++) {
      ManualThreads roundThreads = new ManualThreads();
      FakeStore roundStore = new FakeStore(roundThreads).publish(1, 20);
      List<Long> started = Collections.synchronizedList(new ArrayList<>());
      ConsumerPipeline pipeline = new ConsumerPipeline(roundStore, message -> started.add(message.id()),
          settings(2, 20, 20, null), roundThreads);
      pipeline.start();
      Thread claiming = new Thread(roundThreads::runWorker, "test-claim");
      claiming.start();
      pipeline.close(Duration.ZERO);
      claiming.join();
      roundThreads.runAll();
      // Every message is either started by a handler before close or handed back, never both, never neither.
      assertThat(roundStore.outstanding).as("round %d: %s", round, roundStore.events()).isZero();
      assertThat(started).doesNotHaveDuplicates();
    }
  }

  @Test
  void aFailedAckIsRepeatedOnTheTimerThenItsMessagesAreReleased() {
    store.publish(1, 2);
    store.failingAcks = 5;
    ConsumerPipeline pipeline = recording(settings(2, 2, 0, LEASE));
    pipeline.start();
    threads.runAll(); // claim [1, 2], both handled: a full batch of acks goes at once, and fails
    for (int step = 0; step < 1_000 && store.events().stream().noneMatch(e -> e.contains("handBack")); step++) {
      threads.advanceToNextTimer();
      threads.runAll();
    }

    assertThat(handled).containsExactly(1L, 2L);
    assertThat(store.events()).filteredOn(e -> e.contains("ack") || e.contains("handBack")).containsExactly(
        "t=0 ack[1, 2] failed", "t=50 ack[1, 2] failed", "t=150 ack[1, 2] failed", "t=350 ack[1, 2] failed",
        "t=750 ack[1, 2] failed", "t=1550 handBack[1, 2]");
    assertThat(pipeline.close(Duration.ZERO)).isTrue();
  }

  @Test
  void aFailedLeaseRenewalIsRepeatedShortlyWhileTheHandlerRuns() {
    store.publish(1, 1);
    store.failingRenewals = 1;
    Duration lease = Duration.ofSeconds(1);
    ConsumerPipeline pipeline = pipeline(settings(1, 1, 0, lease), message -> {
      threads.advance(600 * MS); // past half the lease: the renewal is due
      threads.runWorkers();
      threads.advance(50 * MS); // a twentieth of the lease later: the renewal is tried again
      threads.runWorkers();
      handled.add(message.id());
    });
    pipeline.start();
    threads.runAll();

    assertThat(store.events()).filteredOn(e -> e.contains("extend") || e.contains("ack")).containsExactly(
        "t=600 extend[1] failed", "t=650 extend[1]", "t=650 ack[1]");
    assertThat(handled).containsExactly(1L);
    assertThat(pipeline.close(Duration.ZERO)).isTrue();
  }

  @Test
  void aFailedHandBackOnCloseIsRepeatedThenGivenUpWithoutWaitingOnAWorker() {
    store.publish(1, 5);
    store.failingHandBacks = 5;
    ConsumerPipeline pipeline = recording(settings(1, 5, 5, null));
    pipeline.start();
    threads.runWorkers(); // claim [1..5]; the handler task is queued, never run: all five are unstarted at close

    assertThat(pipeline.close(Duration.ZERO)).isFalse();

    assertThat(store.events()).filteredOn(e -> e.contains("handBack")).containsExactly(
        "t=0 handBack" + ids(1, 5) + " failed", "t=50 handBack" + ids(1, 5) + " failed",
        "t=150 handBack" + ids(1, 5) + " failed", "t=350 handBack" + ids(1, 5) + " failed",
        "t=750 handBack" + ids(1, 5) + " failed");
    assertThat(threads.queuedWorkers()).as("close made every attempt itself").isZero();
    assertThat(handled).isEmpty();
  }

  @Test
  void anUnansweredTakeThatCommittedIsHandledOnce() {
    List<ClaimedMessage> taken = List.of(TestMessages.message(FakeStore.QUEUE, 1), TestMessages.message(FakeStore.QUEUE, 2));
    store.onClaim = max -> {
      store.onClaim = null; // only the first take's commit goes unanswered
      throw new UnansweredCommit(FakeStore.QUEUE, taken, 77, new IllegalStateException("connection lost (test)"));
    };
    store.commitAnswers.add(null); // the server is not back yet: asked again after the backoff
    store.commitAnswers.add(true);
    ConsumerPipeline pipeline = recording(settings(2, 10, 0, null));
    pipeline.start();
    threads.runAll();
    threads.advance(50 * MS);
    threads.runAll();

    assertThat(store.events()).filteredOn(e -> e.contains("committed")).containsExactly(
        "t=0 committed(77)->null", "t=50 committed(77)->true");
    assertThat(handled).containsExactly(1L, 2L);
    assertThat(pipeline.close(Duration.ZERO)).isTrue();
  }

  @Test
  void anUnansweredTakeThatDidNotCommitIsLeftToTheQueue() {
    store.publish(1, 2);
    store.onClaim = max -> {
      store.onClaim = null;
      throw new UnansweredCommit(FakeStore.QUEUE, List.of(TestMessages.message(FakeStore.QUEUE, 1),
          TestMessages.message(FakeStore.QUEUE, 2)), 78, new IllegalStateException("connection lost (test)"));
    };
    store.commitAnswers.add(false);
    ConsumerPipeline pipeline = recording(settings(2, 10, 0, null));
    pipeline.start();
    threads.runAll();
    // The failed claim is followed by a poll after the poll interval: the two are still queued, and claimed then.
    threads.advance(TimeUnit.SECONDS.toNanos(1));
    threads.runAll();

    assertThat(store.events()).filteredOn(e -> e.contains("claim") || e.contains("committed")).containsExactly(
        "t=0 committed(78)->false", "t=1000 claim(2)->[1, 2]", "t=1000 claim(2)->[]");
    assertThat(handled).containsExactly(1L, 2L);
    assertThat(pipeline.close(Duration.ZERO)).isTrue();
  }

  @Test
  void anUnansweredTakeWhoseOutcomeStaysUnknownIsCountedAndNotDelivered() {
    store.onClaim = max -> {
      store.onClaim = null;
      throw new UnansweredCommit(FakeStore.QUEUE, List.of(TestMessages.message(FakeStore.QUEUE, 1),
          TestMessages.message(FakeStore.QUEUE, 2)), 79, new IllegalStateException("connection lost (test)"));
    };
    ConsumerPipeline pipeline = recording(settings(2, 10, 0, null));
    pipeline.start();
    threads.runAll();
    for (int step = 0; step < 100 && store.events().stream().noneMatch(e -> e.contains("perhapsLost")); step++) {
      threads.advanceToNextTimer();
      threads.runAll();
    }

    assertThat(store.events()).filteredOn(e -> e.contains("committed")).hasSize(8);
    assertThat(store.events()).filteredOn(e -> e.contains("perhapsLost")).containsExactly("t=3550 perhapsLost(2)");
    assertThat(pipeline.unresolved()).isEqualTo(2);
    assertThat(handled).isEmpty();
    assertThat(pipeline.close(Duration.ZERO)).isTrue();
  }
}
