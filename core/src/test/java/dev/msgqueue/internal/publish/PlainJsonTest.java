package dev.msgqueue.internal.publish;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The fast check never accepts what the full check rejects, and accepts the everyday payloads. */
class PlainJsonTest {
  private static final String EVERYDAY = "{\"event\": \"order.created\", \"tenant\": \"tenant-0042\", \"orderId\": "
      + "1234567, \"items\": [{\"sku\": \"A-100\", \"qty\": 2}], \"source\": \"bench\"}";
  private final Payloads payloads = new Payloads(1 << 20);

  @ParameterizedTest
  @ValueSource(strings = {EVERYDAY, "{}", "[]", "[[], {}, [{}]]", "true", "false", "null", "0", "-0", "-12.5",
      "1234567890123456", "\"\"", "\"ünïcødé ✓ 😀\"", "\"esc \\\" \\\\ \\/ \\b \\f \\n \\r \\t\"",
      " \t\r\n{ \"a\" : [ 1 , 2.25 , -3 ] , \"b\" : { } } \n", "{\"a\": 1, \"a\": 2}", "{\"\": \"\"}",
      "[true,false,null,\"x\",0.5]"})
  void acceptsEverydayJsonAndTheFullCheckAgrees(String json) {
    assertThat(PlainJson.isPlain(json)).isTrue();
    assertThatCode(() -> payloads.checkFully(json)).doesNotThrowAnyException();
  }

  @ParameterizedTest
  @ValueSource(strings = {"1e5", "1E-2", "0.5e1", "12345678901234567", "\"\\u0041\"", "\"\\u0000\"",
      "\"\\ud83d\\ude00\"", "\"\\x\"", "01", "1.", ".5", "-", "+1", "[1,]", "{\"a\"}", "{\"a\":1,}", "{,}", "[,1]",
      "tru", "nul", "'x'", "[1", "{\"a\":1", "\"open", "1 2", "[1] x", "\"tab\there\"", "NaN", "[1]//", "/*x*/1",
      "{1: 2}", "[--1]", "[-]", "{\"a\" 1}", "[1 2]", "\"\u0001\""})
  void leavesEverythingElseToTheFullCheck(String json) {
    assertThat(PlainJson.isPlain(json)).isFalse();
  }

  @Test
  void nestingPastItsDepthIsLeftToTheFullCheck() {
    String within = "[".repeat(PlainJson.MAX_DEPTH) + "]".repeat(PlainJson.MAX_DEPTH);
    String deeper = "[".repeat(PlainJson.MAX_DEPTH + 1) + "]".repeat(PlainJson.MAX_DEPTH + 1);
    assertThat(PlainJson.isPlain(within)).isTrue();
    assertThat(PlainJson.isPlain(deeper)).isFalse();
  }

  /**
   * Seeded random edits of valid texts (characters that matter to JSON inserted, deleted, replaced, swapped): any
   * edit the fast check accepts, the full check must accept too.
   */
  @Test
  void acceptsNoEditTheFullCheckRejects() {
    Random random = new Random(20261205L);
    List<String> seeds = List.of(EVERYDAY, "[1, -2.5, true, false, null, \"s\\\"t\", {\"k\": []}]",
        "{\"a\": {\"b\": {\"c\": [0, 10, \"\\\\\"]}}}", "\"x\"", "-0.25");
    String alphabet = "{}[]\",:\\-+.0123456789eEtrufalsn \t\n\r/bx\u0000\u0001\u00e9";
    int accepted = 0;
    int rejectedByFullCheck = 0;
    for (int i = 0; i < 200_000; i++) {
      StringBuilder text = new StringBuilder(seeds.get(random.nextInt(seeds.size())));
      int edits = 1 + random.nextInt(3);
      for (int e = 0; e < edits; e++) {
        int at = text.length() == 0 ? 0 : random.nextInt(text.length());
        char c = alphabet.charAt(random.nextInt(alphabet.length()));
        switch (random.nextInt(4)) {
          case 0 -> text.insert(at, c);
          case 1 -> {
            if (text.length() > 0) {
              text.deleteCharAt(at);
            }
          }
          case 2 -> {
            if (text.length() > 0) {
              text.setCharAt(at, c);
            }
          }
          default -> {
            if (text.length() > 1 && at + 1 < text.length()) {
              char here = text.charAt(at);
              text.setCharAt(at, text.charAt(at + 1));
              text.setCharAt(at + 1, here);
            }
          }
        }
      }
      String json = text.toString();
      boolean fullyValid;
      try {
        payloads.checkFully(json);
        fullyValid = true;
      } catch (IllegalArgumentException invalid) {
        fullyValid = false;
        rejectedByFullCheck++;
      }
      if (PlainJson.isPlain(json)) {
        accepted++;
        assertThat(fullyValid).as("the fast check accepted %s, which the full check rejects", json).isTrue();
      }
    }
    // Both verdicts occurred often: the edits explored valid and invalid texts alike.
    assertThat(accepted).isGreaterThan(5_000);
    assertThat(rejectedByFullCheck).isGreaterThan(50_000);
  }

  @Test
  void generatedValidValuesInItsSubsetAreAccepted() {
    Random random = new Random(7L);
    List<String> values = new ArrayList<>();
    for (int i = 0; i < 5_000; i++) {
      values.add(randomValue(random, 0));
    }
    for (String json : values) {
      assertThatCode(() -> payloads.checkFully(json)).as(json).doesNotThrowAnyException();
      assertThat(PlainJson.isPlain(json)).as(json).isTrue();
    }
  }

  private static String randomValue(Random random, int depth) {
    int kind = depth > 5 ? 2 + random.nextInt(5) : random.nextInt(7);
    return switch (kind) {
      case 0 -> {
        List<String> members = new ArrayList<>();
        for (int i = random.nextInt(4); i > 0; i--) {
          members.add(randomString(random) + (random.nextBoolean() ? ":" : " : ") + randomValue(random, depth + 1));
        }
        yield "{" + String.join(random.nextBoolean() ? "," : ",\n ", members) + "}";
      }
      case 1 -> {
        List<String> elements = new ArrayList<>();
        for (int i = random.nextInt(4); i > 0; i--) {
          elements.add(randomValue(random, depth + 1));
        }
        yield "[" + String.join(", ", elements) + "]";
      }
      case 2 -> randomString(random);
      case 3 -> (random.nextBoolean() ? "-" : "") + random.nextInt(1_000_000);
      case 4 -> random.nextInt(1000) + "." + random.nextInt(100_000);
      case 5 -> random.nextBoolean() ? "true" : "false";
      default -> "null";
    };
  }

  private static String randomString(Random random) {
    String[] pieces = {"a", "Z", " ", "é", "✓", "😀", "\\\"", "\\\\", "\\/", "\\n", "\\t", "\\b", "\\f", "\\r", "0"};
    StringBuilder text = new StringBuilder("\"");
    for (int i = random.nextInt(6); i > 0; i--) {
      text.append(pieces[random.nextInt(pieces.length)]);
    }
    return text.append('"').toString();
  }
}
