package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.internal.publish.Payloads;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import org.jooq.JSONB;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Bad input fails with {@link IllegalArgumentException} before any SQL runs. The repository here sits on a jOOQ
 * context with no connection at all: had any statement been attempted, jOOQ would have thrown its own exception.
 */
class InputValidationTest {
  private final MsgQueueRepository repository = MsgQueueRepository.create(
      DSL.using(SQLDialect.POSTGRES), MsgQueueConfig.builder().maxPayloadBytes(1024).build());
  private final QueueSpec queue = QueueSpec.autoDeleted("q");

  @ParameterizedTest
  @ValueSource(strings = {"", " ", "\t", " leading", "trailing ", "nul\u0000byte", "line\nbreak", "bell\u0007",
      "del\u007f", "c1\u0085", "\u00a0", "\u200b", "\u00a0\u200b\u2060", "name\u00a0", "\u00a0name", "\u200bname",
      "name\u200b", "\ufeffname", "name\u2060", "\u00adname", "name\u200d", "\u2003", "\u3000", "name\u202f",
      "line\u2028sep", "para\u2029sep", "\u180e", "\ud834\udd73name"})
  void rejectsBadQueueNames(String name) {
    assertThatThrownBy(() -> QueueSpec.autoDeleted(name)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("queue name");
  }

  @Test
  void rejectsNullAndOverlongAndMalformedQueueNames() {
    assertThatThrownBy(() -> QueueSpec.durable(null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> QueueSpec.durable("x".repeat(QueueSpec.MAX_NAME_BYTES + 1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("256 bytes");
    // 128 two-byte characters: 256 bytes although only 128 chars.
    assertThatThrownBy(() -> QueueSpec.durable("é".repeat(128))).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> QueueSpec.durable("lone\ud800surrogate")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> repository.keepAlive("bad\u0000")).isInstanceOf(IllegalArgumentException.class);
  }

  @ParameterizedTest
  @ValueSource(strings = {"no\u00a0break", "zero\u200bwidth", "inner white space", "\ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67",
      "soft\u00adhyphen", "x"})
  void keepsWhiteSpaceAndFormatCharactersInsideAName(String name) {
    assertThat(QueueSpec.durable(name).name()).isEqualTo(name);
  }

  @Test
  void acceptsNamesWithQuotesSemicolonsAndUnicodeUpToTheLimit() {
    assertThatCode(() -> QueueSpec.durable("tenant'; DROP TABLE \"MessageQueue\"; --")).doesNotThrowAnyException();
    assertThatCode(() -> QueueSpec.durable("队列-🚀-" + "x".repeat(200))).doesNotThrowAnyException();
    assertThatCode(() -> QueueSpec.durable("x".repeat(QueueSpec.MAX_NAME_BYTES))).doesNotThrowAnyException();
  }

  @Test
  void exclusiveQueuesNeedAConsumerAndOnlyTheyHaveOne() {
    assertThatThrownBy(() -> new QueueSpec("q", false, true, true, null))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("exclusiveConsumerId");
    assertThatThrownBy(() -> new QueueSpec("q", false, true, false, UUID.randomUUID()))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aDurableQueueCannotBeAutoDeleted() {
    assertThatThrownBy(() -> new QueueSpec("q", true, true, false, null))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("durable and auto-deleted");
    assertThat(QueueSpec.durable("q").autoDeleted()).isFalse();
    assertThat(QueueSpec.autoDeleted("q").durable()).isFalse();
  }

  @ParameterizedTest
  @ValueSource(strings = {"{", "}", "{\"a\":}", "nul", "[1,]", "{\"a\" 1}", "'single'", "NaN", "{} {}", "1 2",
      "\"\\u0000\"", "{\"\\u0000\": 1}", "\"\\ud800\"", "1e1000000", "--1"})
  void rejectsPayloadsPostgresWouldReject(String payload) {
    assertThatThrownBy(() -> repository.publish(queue, payload))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("payload");
  }

  @Test
  void rejectsNullEmptyOversizedAndTooDeepPayloads() {
    assertThatThrownBy(() -> repository.publish(queue, (String) null)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
    assertThatThrownBy(() -> repository.publish(queue, (JSONB) null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> repository.publish(queue, "")).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("empty");
    assertThatThrownBy(() -> repository.publish(queue, "   ")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> repository.publish(queue, "\"" + "x".repeat(1100) + "\""))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maximum is 1024");
    String deep = "[".repeat(Payloads.MAX_NESTING_DEPTH + 1) + "]".repeat(Payloads.MAX_NESTING_DEPTH + 1);
    MsgQueueRepository roomy = MsgQueueRepository.create(DSL.using(SQLDialect.POSTGRES),
        MsgQueueConfig.builder().maxPayloadBytes(1 << 20).build());
    assertThatThrownBy(() -> roomy.publish(queue, deep)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("nesting");
  }

  private final MsgQueueRepository roomy = MsgQueueRepository.create(DSL.using(SQLDialect.POSTGRES),
      MsgQueueConfig.builder().maxPayloadBytes(4 << 20).build());

  @Test
  void rejectsIntegersBeyondNumericsRangeOnEveryPublishPath() {
    String tooLong = "1" + "0".repeat(Payloads.MAX_NUMERIC_INTEGER_DIGITS);
    List<Runnable> attempts = List.of(
        () -> roomy.publish(queue, tooLong),
        () -> roomy.publish(queue, "-" + tooLong),
        () -> roomy.publish(queue, "[1, " + tooLong + "]"),
        () -> roomy.publish(queue, "{\"n\": {\"m\": -" + tooLong + "}}"),
        () -> roomy.publish(queue, JSONB.valueOf(tooLong)),
        () -> roomy.publish(queue, JSONB.valueOf("[" + tooLong + "]"), PublishOptions.defaults()),
        () -> roomy.publishBatch(queue, List.of("{}", tooLong)),
        // A megabyte of digits: rejected from its length, never converted.
        () -> roomy.publish(queue, "9".repeat(1 << 20)),
        () -> roomy.publish(queue, "0." + "1".repeat(1 << 20)));
    for (Runnable attempt : attempts) {
      assertThatThrownBy(attempt::run).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("numeric range");
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"1e131072", "-1e131072", "0.1e131073", "1e-16384", "1.5e-16383", "0e-16384",
      "0.0e-16383", "0e1073741823", "0e-1073741823", "1e99999999999999999999999", "0e-99999999999999999999"})
  void rejectsNumbersPostgresCannotStore(String number) {
    assertThatThrownBy(() -> roomy.publish(queue, number)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("numeric range");
  }

  @ParameterizedTest
  @ValueSource(strings = {"0e999999", "-0e999999", "0e1073741822", "0.000e-16380", "1e131071", "0.1e131072",
      "1e-16383", "0e-16383", "-0", "1E+2", "0.0"})
  void acceptsNumbersPostgresStores(String number) {
    assertThatThrownBy(() -> roomy.publish(queue, number)).isInstanceOf(org.jooq.exception.DataAccessException.class);
    assertThatThrownBy(() -> roomy.publish(queue, "9".repeat(Payloads.MAX_NUMERIC_INTEGER_DIGITS)))
        .isInstanceOf(org.jooq.exception.DataAccessException.class);
    assertThatThrownBy(() -> roomy.publish(queue, "0." + "7".repeat(Payloads.MAX_NUMERIC_SCALE)))
        .isInstanceOf(org.jooq.exception.DataAccessException.class);
  }

  @Test
  void acceptsObjectKeysAsLongAsThePayloadAllows() {
    String key = "k".repeat(60_000);
    assertThatThrownBy(() -> roomy.publish(queue, "{\"" + key + "\": 1}"))
        .isInstanceOf(org.jooq.exception.DataAccessException.class);
  }

  @Test
  void rejectsRawUnpairedSurrogatesOutsideStringValuesToo() {
    // An escaped high surrogate completed by a raw low one decodes to a valid pair, but the text itself has no UTF-8.
    assertThatThrownBy(() -> repository.publish(queue, "\"\\ud83d\ude80\""))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("surrogate");
  }

  @Test
  void rejectsNullSpecOptionsAndBadBatches() {
    assertThatThrownBy(() -> repository.publish(null, "{}")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> repository.publish(queue, "{}", null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> repository.publishBatch(queue, null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> repository.publishBatch(queue, Arrays.asList("{}", null)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("payload 1:");
    assertThatThrownBy(() -> repository.publishBatch(queue, List.of("{}", "{", "{}")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("payload 1:");
    List<String> tooMany = new ArrayList<>();
    for (int i = 0; i <= MsgQueueRepository.MAX_BATCH_SIZE; i++) {
      tooMany.add("1");
    }
    assertThatThrownBy(() -> repository.publishBatch(queue, tooMany)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("at most");
    assertThat(repository.publishBatch(queue, List.of())).isEmpty();
  }

  @Test
  void rejectsAbsurdTtlsAndDelays() {
    assertThatThrownBy(() -> PublishOptions.defaults().withTtl(Duration.ZERO)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> PublishOptions.defaults().withTtl(Duration.ofSeconds(-1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> PublishOptions.defaults().withTtl(Duration.ofDays(366)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> PublishOptions.defaults().withDelay(Duration.ofMillis(-1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> PublishOptions.defaults().withDelay(null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> PublishOptions.defaults().withTtl(Duration.ofSeconds(5)).withDelay(Duration.ofSeconds(5)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("shorter than ttl");
    // The default TTL is 5 minutes: a 10 minute delay could never be delivered.
    assertThatThrownBy(() -> repository.publish(queue, "{}", PublishOptions.defaults().withDelay(Duration.ofMinutes(10))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("default ttl");
  }

  @Test
  void validatesTheConfiguration() {
    assertThatThrownBy(() -> MsgQueueConfig.builder().keepAliveInterval(Duration.ofMinutes(16)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("quarter");
    assertThatThrownBy(() -> MsgQueueConfig.builder().keepAliveInterval(Duration.ZERO).build())
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MsgQueueConfig.builder().reapBatchSize(0).build())
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MsgQueueConfig.builder().defaultMessageTtl(null).build())
        .isInstanceOf(IllegalArgumentException.class);
    assertThatCode(() -> MsgQueueConfig.builder().keepAliveInterval(Duration.ofMinutes(15)).build())
        .doesNotThrowAnyException();
    assertThatThrownBy(() -> MsgQueueRepository.create(DSL.using(SQLDialect.MYSQL), MsgQueueConfig.defaults()))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("POSTGRES");
  }

  @Test
  void aValidPublishDoesReachTheDatabase() {
    // The counter-proof: valid input gets past validation, and then fails only for want of a connection.
    assertThatThrownBy(() -> repository.publish(queue, "{\"valid\": true}"))
        .isNotInstanceOf(IllegalArgumentException.class)
        .isInstanceOf(org.jooq.exception.DataAccessException.class);
  }
}
