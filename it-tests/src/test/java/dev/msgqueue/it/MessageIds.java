package dev.msgqueue.it;

import static org.assertj.core.api.Assertions.fail;

import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Compares sets of message ids and, on a mismatch, reports counts and the first few ids of each difference rather
 * than every id (a soak or stress run handles tens of thousands).
 */
public final class MessageIds {
  private static final int SHOWN = 10;

  private MessageIds() {
  }

  /** Fails unless {@code actual} holds exactly the ids of {@code expected}, each compared as a set. */
  public static void assertSameIds(String what, Collection<Long> expected, Collection<Long> actual) {
    Set<Long> expectedIds = new HashSet<>(expected);
    Set<Long> actualIds = new HashSet<>(actual);
    Set<Long> missing = new HashSet<>(expectedIds);
    missing.removeAll(actualIds);
    Set<Long> unexpected = new HashSet<>(actualIds);
    unexpected.removeAll(expectedIds);
    if (missing.isEmpty() && unexpected.isEmpty()) {
      return;
    }
    fail("%s: expected %d ids, got %d; %d missing %s; %d unexpected %s", what, expectedIds.size(), actualIds.size(),
        missing.size(), firstFew(missing), unexpected.size(), firstFew(unexpected));
  }

  private static String firstFew(Set<Long> ids) {
    List<Long> sorted = ids.stream().sorted().limit(SHOWN).toList();
    return ids.size() > SHOWN ? "(first " + SHOWN + ": " + sorted + ")" : sorted.toString();
  }
}
