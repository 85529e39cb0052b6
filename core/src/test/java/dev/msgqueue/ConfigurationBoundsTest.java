package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.tools.jdbc.MockConnection;
import org.jooq.tools.jdbc.MockDataProvider;
import org.jooq.tools.jdbc.MockResult;
import org.junit.jupiter.api.Test;

/**
 * Every duration has an upper bound checked when it is set (or built), so no setting reaches an
 * {@link ArithmeticException} or a timestamp PostgreSQL cannot hold later; and the claiming thread survives failures.
 */
class ConfigurationBoundsTest {
  private static final Duration YEAR = Duration.ofDays(365);
  private static final Duration HUGE = Duration.ofSeconds(Long.MAX_VALUE);

  @Test
  void configDurationsBeyondTheirBoundsAreRejectedWhenSet() {
    List<Consumer<MsgQueueConfig.Builder>> settings = List.of(
        b -> b.keepAliveInterval(HUGE),
        b -> b.keepAliveInterval(YEAR),
        b -> b.reapIdleThreshold(HUGE),
        b -> b.reapIdleThreshold(YEAR.multipliedBy(10_000_000)),
        b -> b.reapIdleThreshold(MsgQueueConfig.MAX_REAP_IDLE_THRESHOLD.plusMillis(1)),
        b -> b.defaultMessageTtl(HUGE),
        b -> b.statementTimeout(HUGE),
        b -> b.statementTimeout(Duration.ofMillis(99)),
        b -> b.lockTimeout(HUGE),
        b -> b.wakeupWindow(YEAR.multipliedBy(300)),
        b -> b.wakeupWindow(MsgQueueConfig.MAX_WAKEUP_WINDOW.plusNanos(1)),
        b -> b.wakeupWindow(Duration.ZERO),
        b -> b.keepAliveInterval(Duration.ofSeconds(-1)),
        b -> b.maintenanceDutyCycle(0),
        b -> b.maintenanceDutyCycle(1.0001),
        b -> b.maintenanceDutyCycle(Double.NaN));
    for (Consumer<MsgQueueConfig.Builder> setting : settings) {
      assertThatThrownBy(() -> setting.accept(MsgQueueConfig.builder())).isInstanceOf(IllegalArgumentException.class);
    }
    assertThatThrownBy(() -> MsgQueueConfig.builder().keepAliveInterval(YEAR.multipliedBy(300))
        .reapIdleThreshold(YEAR.multipliedBy(1_200)).build()).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theCanonicalConstructorChecksTheSameBounds() {
    assertThatThrownBy(() -> new MsgQueueConfig(HUGE, HUGE, 100, 1_000, Duration.ofMinutes(5), 1 << 20, 10_000,
        Duration.ofSeconds(30), Duration.ofSeconds(5), true, Duration.ofMillis(50), true, 0.5))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("keepAliveInterval");
    assertThatThrownBy(() -> new MsgQueueConfig(Duration.ofMinutes(5), Duration.ofHours(1), 100, 1_000,
        Duration.ofMinutes(5), 1 << 20, 10_000, Duration.ofSeconds(30), Duration.ofSeconds(5), true,
        YEAR.multipliedBy(300), true, 0.5)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("wakeupWindow");
  }

  @Test
  void everyDurationAtItsBoundWorks() {
    MsgQueueConfig config = MsgQueueConfig.builder()
        .reapIdleThreshold(MsgQueueConfig.MAX_REAP_IDLE_THRESHOLD)
        .keepAliveInterval(MsgQueueConfig.MAX_KEEP_ALIVE_INTERVAL)
        .defaultMessageTtl(MsgQueueConfig.MAX_MESSAGE_LIFETIME)
        .statementTimeout(MsgQueueConfig.MAX_STATEMENT_TIMEOUT)
        .lockTimeout(MsgQueueConfig.MAX_STATEMENT_TIMEOUT)
        .wakeupWindow(MsgQueueConfig.MAX_WAKEUP_WINDOW)
        .build();
    assertThatCode(() -> MsgQueueRepository.create(DSL.using(SQLDialect.POSTGRES), config))
        .doesNotThrowAnyException();
    assertThatCode(() -> PublishOptions.defaults().withTtl(MsgQueueConfig.MAX_MESSAGE_LIFETIME)
        .withDelay(MsgQueueConfig.MAX_MESSAGE_LIFETIME.minusMillis(1))).doesNotThrowAnyException();
  }

  @Test
  void subscriberDurationsBeyondTheirBoundsAreRejectedWhenSet() {
    Subscriber.Builder builder = Subscriber.builder(repository(ctx(n -> null)), QueueSpec.durable("q"), m -> { });
    assertThatThrownBy(() -> builder.pollInterval(YEAR.multipliedBy(1_000))).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("pollInterval");
    assertThatThrownBy(() -> builder.pollInterval(Subscriber.MAX_POLL_INTERVAL.plusNanos(1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> builder.pollInterval(Duration.ofMillis(9))).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> builder.maxIdlePollInterval(Subscriber.MAX_POLL_INTERVAL.plusNanos(1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxIdlePollInterval");
    assertThatThrownBy(() -> builder.maxIdlePollInterval(Duration.ofMillis(9)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxIdlePollInterval");
    assertThatThrownBy(() -> builder.maxIdlePollInterval(null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> builder.closeTimeout(YEAR.multipliedBy(1_000))).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("closeTimeout");
    assertThatThrownBy(() -> builder.closeTimeout(Duration.ofMillis(-1))).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> builder.lease(YEAR.multipliedBy(1_000))).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("lease");
    assertThatThrownBy(() -> builder.transactionTimeout(Subscriber.MAX_TRANSACTION_TIMEOUT.plusNanos(1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("transactionTimeout");
    assertThatThrownBy(() -> builder.transactionTimeout(Duration.ofMillis(999)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("transactionTimeout");
    assertThatCode(() -> builder.pollInterval(Subscriber.MAX_POLL_INTERVAL).closeTimeout(Subscriber.MAX_CLOSE_TIMEOUT)
        .maxIdlePollInterval(Subscriber.MIN_POLL_INTERVAL).mode(ConsumeMode.LEASE)
        .lease(MsgQueueConfig.MAX_MESSAGE_LIFETIME).transactionTimeout(Subscriber.MAX_TRANSACTION_TIMEOUT))
        .doesNotThrowAnyException();
  }

  @Test
  void theClaimingThreadSurvivesAnUnexpectedErrorAndCloseRejectsAnAbsurdTimeout() throws Exception {
    AtomicInteger statements = new AtomicInteger();
    // Statement 1 is start()'s bind; the next two claims fail with an Error no claim path expects.
    DSLContext ctx = ctx(n -> {
      if (n == 2 || n == 3) {
        throw new AssertionError("simulated failure inside the claim");
      }
      return null;
    }, statements);
    // A mock context is one connection: the held-transaction mode needs a pool, the claiming modes do not.
    Subscriber subscriber = Subscriber.builder(repository(ctx), QueueSpec.durable("q"), m -> { })
        .mode(ConsumeMode.AT_MOST_ONCE).pollInterval(Subscriber.MIN_POLL_INTERVAL).start();
    try {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (statements.get() < 6 && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      assertThat(statements.get()).as("claims after the failures").isGreaterThanOrEqualTo(6);
      assertThatThrownBy(() -> subscriber.close(YEAR.multipliedBy(1_000))).isInstanceOf(IllegalArgumentException.class);
      assertThat(subscriber.isClosing()).isFalse();
    } finally {
      assertThat(subscriber.close(Duration.ofSeconds(10))).isTrue();
    }
  }

  private static MsgQueueRepository repository(DSLContext ctx) {
    return MsgQueueRepository.create(ctx, MsgQueueConfig.defaults());
  }

  private interface Script {
    /** @return null for an empty result */
    MockResult[] answer(int statementNumber);
  }

  private static DSLContext ctx(Script script) {
    return ctx(script, new AtomicInteger());
  }

  /** A context on jOOQ's mock JDBC connection: every statement succeeds with one row changed and no rows read. */
  private static DSLContext ctx(Script script, AtomicInteger statements) {
    MockDataProvider provider = executeContext -> {
      MockResult[] answer = script.answer(statements.incrementAndGet());
      return answer != null ? answer
          : new MockResult[] {new MockResult(1, DSL.using(SQLDialect.POSTGRES).newResult())};
    };
    return DSL.using(new MockConnection(provider), SQLDialect.POSTGRES);
  }
}
