package dev.msgqueue.internal.consume;

import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.TransactionalMessageHandler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The held-transaction pipeline over a store in memory and threads the test runs: what each lane asks of the database,
 * in order, for a clean batch, a batch with a failing handler, messages whose earlier deliveries died, and close.
 */
class HeldPipelineTest {
  private final ManualThreads threads = new ManualThreads();
  private final FakeStore store = new FakeStore(threads);
  private final List<Long> handled = Collections.synchronizedList(new ArrayList<>());

  private static PipelineSettings settings(int concurrency, int batchSize) {
    return new PipelineSettings(concurrency, batchSize, 0, Duration.ofSeconds(1), Duration.ofSeconds(30), null, false,
        Duration.ofMinutes(30), Duration.ofMillis(5), Duration.ofSeconds(30), Duration.ofMillis(100), null);
  }

  private HeldPipeline pipeline(int concurrency, int batchSize, TransactionalMessageHandler handler) {
    return new HeldPipeline(store, handler, settings(concurrency, batchSize), Duration.ofSeconds(60), threads,
        HeldConnections.uncounted());
  }

  private List<String> databaseActs() {
    return store.events().stream().filter(e -> !e.contains("bind")).map(e -> e.substring(e.indexOf(' ') + 1))
        .toList();
  }

  @Test
  void aBatchIsLockedHandledDeletedAndCommittedInOneTransaction() {
    store.publish(1, 3);
    HeldPipeline pipeline = pipeline(1, 10, (message, tx) -> handled.add(message.id()));
    pipeline.start();
    threads.runAll();

    assertThat(handled).containsExactly(1L, 2L, 3L);
    // After a batch that was not full the lane looks for quarantined messages, at most once a poll interval.
    assertThat(databaseActs()).containsExactly(
        "lock(10)->[1, 2, 3]", "delete[1, 2, 3]", "commit",
        "lockQuarantined->none", "commit",
        "lock(10)->[]", "commit");
    assertThat(pipeline.acked()).isEqualTo(3);
    assertThat(pipeline.close(Duration.ZERO)).isTrue();
  }

  @Test
  void aHandlerThatThrowsFailsAloneItsBatchMatesCommitOneTransactionEach() {
    store.publish(1, 3);
    List<Long> calls = Collections.synchronizedList(new ArrayList<>());
    HeldPipeline pipeline = pipeline(1, 10, (message, tx) -> {
      calls.add(message.id());
      if (message.id() == 2) {
        throw new IllegalStateException("handler failed (test)");
      }
    });
    pipeline.start();
    threads.runAll();

    // 1 ran before the failure, its writes rolled back with the batch: it runs again, and commits alone. 2 is settled
    // by the retry policy without running again. 3 runs once.
    assertThat(calls).containsExactly(1L, 2L, 1L, 3L);
    assertThat(databaseActs()).containsExactly(
        "lock(10)->[1, 2, 3]", "rollback",
        "lockAgain[1, 2, 3]->[1, 2, 3]", "delete[1]", "commit",
        "lockAgain[2, 3]->[2, 3]", "retryLater(2)", "commit",
        "lockAgain[3]->[3]", "delete[3]", "commit",
        "lockQuarantined->none", "commit",
        "lock(10)->[]", "commit");
    assertThat(pipeline.acked()).isEqualTo(2);
    assertThat(pipeline.close(Duration.ZERO)).isTrue();
  }

  @Test
  void aMessageWhoseDeliveriesKeptEndingWithoutCommitIsDeadLetteredAtItsLastOne() {
    store.publish(1, 2);
    store.crashedBefore(1);
    store.failedDeliveries.put(1L, 4); // four deliveries ended without commit already; the policy allows five
    HeldPipeline pipeline = pipeline(1, 10, (message, tx) -> handled.add(message.id()));
    pipeline.start();
    threads.runAll();

    assertThat(handled).containsExactly(2L);
    assertThat(databaseActs()).containsExactly(
        "lock(10)->[1, 2]", "countEnded[1]", "deadLetterEnded(1)", "delete[2]", "commit",
        "lockQuarantined->none", "commit",
        "lock(10)->[]", "commit");
    assertThat(pipeline.deadLettered()).isEqualTo(1);
    assertThat(pipeline.close(Duration.ZERO)).isTrue();
  }

  @Test
  void aDeliveryThatEndedWithoutCommitIsCountedAndTheMessageHandledWhileDeliveriesRemain() {
    store.publish(1, 1);
    store.crashedBefore(1);
    HeldPipeline pipeline = pipeline(1, 10, (message, tx) -> handled.add(message.id()));
    pipeline.start();
    threads.runAll();

    assertThat(handled).containsExactly(1L);
    assertThat(store.failedDeliveries).containsEntry(1L, 1);
    // Quarantined by a transaction that commits at once, then handled alone: locked on its own, so a crash in its
    // handler takes no other message with it.
    assertThat(databaseActs()).startsWith("lock(10)->[1]", "countEnded[1]", "quarantine[1]", "commit",
        "lockQuarantined[1]->1", "delete[1]", "commit", "lockQuarantined->none", "commit");
    assertThat(pipeline.close(Duration.ZERO)).isTrue();
  }

  @Test
  void aBatchWithDeliveriesThatEndedWithoutCommitQuarantinesThemAndEachIsHandledAlone() {
    store.publish(1, 4);
    store.crashedBefore(2);
    store.crashedBefore(3);
    HeldPipeline pipeline = pipeline(1, 10, (message, tx) -> handled.add(message.id()));
    pipeline.start();
    threads.runAll();

    assertThat(handled).containsExactly(2L, 3L, 1L, 4L);
    assertThat(databaseActs()).containsExactly(
        "lock(10)->[1, 2, 3, 4]", "countEnded[2, 3]", "quarantine[2, 3]", "commit",
        "lockQuarantined[2, 3]->2", "delete[2]", "commit",
        "lockQuarantined[3]->3", "delete[3]", "commit",
        "lockQuarantined->none", "commit",
        "lock(10)->[1, 4]", "delete[1, 4]", "commit",
        "lock(10)->[]", "commit");
    assertThat(pipeline.close(Duration.ZERO)).isTrue();
  }

  @Test
  void messagesAnotherConsumerQuarantinedAreFoundByASearchOfTheQueueOnceAPollInterval() {
    store.publish(1, 2);
    store.quarantinedByAnother(7);
    HeldPipeline pipeline = pipeline(1, 1, (message, tx) -> handled.add(message.id()));
    pipeline.start();
    threads.runAll();

    // Full batches search nothing; the first batch that is not full searches the queue and finds 7; the next batch
    // that is not full comes within the poll interval and searches nothing.
    assertThat(handled).containsExactly(1L, 2L, 7L);
    assertThat(databaseActs()).containsExactly(
        "lock(1)->[1]", "delete[1]", "commit",
        "lock(1)->[2]", "delete[2]", "commit",
        "lock(1)->[]", "commit",
        "lockQuarantined->7", "delete[7]", "commit",
        "lockQuarantined->none", "commit",
        "lock(1)->[]", "commit"); // the second lane, started while batches came back full
    assertThat(pipeline.close(Duration.ZERO)).isTrue();
  }

  @Test
  void aQuarantinedMessageWhoseHandlingDiedAgainIsCountedAloneAndDeadLetteredAtItsLastDelivery() {
    store.publish(1, 2);
    store.crashedBefore(1);
    store.failedDeliveries.put(1L, 3);
    store.maxDeliveries = 5;
    List<Long> calls = Collections.synchronizedList(new ArrayList<>());
    HeldPipeline pipeline = pipeline(1, 10, (message, tx) -> {
      calls.add(message.id());
      if (message.id() == 1) {
        throw new CrashInTest(); // an Error from the handler: the consumer "dies" in its transaction
      }
    });
    pipeline.start();
    threads.runAll();
    // First delivery of the lot ends in a rolled-back transaction, as a crash's: counted once more, then dead-lettered.
    threads.advance(TimeUnit.SECONDS.toNanos(2));
    threads.runAll();

    assertThat(databaseActs()).startsWith(
        "lock(10)->[1, 2]", "countEnded[1]", "quarantine[1]", "commit",
        "lockQuarantined[1]->1", "rollback");
    assertThat(store.failedDeliveries).containsEntry(1L, 5);
    assertThat(databaseActs()).contains("deadLetterEnded(1)");
    assertThat(calls).containsExactly(1L, 2L);
    pipeline.close(Duration.ZERO);
  }

  /** A handler that dies in a way no handler catches, in place of a killed process. */
  private static final class CrashInTest extends Error {
    private static final long serialVersionUID = 1L;
  }

  @Test
  void closeGivesBackTheBatchOfALaneWaitingForItsTurnAndLetsTheRunningOneFinish() throws Exception {
    store.publish(1, 4);
    CountDownLatch firstStarted = new CountDownLatch(1);
    CountDownLatch mayFinish = new CountDownLatch(1);
    HeldPipeline pipeline = pipeline(1, 2, (message, tx) -> {
      if (message.id() == 1) {
        firstStarted.countDown();
        mayFinish.await();
      }
      handled.add(message.id());
    });
    pipeline.start(); // one lane queued
    Thread laneA = new Thread(threads::runHandler, "test-lane-a");
    laneA.start();
    assertThat(firstStarted.await(30, TimeUnit.SECONDS)).isTrue();
    // Lane A's batch was full: a second lane was started, and locks the next batch, then waits for its turn.
    Thread laneB = new Thread(threads::runHandler, "test-lane-b");
    laneB.start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (laneB.getState() != Thread.State.WAITING && laneB.isAlive() && System.nanoTime() < deadline) {
      Thread.onSpinWait();
    }
    assertThat(laneB.getState()).isEqualTo(Thread.State.WAITING);

    Thread closing = new Thread(() -> pipeline.close(Duration.ofSeconds(30)), "test-close");
    closing.start();
    laneB.join(TimeUnit.SECONDS.toMillis(30)); // B gives its batch back without running a handler
    mayFinish.countDown(); // A's handler finishes; A stops starting handlers, deletes what it did, commits
    laneA.join(TimeUnit.SECONDS.toMillis(30));
    closing.join(TimeUnit.SECONDS.toMillis(30));

    assertThat(handled).containsExactly(1L);
    assertThat(databaseActs()).containsExactly(
        "lock(2)->[1, 2]", "lock(2)->[3, 4]", "commit", "delete[1]", "commit");
    assertThat(pipeline.released()).isEqualTo(3);
  }
}
