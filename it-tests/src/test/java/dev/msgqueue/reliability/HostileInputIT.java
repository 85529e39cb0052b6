package dev.msgqueue.reliability;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.NumericNode;
import dev.msgqueue.PublishOptions;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.TransactionalQueue;
import dev.msgqueue.internal.publish.Payloads;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.RepositoryFixture;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Hostile and odd input against a real PostgreSQL: each value either fails with {@link IllegalArgumentException}
 * before any SQL, or is stored and reads back as the same JSON (compared parsed: jsonb normalises key order, white
 * space and number spelling). Either way no transaction is left open and no row is left behind by a rejection.
 */
class HostileInputIT extends RepositoryFixture {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Comparator<JsonNode> NUMBERS_BY_VALUE = (a, b) -> {
    if (a instanceof NumericNode && b instanceof NumericNode) {
      return a.decimalValue().compareTo(b.decimalValue());
    }
    return a.equals(b) ? 0 : 1;
  };

  HostileInputIT(TestDatabase db) {
    super(db);
  }

  @AfterEach
  void noTransactionIsLeftOpen() {
    int openTransactions = db.dsl().fetchCount(table(name("pg_catalog", "pg_stat_activity")),
        field(name("datname")).eq(db.name()).and(field(name("state")).like("idle in transaction%")));
    assertThat(openTransactions).isZero();
  }

  static Stream<String> queueNames() {
    return Stream.of("it's", "semi;colon", "\"double\"", "'; DROP TABLE \"MessageQueue\"; --", "back\\slash",
        "inner white space", "ünïcödé-队列-🚀", "x".repeat(64), "y".repeat(QueueSpec.MAX_NAME_BYTES), "%_like_",
        "$1", "zero\u200bwidth", "no\u00a0break", "🚀".repeat(QueueSpec.MAX_NAME_BYTES / 4));
  }

  @ParameterizedTest
  @MethodSource("queueNames")
  void oddButValidQueueNamesRoundTrip(String queueName) {
    QueueSpec spec = QueueSpec.autoDeleted(queueName);

    long id = repository.publish(spec, "{\"name\": " + quote(queueName) + "}");

    assertThat(new QueueRows(db.dsl()).item(id).getQueueId()).isEqualTo(queueName);
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.eq(queueName))).isEqualTo(1);
  }

  static Stream<String> validPayloads() {
    return Stream.of("{}", "[]", "null", "true", "0", "-0.0", "1e2", "1.50", "123456789012345678901234567890.5",
        "\"\"", "\"\\\"quoted\\\" \\\\ back\\/slash\"", "\"ünïcödé 🚀 \\ud83d\\ude80\"", "\"tab\\tnew\\nline\"",
        "{\"b\": 1, \"a\": [1, 2, {\"c\": null}]}", "{\"dup\": 1, \"dup\": 2}", " { \"spaced\" : true } ",
        "[".repeat(Payloads.MAX_NESTING_DEPTH) + "]".repeat(Payloads.MAX_NESTING_DEPTH),
        "\"" + "x".repeat(900_000) + "\"");
  }

  @ParameterizedTest
  @MethodSource("validPayloads")
  void validPayloadsReadBackAsTheSameJson(String payload) throws Exception {
    QueueSpec spec = QueueSpec.durable("payloads");
    repository.bindQueue(spec);

    long id = repository.publish(spec, payload);

    String stored = new QueueRows(db.dsl()).item(id).getPayload().data();
    JsonNode expected = JSON.readTree(payload);
    if (payload.contains("\"dup\"")) {
      // jsonb keeps the last of duplicate keys, as Jackson's tree does.
      assertThat(JSON.readTree(stored).get("dup").intValue()).isEqualTo(2);
    } else {
      assertThat(JSON.readTree(stored).equals(NUMBERS_BY_VALUE, expected)).as("stored %s", abbreviate(stored)).isTrue();
    }
  }

  @Test
  void rejectedInputLeavesNoRowBehind() {
    QueueSpec spec = QueueSpec.autoDeleted("rejections");
    List<Runnable> attempts = List.of(
        () -> repository.publish(spec, "{\"nul\": \"\\u0000\"}"),
        () -> repository.publish(spec, "[".repeat(Payloads.MAX_NESTING_DEPTH + 1)),
        () -> repository.publish(spec, "\"" + "x".repeat(1024 * 1024) + "\""),
        () -> repository.publish(spec, "{\"a\": 1"),
        () -> repository.publish(spec, "{}", PublishOptions.defaults().withDelay(Duration.ofDays(30))),
        () -> repository.publishBatch(spec, List.of("{}", "{}", "not json")),
        () -> repository.publish(null, "{}"));
    for (Runnable attempt : attempts) {
      assertThatThrownBy(attempt::run).isInstanceOf(IllegalArgumentException.class);
    }
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.eq("rejections"))).isZero();
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq("rejections"))).isZero();
  }

  @Test
  void numbersBeyondNumericsRangeAreRejectedBeforeSqlAndLeaveTheCallersTransactionUsable() {
    QueueSpec spec = QueueSpec.durable("numbers");
    repository.bindQueue(spec);
    String tooLong = "1" + "0".repeat(Payloads.MAX_NUMERIC_INTEGER_DIGITS);
    List<Long> committed = new ArrayList<>();
    db.dsl().transaction(tx -> {
      TransactionalQueue caller = repository.inTransaction(tx.dsl());
      committed.add(caller.publish(spec, "{\"before\": true}"));
      List<Runnable> attempts = List.of(
          () -> caller.publish(spec, tooLong),
          () -> caller.publish(spec, "-" + tooLong),
          () -> caller.publish(spec, "[" + tooLong + "]"),
          () -> caller.publish(spec, org.jooq.JSONB.valueOf(tooLong)),
          () -> caller.publishBatch(spec, List.of("{}", tooLong)),
          () -> caller.publish(spec, "1e-16384"));
      for (Runnable attempt : attempts) {
        assertThatThrownBy(attempt::run).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("numeric range");
      }
      committed.add(caller.publish(spec, "{\"after\": true}"));
    });
    assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq("numbers"))).isEqualTo(2);
    // And what PostgreSQL does store passes: the largest integer, zero with a huge exponent, a 60,000-char key.
    long largest = repository.publish(spec, "9".repeat(Payloads.MAX_NUMERIC_INTEGER_DIGITS));
    assertThat(new QueueRows(db.dsl()).item(largest).getPayload().data()).hasSize(Payloads.MAX_NUMERIC_INTEGER_DIGITS);
    long zero = repository.publish(spec, "0e999999");
    assertThat(new QueueRows(db.dsl()).item(zero).getPayload().data()).isEqualTo("0");
    String key = "k".repeat(60_000);
    long longKey = repository.publish(spec, "{\"" + key + "\": 1}");
    assertThat(new QueueRows(db.dsl()).item(longKey).getPayload().data()).contains(key);
  }

  @Test
  void randomStringsAreEitherRejectedUpFrontOrStoredFaithfully() throws Exception {
    // A seeded property run: arbitrary code points (controls, surrogate halves, quotes, NUL) as names and payloads.
    Random random = new Random(20261202L);
    QueueSpec payloadQueue = QueueSpec.durable("random-payloads");
    repository.bindQueue(payloadQueue);
    int stored = 0;
    int rejected = 0;
    for (int round = 0; round < 300; round++) {
      String text = randomText(random);
      String name = text.length() > 0 ? text : "empty";
      String payload = random.nextBoolean() ? quote(text) : "{" + quote(text) + ": [" + quote(text) + "]}";
      if (random.nextInt(5) == 0) {
        payload = text; // raw: usually not JSON at all
      }
      try {
        long nameId = repository.publish(QueueSpec.autoDeleted(name), "{}");
        assertThat(new QueueRows(db.dsl()).item(nameId).getQueueId()).isEqualTo(name);
        stored++;
      } catch (IllegalArgumentException expected) {
        rejected++;
      }
      try {
        long id = repository.publish(payloadQueue, payload);
        String back = new QueueRows(db.dsl()).item(id).getPayload().data();
        assertThat(JSON.readTree(back).equals(NUMBERS_BY_VALUE, JSON.readTree(payload))).isTrue();
        stored++;
      } catch (IllegalArgumentException expected) {
        rejected++;
      }
    }
    assertThat(stored).isPositive();
    assertThat(rejected).isPositive();
  }

  private static String randomText(Random random) {
    StringBuilder text = new StringBuilder();
    int length = random.nextInt(0, 12);
    List<int[]> ranges = new ArrayList<>(List.of(new int[] {0, 0x20}, new int[] {0x20, 0x7f},
        new int[] {0x7f, 0xa0}, new int[] {0xa0, 0x3000}, new int[] {0xd800, 0xe000}, new int[] {0x1f600, 0x1f650}));
    for (int i = 0; i < length; i++) {
      int[] range = ranges.get(random.nextInt(ranges.size()));
      int codePoint = random.nextInt(range[0], range[1]);
      if (codePoint >= 0xd800 && codePoint < 0xe000) {
        text.append((char) codePoint);
      } else {
        text.appendCodePoint(codePoint);
      }
    }
    return text.toString();
  }

  private static String quote(String text) {
    StringBuilder json = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') {
        json.append('\\').append(c);
      } else if (c < 0x20) {
        json.append(String.format("\\u%04x", (int) c));
      } else {
        json.append(c);
      }
    }
    return json.append('"').toString();
  }

  private static String abbreviate(String text) {
    return text.length() > 80 ? text.substring(0, 80) + "..." : text;
  }
}
