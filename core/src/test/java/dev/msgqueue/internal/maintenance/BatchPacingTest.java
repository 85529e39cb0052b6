package dev.msgqueue.internal.maintenance;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The pause after a maintenance batch, in proportion to the batch's duration, on a clock the test moves. */
class BatchPacingTest {
  private static final long BATCH_NANOS = 12_000_000;

  private final AtomicLong now = new AtomicLong(1_000);
  private final List<Long> pauses = new ArrayList<>();

  @AfterEach
  void clearInterrupt() {
    Thread.interrupted();
  }

  private BatchPacing pacing(double dutyCycle) {
    return new BatchPacing(dutyCycle, now::get, pauses::add);
  }

  /** One batch of {@link #BATCH_NANOS}, then the pause; @return what pauseAfter returned */
  private boolean batchThenPause(BatchPacing pacing) {
    long start = pacing.batchStarts();
    now.addAndGet(BATCH_NANOS);
    return pacing.pauseAfter(start);
  }

  @Test
  void aDutyCycleOfOneNeverPauses() {
    assertThat(batchThenPause(pacing(1.0))).isTrue();
    assertThat(pauses).isEmpty();
  }

  @Test
  void halfTheTimeInBatchesPausesAsLongAsTheBatchTook() {
    assertThat(batchThenPause(pacing(0.5))).isTrue();
    assertThat(pauses).containsExactly(BATCH_NANOS);
  }

  @Test
  void aQuarterPausesThreeTimesTheBatch() {
    BatchPacing pacing = pacing(0.25);
    batchThenPause(pacing);
    batchThenPause(pacing);
    assertThat(pauses).containsExactly(3 * BATCH_NANOS, 3 * BATCH_NANOS);
  }

  @Test
  void anInterruptedThreadStopsWithoutPausing() {
    Thread.currentThread().interrupt();
    assertThat(batchThenPause(pacing(0.5))).isFalse();
    assertThat(pauses).isEmpty();
    assertThat(Thread.currentThread().isInterrupted()).isTrue();
  }

  @Test
  void anInterruptDuringThePauseStopsTheJobAndKeepsTheFlag() {
    BatchPacing pacing = new BatchPacing(0.5, now::get, nanos -> {
      throw new InterruptedException();
    });
    assertThat(batchThenPause(pacing)).isFalse();
    assertThat(Thread.currentThread().isInterrupted()).isTrue();
  }
}
