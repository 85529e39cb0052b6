package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.internal.consume.Retries;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class RetryPolicyTest {
  private static RetryPolicy.Builder policy() {
    return RetryPolicy.builder("dlq");
  }

  @Test
  void theBackoffCeilingGrowsByTheMultiplierUpToTheMaximum() {
    RetryPolicy policy = policy().initialBackoff(Duration.ofSeconds(1)).multiplier(3).maxBackoff(Duration.ofSeconds(20))
        .build();

    assertThat(policy.backoffCeiling(1)).isEqualTo(Duration.ofSeconds(1));
    assertThat(policy.backoffCeiling(2)).isEqualTo(Duration.ofSeconds(3));
    assertThat(policy.backoffCeiling(3)).isEqualTo(Duration.ofSeconds(9));
    assertThat(policy.backoffCeiling(4)).isEqualTo(Duration.ofSeconds(20));
    assertThat(policy.backoffCeiling(RetryPolicy.MAX_DELIVERIES_CEILING)).as("no overflow")
        .isEqualTo(Duration.ofSeconds(20));
  }

  @Test
  void jitterShortensTheBackoffByAtMostItsFraction() {
    RetryPolicy policy = policy().initialBackoff(Duration.ofSeconds(10)).jitter(0.25).build();

    assertThat(policy.backoff(1, () -> 0.0)).isEqualTo(Duration.ofSeconds(10));
    assertThat(policy.backoff(1, () -> 0.5)).isEqualTo(Duration.ofMillis(8_750));
    assertThat(policy.backoff(1, () -> Math.nextDown(1.0))).isEqualTo(Duration.ofMillis(7_500));
    assertThat(policy().jitter(0).build().backoff(2, () -> 0.9)).isEqualTo(Duration.ofSeconds(2));
    assertThat(policy().initialBackoff(Duration.ZERO).build().backoff(5, () -> 0.3)).isZero();
  }

  @Test
  void defaultsAreDocumentedValues() {
    RetryPolicy policy = RetryPolicy.defaults("orders-dlq");
    assertThat(policy.initialBackoff()).isEqualTo(Duration.ofSeconds(1));
    assertThat(policy.multiplier()).isEqualTo(2.0);
    assertThat(policy.maxBackoff()).isEqualTo(Duration.ofMinutes(5));
    assertThat(policy.jitter()).isEqualTo(0.2);
    assertThat(policy.maxDeliveries()).isEqualTo(5);
    assertThat(policy.deadLetterQueue()).isEqualTo("orders-dlq");
    assertThat(policy.deadLetterTtl()).isEqualTo(Duration.ofDays(14));
  }

  @Test
  void everyBoundIsEnforced() {
    assertInvalid(policy().initialBackoff(Duration.ofMillis(-1)), "initialBackoff");
    assertInvalid(policy().initialBackoff(Duration.ofMinutes(6)), "initialBackoff");
    assertInvalid(policy().maxBackoff(Duration.ofDays(366)), "maxBackoff");
    assertInvalid(policy().multiplier(0.99), "multiplier");
    assertInvalid(policy().multiplier(Double.NaN), "multiplier");
    assertInvalid(policy().multiplier(Double.POSITIVE_INFINITY), "multiplier");
    assertInvalid(policy().multiplier(100.5), "multiplier");
    assertInvalid(policy().jitter(-0.01), "jitter");
    assertInvalid(policy().jitter(1.01), "jitter");
    assertInvalid(policy().jitter(Double.NaN), "jitter");
    assertInvalid(policy().maxDeliveries(0), "maxDeliveries");
    assertInvalid(policy().maxDeliveries(RetryPolicy.MAX_DELIVERIES_CEILING + 1), "maxDeliveries");
    assertInvalid(policy().deadLetterTtl(Duration.ZERO), "deadLetterTtl");
    assertInvalid(policy().deadLetterTtl(Duration.ofDays(366)), "deadLetterTtl");
    assertThatThrownBy(() -> RetryPolicy.builder(" padded")).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("deadLetterQueue");
    assertThatThrownBy(() -> policy().maxBackoff(null)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("maxBackoff is null");
    assertThatThrownBy(() -> RetryPolicy.builder(null)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("deadLetterQueue");

    RetryPolicy edges = policy().initialBackoff(Duration.ZERO).maxBackoff(Duration.ZERO).multiplier(1).jitter(1)
        .maxDeliveries(1).deadLetterTtl(MsgQueueConfig.MAX_MESSAGE_LIFETIME).build();
    assertThat(edges.backoff(1, () -> 0.5)).isZero();
  }

  private static void assertInvalid(RetryPolicy.Builder builder, String named) {
    assertThatThrownBy(builder::build).isInstanceOf(IllegalArgumentException.class).hasMessageContaining(named);
  }

  @Test
  void errorTextIsMadeStorable() {
    assertThat(Retries.text(null, 10)).isNull();
    assertThat(Retries.text("plain", 10)).isEqualTo("plain");
    assertThat(Retries.text("a\u0000b", 10)).isEqualTo("a\uFFFDb");
    assertThat(Retries.text("x\uDC00y\uD800", 10)).isEqualTo("x\uFFFDy\uFFFD");
    assertThat(Retries.text("ab\uD83D\uDE00cd", 3)).as("a cut never splits a pair").isEqualTo("ab");
    assertThat(Retries.text("ab\uD83D\uDE00cd", 4)).isEqualTo("ab\uD83D\uDE00");
  }
}
