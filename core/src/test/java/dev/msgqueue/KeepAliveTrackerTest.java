package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class KeepAliveTrackerTest {

  @Test
  void onlyOneOfManyConcurrentCallersClaimsAnInterval() throws Exception {
    KeepAliveTracker tracker = new KeepAliveTracker(Duration.ofMinutes(1), 100);
    int threads = 16;
    AtomicInteger claims = new AtomicInteger();
    CountDownLatch start = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    for (int i = 0; i < threads; i++) {
      pool.submit(() -> {
        start.await();
        for (int n = 0; n < 1_000; n++) {
          if (tracker.claimRefresh("q")) {
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
  void aRefreshByAnotherPathPostponesTheNextClaim() {
    KeepAliveTracker tracker = new KeepAliveTracker(Duration.ofMinutes(1), 100);
    tracker.refreshed("q");
    assertThat(tracker.claimRefresh("q")).isFalse();
    tracker.forget("q");
    assertThat(tracker.claimRefresh("q")).isTrue();
  }

  @Test
  void aClaimComesDueAgainAfterTheInterval() throws InterruptedException {
    KeepAliveTracker tracker = new KeepAliveTracker(Duration.ofMillis(20), 100);
    assertThat(tracker.claimRefresh("q")).isTrue();
    assertThat(tracker.claimRefresh("q")).isFalse();
    Thread.sleep(30);
    assertThat(tracker.claimRefresh("q")).isTrue();
  }

  @Test
  void staysWithinItsBoundForgettingIdleQueuesFirst() throws InterruptedException {
    KeepAliveTracker tracker = new KeepAliveTracker(Duration.ofMillis(10), 100);
    for (int i = 0; i < 100; i++) {
      tracker.claimRefresh("idle-" + i);
    }
    Thread.sleep(30);
    tracker.claimRefresh("busy");
    assertThat(tracker.trackedQueues()).isEqualTo(1);

    KeepAliveTracker full = new KeepAliveTracker(Duration.ofMinutes(1), 100);
    for (int i = 0; i < 10_000; i++) {
      full.claimRefresh("live-" + i);
      assertThat(full.trackedQueues()).isLessThanOrEqualTo(100);
    }
  }
}
