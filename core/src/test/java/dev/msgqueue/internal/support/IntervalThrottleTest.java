package dev.msgqueue.internal.support;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class IntervalThrottleTest {

  @Test
  void onlyOneOfManyConcurrentCallersPassesPerInterval() throws Exception {
    IntervalThrottle tracker = new IntervalThrottle(Duration.ofMinutes(1), 100);
    int threads = 16;
    AtomicInteger claims = new AtomicInteger();
    CountDownLatch start = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    for (int i = 0; i < threads; i++) {
      pool.submit(() -> {
        start.await();
        for (int n = 0; n < 1_000; n++) {
          if (tracker.tryPass("q")) {
            claims.incrementAndGet();
          }
        }
        return null;
      });
    }
    start.countDown();
    pool.shutdown();
    assertThat(pool.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
    assertThat(claims.get()).isEqualTo(1);
  }

  @Test
  void aRestartByAnotherPathPostponesTheNextPass() {
    IntervalThrottle tracker = new IntervalThrottle(Duration.ofMinutes(1), 100);
    tracker.done("q");
    assertThat(tracker.tryPass("q")).isFalse();
    tracker.forget("q");
    assertThat(tracker.tryPass("q")).isTrue();
  }

  @Test
  void aPassComesDueAgainAfterTheInterval() throws InterruptedException {
    IntervalThrottle tracker = new IntervalThrottle(Duration.ofMillis(20), 100);
    assertThat(tracker.tryPass("q")).isTrue();
    assertThat(tracker.tryPass("q")).isFalse();
    Thread.sleep(30);
    assertThat(tracker.tryPass("q")).isTrue();
  }

  @Test
  void staysWithinItsBoundForgettingIdleKeysFirst() throws InterruptedException {
    IntervalThrottle tracker = new IntervalThrottle(Duration.ofMillis(10), 100);
    for (int i = 0; i < 100; i++) {
      tracker.tryPass("idle-" + i);
    }
    Thread.sleep(30);
    tracker.tryPass("busy");
    assertThat(tracker.trackedKeys()).isEqualTo(1);

    IntervalThrottle full = new IntervalThrottle(Duration.ofMinutes(1), 100);
    for (int i = 0; i < 10_000; i++) {
      full.tryPass("live-" + i);
      assertThat(full.trackedKeys()).isLessThanOrEqualTo(100);
    }
  }
}
