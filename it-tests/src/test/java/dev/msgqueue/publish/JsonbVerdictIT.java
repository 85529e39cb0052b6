package dev.msgqueue.publish;

import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.internal.publish.Payloads;
import dev.msgqueue.internal.support.Utf16;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.TestDatabase;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.regex.Pattern;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The payload validator against the server's own verdict: for seeded, generated payloads around every limit
 * PostgreSQL's {@code jsonb} input has (numeric range and scale, exponents, zeros with huge exponents, long keys,
 * escapes, escaped NUL, surrogates, nesting, grammar), the validator must accept exactly what
 * {@code SELECT ?::jsonb} accepts, except where it is deliberately stricter: nesting deeper than
 * {@link Payloads#MAX_NESTING_DEPTH} (the server's limit depends on its {@code max_stack_depth}), text with an
 * unpaired surrogate (it has no UTF-8 form, so it cannot reach the server unchanged), and an exponent of magnitude
 * exactly {@code INT_MAX / 2} (rejected by PostgreSQL 15, stored as zero by 17). Those it must reject.
 *
 * <p>{@code -Dmsgqueue.jsonbVerdict.seed} and {@code -Dmsgqueue.jsonbVerdict.cases} change the run.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class JsonbVerdictIT {
  private static final long SEED = Long.getLong("msgqueue.jsonbVerdict.seed", 20261203L);
  private static final int RANDOM_CASES = Integer.getInteger("msgqueue.jsonbVerdict.cases", 300);
  private static final int MAX_BYTES = 8 << 20;
  /**
   * A number whose exponent's magnitude is exactly {@code INT_MAX / 2}: PostgreSQL 15 rejects it even on zero, 17
   * stores zero; the validator keeps the stricter verdict, so a payload passes on every supported server.
   */
  private static final Pattern EXPONENT_AT_THE_LIMIT = Pattern.compile(
      "-?[0-9]+(\\.[0-9]+)?[eE][+-]?0*" + Payloads.MAX_NUMERIC_EXPONENT_EXCLUSIVE);

  private final TestDatabase db;
  private final Payloads validator = new Payloads(MAX_BYTES);

  JsonbVerdictIT(TestDatabase db) {
    this.db = db;
  }

  @Test
  void validatorAndServerAgreeOnGeneratedPayloads() {
    Random random = new Random(SEED);
    Set<String> cases = new LinkedHashSet<>();
    numberBoundaries(cases);
    for (int i = 0; i < RANDOM_CASES; i++) {
      cases.add(randomNumberNearALimit(random));
    }
    keysAndStrings(cases);
    for (int i = 0; i < RANDOM_CASES; i++) {
      cases.add(randomString(random));
    }
    nesting(cases);
    for (int i = 0; i < RANDOM_CASES; i++) {
      cases.add(mutated(random));
    }

    List<String> disagreements = new ArrayList<>();
    int accepted = 0;
    for (String payload : cases) {
      boolean validatorAccepts = validatorAccepts(payload);
      accepted += validatorAccepts ? 1 : 0;
      if (deliberatelyStricter(payload)) {
        if (validatorAccepts) {
          disagreements.add("accepted although deliberately stricter: " + shown(payload));
        }
        continue;
      }
      boolean serverAccepts = serverAccepts(payload);
      if (validatorAccepts != serverAccepts) {
        disagreements.add((serverAccepts ? "server accepts, validator rejects: " : "server rejects, validator accepts: ")
            + shown(payload));
      }
    }
    assertThat(disagreements).as("seed %d, %d cases", SEED, cases.size()).isEmpty();
    // The generator must exercise both verdicts, or the comparison proves little.
    assertThat(accepted).isBetween(cases.size() / 10, cases.size() - cases.size() / 10);
  }

  private boolean validatorAccepts(String payload) {
    try {
      validator.validate(payload);
      return true;
    } catch (IllegalArgumentException rejected) {
      return false;
    }
  }

  private boolean serverAccepts(String payload) {
    try {
      db.dsl().select(DSL.cast(DSL.val(payload, SQLDataType.CLOB), SQLDataType.JSONB)).fetchOne();
      return true;
    } catch (DataAccessException e) {
      String state = e.sqlState();
      // 22xxx: invalid text, numeric out of range, unsupported escape; 54001: stack depth.
      if (state != null && (state.startsWith("22") || state.equals("54001"))) {
        return false;
      }
      throw e;
    }
  }

  private static boolean deliberatelyStricter(String payload) {
    return Utf16.unpairedSurrogateIndex(payload) >= 0 || depth(payload) > Payloads.MAX_NESTING_DEPTH
        || EXPONENT_AT_THE_LIMIT.matcher(payload).matches();
  }

  /** The deepest nesting of brackets outside strings. */
  private static int depth(String payload) {
    int depth = 0;
    int max = 0;
    boolean inString = false;
    for (int i = 0; i < payload.length(); i++) {
      char c = payload.charAt(i);
      if (inString) {
        if (c == '\\') {
          i++;
        } else if (c == '"') {
          inString = false;
        }
      } else if (c == '"') {
        inString = true;
      } else if (c == '[' || c == '{') {
        max = Math.max(max, ++depth);
      } else if (c == ']' || c == '}') {
        depth--;
      }
    }
    return max;
  }

  private static void numberBoundaries(Set<String> cases) {
    int integerDigits = Payloads.MAX_NUMERIC_INTEGER_DIGITS;
    int scale = Payloads.MAX_NUMERIC_SCALE;
    for (int digits = integerDigits - 1; digits <= integerDigits + 1; digits++) {
      cases.add("9".repeat(digits));
      cases.add("1" + "0".repeat(digits - 1));
      cases.add("-1" + "0".repeat(digits - 1));
      cases.add("[1, " + "1" + "0".repeat(digits - 1) + "]");
      cases.add("{\"n\": -" + "9".repeat(digits) + ".5}");
      cases.add("0." + "0".repeat(10) + "1e" + (digits + 10));
    }
    for (int fraction = scale - 1; fraction <= scale + 1; fraction++) {
      cases.add("0." + "1".repeat(fraction));
      cases.add("1." + "0".repeat(fraction));
      cases.add("0." + "0".repeat(fraction));
      cases.add("-0." + "0".repeat(fraction - 1) + "1");
      cases.add("0." + "0".repeat(fraction) + "e1");
    }
    String[] mantissas = {"0", "-0", "1", "-1", "0.0", "1.5", "12.34", "0.001", "9", "100", "-0.000"};
    long[] exponents = {0, 1, -1, scale - 1, scale, scale + 1, -scale + 1, -scale, -scale - 1, integerDigits - 2,
        integerDigits - 1, integerDigits, integerDigits + 1, -integerDigits, 999_999, -999_999,
        Integer.MAX_VALUE / 2 - 1, Integer.MAX_VALUE / 2, -(Integer.MAX_VALUE / 2 - 1), -(Integer.MAX_VALUE / 2),
        Integer.MAX_VALUE, Long.MAX_VALUE};
    for (String mantissa : mantissas) {
      for (long exponent : exponents) {
        cases.add(mantissa + "e" + exponent);
      }
      cases.add(mantissa + "E+" + scale);
      cases.add(mantissa + "e-" + "0".repeat(30) + scale);
      cases.add(mantissa + "e99999999999999999999999");
      cases.add(mantissa + "e-99999999999999999999999");
    }
    for (String grammar : new String[] {"01", "-", "+1", ".5", "1.", "1e", "1e+", "0x10", "1_000", "Infinity",
        "-Infinity", "NaN", "1.5.5", "--1", "00", "-01", "1E5", "1e05", "0.0e0"}) {
      cases.add(grammar);
      cases.add("[" + grammar + "]");
    }
  }

  /** A small mantissa with an exponent putting it within a few steps of the scale or the integer-digit limit. */
  private static String randomNumberNearALimit(Random random) {
    StringBuilder mantissa = new StringBuilder(random.nextBoolean() ? "-" : "");
    int integerDigits = random.nextInt(1, 6);
    boolean zeroInteger = random.nextInt(3) == 0;
    if (zeroInteger) {
      mantissa.append('0');
      integerDigits = 1;
    } else {
      mantissa.append(random.nextInt(1, 10));
      for (int i = 1; i < integerDigits; i++) {
        mantissa.append(random.nextInt(10));
      }
    }
    int fraction = random.nextInt(0, 8);
    if (fraction > 0) {
      mantissa.append('.');
      for (int i = 0; i < fraction; i++) {
        mantissa.append(random.nextInt(4) == 0 ? random.nextInt(10) : 0);
      }
    }
    long exponent;
    int jitter = random.nextInt(-3, 4);
    switch (random.nextInt(3)) {
      case 0 -> exponent = fraction - Payloads.MAX_NUMERIC_SCALE + jitter; // scale at the limit
      case 1 -> exponent = Payloads.MAX_NUMERIC_INTEGER_DIGITS - integerDigits + jitter; // place at the limit
      default -> exponent = (random.nextBoolean() ? 1 : -1) * (Integer.MAX_VALUE / 2 + jitter); // exponent limit
    }
    String sign = exponent >= 0 && random.nextBoolean() ? "+" : "";
    String number = mantissa + (random.nextBoolean() ? "e" : "E") + sign + exponent;
    return random.nextInt(4) == 0 ? "{\"v\": [" + number + "]}" : number;
  }

  private static void keysAndStrings(Set<String> cases) {
    for (int length : new int[] {49_999, 50_000, 50_001, 60_000, 300_000}) {
      cases.add("{\"" + "k".repeat(length) + "\": 1}");
      cases.add("\"" + "s".repeat(length) + "\"");
    }
    String[] strings = {"\\u0000", "a\\u0000b", "\\ud800", "\\udc00", "\\ud83d\\ude80", "\\ud83d\\u0041",
        "\\ude80\\ud83d", "\\ud83dx", "\\uD83D\\uDE80", "\\u00e9", "\\uFFFF", "\\uFEFF", "\\x41", "\\a", "\\'",
        "\\U0041", "\\u12", "\\u12g4", "\\", "\\/", "\\b\\f\\n\\r\\t", "\u0001", "\u001f", "\t", "\u007f", "\u0085",
        "\u2028", "\u00a0", "🚀", "\ud800", "x\udc00", "\u0000"};
    for (String s : strings) {
      cases.add("\"" + s + "\"");
      cases.add("{\"" + s + "\": true}");
    }
    for (String outside : new String[] {"\ufeff{}", "{}\ufeff", "\u00a0{}", "{}\u000b", "\u000c[]", "\r\n\t []",
        "\u2003", "\u0000", "{}\u0000", " ", ""}) {
      cases.add(outside);
    }
  }

  private static final String[] STRING_PIECES = {"a", "é", "🚀", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r",
      "\\t", "\\u0041", "\\u0000", "\\ud83d", "\\ude80", "\\uDBFF\\uDFFF", "\\u00", "\\z", "\u0001", "\u007f", " ",
      "\ud800", "\udfff", "\u200b", "'", "{", "]"};

  private static String randomString(Random random) {
    StringBuilder s = new StringBuilder();
    int pieces = random.nextInt(1, 5);
    for (int i = 0; i < pieces; i++) {
      s.append(STRING_PIECES[random.nextInt(STRING_PIECES.length)]);
    }
    return random.nextBoolean() ? "\"" + s + "\"" : "{\"" + s + "\": \"" + s + "\"}";
  }

  private static void nesting(Set<String> cases) {
    for (int depth : new int[] {1, 2, 999, 1_000, 1_001, 2_000, 60_000}) {
      cases.add("[".repeat(depth) + "]".repeat(depth));
      cases.add("{\"a\":".repeat(depth) + "0" + "}".repeat(depth));
      cases.add("[{\"a\":".repeat(depth / 2) + "[]" + "}]".repeat(depth / 2));
      cases.add("[".repeat(depth) + "]".repeat(depth - 1)); // unbalanced
    }
  }

  private static final String[] SEEDS = {"{\"a\": [1, 2.5e3, \"x\", true, null], \"b\": {}}", "[0, -0.0, 1E-2]",
      "{\"k\": \"v\\n\"}", "true", "null", "\"s\"", "[[], {}]", "-12.5e+7"};
  private static final String MUTATIONS = "{}[],:\" \\-+.eE0159tfnul\t\n/'x";

  /** A valid document with a few characters inserted, deleted or replaced: mostly grammar errors, some not. */
  private static String mutated(Random random) {
    StringBuilder json = new StringBuilder(SEEDS[random.nextInt(SEEDS.length)]);
    int edits = random.nextInt(1, 3);
    for (int i = 0; i < edits; i++) {
      int at = random.nextInt(json.length() + 1);
      char c = MUTATIONS.charAt(random.nextInt(MUTATIONS.length()));
      switch (random.nextInt(3)) {
        case 0 -> json.insert(at, c);
        case 1 -> {
          if (at < json.length()) {
            json.deleteCharAt(at);
          }
        }
        default -> {
          if (at < json.length()) {
            json.setCharAt(at, c);
          }
        }
      }
    }
    return json.toString();
  }

  private static String shown(String payload) {
    String escaped = payload.length() > 120
        ? payload.substring(0, 60) + "...(" + payload.length() + " chars)..." + payload.substring(payload.length() - 40)
        : payload;
    StringBuilder out = new StringBuilder();
    escaped.chars().forEach(c -> out.append(c < 0x20 || c >= 0x7f ? String.format("\\u%04x", c) : (char) c));
    return out.toString();
  }
}
