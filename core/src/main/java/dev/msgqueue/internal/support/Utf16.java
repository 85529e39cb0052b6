package dev.msgqueue.internal.support;

/** Checks and repairs of Java text that PostgreSQL must store: it has no place for unpaired surrogates or NUL. */
public final class Utf16 {
  private Utf16() { }

  /**
   * The index of the first UTF-16 surrogate without its partner, or -1: such text has no UTF-8 form, so PostgreSQL
   * rejects it.
   */
  public static int unpairedSurrogateIndex(String text) {
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < text.length() && Character.isLowSurrogate(text.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        return i;
      }
    }
    return -1;
  }
}
