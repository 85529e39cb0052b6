package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/** The housekeeper's settings are checked when set, with the documented bounds; nothing here touches a database. */
class HousekeeperBuilderTest {
  private final MsgQueueRepository repository =
      MsgQueueRepository.create(new PGSimpleDataSource(), MsgQueueConfig.defaults());

  @Test
  void theIntervalIsBetweenOneSecondAndOneDay() {
    assertThat(Housekeeper.builder(repository).build().interval()).isEqualTo(Housekeeper.DEFAULT_INTERVAL);
    assertThat(Housekeeper.builder(repository).interval(Housekeeper.MIN_INTERVAL).build().interval())
        .isEqualTo(Duration.ofSeconds(1));
    assertThat(Housekeeper.builder(repository).interval(Housekeeper.MAX_INTERVAL).build().interval())
        .isEqualTo(Duration.ofDays(1));
    assertThatThrownBy(() -> Housekeeper.builder(repository).interval(Duration.ofMillis(999)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("interval");
    assertThatThrownBy(() -> Housekeeper.builder(repository).interval(Duration.ofDays(1).plusMillis(1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Housekeeper.builder(repository).interval(Duration.ofSeconds(Long.MAX_VALUE)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theFirstRunJitterIsBetweenZeroAndOneDay() {
    Housekeeper.builder(repository).firstRunJitter(Duration.ZERO).firstRunJitter(Duration.ofDays(1));
    assertThatThrownBy(() -> Housekeeper.builder(repository).firstRunJitter(Duration.ofMillis(-1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Housekeeper.builder(repository).firstRunJitter(Duration.ofDays(2)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void nullArgumentsAreRefusedWithIllegalArgumentException() {
    assertThatThrownBy(() -> Housekeeper.builder(null))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("null");
    assertThatThrownBy(() -> Housekeeper.builder(repository).interval(null))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("null");
    assertThatThrownBy(() -> Housekeeper.builder(repository).firstRunJitter(null))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("null");
    assertThatThrownBy(() -> repository.queueStatistics(null)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aHousekeeperNeverStartedOwnsNoThreadAndClosesQuietly() {
    Housekeeper housekeeper = Housekeeper.builder(repository).build();
    assertThat(housekeeper.isRunning()).isFalse();
    assertThat(housekeeper.lastRun()).isEmpty();
    housekeeper.close();
    housekeeper.close();
    assertThat(housekeeper.isTerminated()).isTrue();
    assertThatThrownBy(housekeeper::start).isInstanceOf(IllegalStateException.class);
  }
}
