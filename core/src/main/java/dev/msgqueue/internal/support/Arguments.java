package dev.msgqueue.internal.support;

import java.time.Duration;
import java.util.Collection;

/**
 * The checks every public entry point applies to its arguments, so that all bad input, a null included, fails the same
 * way: with an {@link IllegalArgumentException} naming the argument, before any SQL. The one bounds helper: every
 * range check of msgqueue's settings and arguments goes through it.
 */
public final class Arguments {
  private Arguments() { }

  /** @throws IllegalArgumentException if {@code value} is null */
  public static <T> T requireNonNull(T value, String name) {
    if (value == null) {
      throw new IllegalArgumentException(name + " is null");
    }
    return value;
  }

  /** @throws IllegalArgumentException if {@code values} or any of its elements is null */
  public static <C extends Collection<?>> C requireNoNulls(C values, String name) {
    requireNonNull(values, name);
    int index = 0;
    for (Object value : values) {
      if (value == null) {
        throw new IllegalArgumentException(name + " has a null element at index " + index);
      }
      index++;
    }
    return values;
  }

  /**
   * @throws IllegalArgumentException unless {@code min <= value <= max}; a null {@code value} included
   */
  public static Duration requireWithin(Duration value, String name, Duration min, Duration max) {
    requireNonNull(value, name);
    if (value.compareTo(min) < 0 || value.compareTo(max) > 0) {
      throw new IllegalArgumentException(name + " must be in [" + min + ", " + max + "], was " + value);
    }
    return value;
  }

  /** @throws IllegalArgumentException unless {@code min <= value <= max} */
  public static int requireWithin(int value, String name, int min, int max) {
    if (value < min || value > max) {
      throw new IllegalArgumentException(name + " must be in [" + min + ", " + max + "], was " + value);
    }
    return value;
  }

  /** @throws IllegalArgumentException unless {@code 0 < value <= max}; NaN included */
  public static double requirePositiveAtMost(double value, String name, double max) {
    if (!(value > 0 && value <= max)) {
      throw new IllegalArgumentException(name + " must be in (0, " + max + "], was " + value);
    }
    return value;
  }

  /** @throws IllegalArgumentException unless {@code 0 < value <= max}; a null {@code value} included */
  public static Duration requirePositiveAtMost(Duration value, String name, Duration max) {
    requireNonNull(value, name);
    if (value.isNegative() || value.isZero() || value.compareTo(max) > 0) {
      throw new IllegalArgumentException(name + " must be positive and at most " + max + ", was " + value);
    }
    return value;
  }
}
