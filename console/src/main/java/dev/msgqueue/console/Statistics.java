package dev.msgqueue.console;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueStatistics;
import dev.msgqueue.QueueStatisticsSnapshot;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.ToLongFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The statistics of every queue the pages show, never read per page view: the snapshot the service's
 * {@link Housekeeper} read at its last tick when there is one in this process (no statement at all), else one read of
 * {@link MsgQueueRepository#estimatedQueueStatistics()} (the same estimate, exact up to 50,000 messages and sampled
 * above) at most once per {@code maxAge}, in the background: a page is served from the snapshot at hand, and only the
 * very first page waits for a first read. Each snapshot is indexed once (by name, and sorted by each count) on the
 * background thread, so a page sorted by depth at 100,000 queues costs a lookup, not a sort.
 */
final class Statistics {
  private static final Logger log = LoggerFactory.getLogger(Statistics.class);
  /** How long the first page waits for the first read before it is served without counts. */
  static final Duration FIRST_READ_WAIT = Duration.ofSeconds(10);

  /** Where a snapshot came from. */
  enum Source { HOUSEKEEPER, CONSOLE }

  /** The orders a page may ask for, each by one count, largest first (ties by name). */
  enum Order {
    DEPTH(QueueStatistics::total),
    READY(QueueStatistics::ready),
    DELAYED(QueueStatistics::delayed),
    IN_FLIGHT(QueueStatistics::inFlight),
    EXPIRED(QueueStatistics::expired),
    OLDEST(s -> s.oldestReadyAge().toMillis());

    final ToLongFunction<QueueStatistics> key;

    Order(ToLongFunction<QueueStatistics> key) {
      this.key = key;
    }
  }

  /** A snapshot with its indexes. */
  record Indexed(QueueStatisticsSnapshot snapshot, Source source, Map<String, QueueStatistics> byName,
      Map<Order, QueueStatistics[]> sorted) {
    QueueStatistics of(String queue) {
      return byName.get(queue);
    }

    int queues() {
      return snapshot.queues().size();
    }
  }

  private final MsgQueueRepository repository;
  private final Housekeeper housekeeper;
  private final Duration maxAge;
  private final Executor background;
  private final Clock clock;
  private volatile Indexed current;
  private CompletableFuture<Indexed> refreshing;

  Statistics(MsgQueueRepository repository, Housekeeper housekeeper, Duration maxAge, Executor background,
      Clock clock) {
    this.repository = repository;
    this.housekeeper = housekeeper;
    this.maxAge = maxAge;
    this.background = background;
    this.clock = clock;
  }

  /**
   * The freshest snapshot at hand, or {@code null} if none could be read yet. Starts a background refresh when the
   * snapshot at hand is older than the housekeeper's (which it then indexes) or than {@code maxAge} (which it then
   * reads); only while there is no snapshot at all does it wait, at most {@link #FIRST_READ_WAIT}.
   */
  Indexed current() {
    Indexed at = current;
    QueueStatisticsSnapshot housekept = housekeeper == null ? null : housekeeper.lastStatistics().orElse(null);
    // While the housekeeper reads them, its next tick is due within its interval: reading them here as well would
    // only repeat its statement.
    Duration staleAfter = housekept == null ? maxAge : max(maxAge, housekeeper.interval().multipliedBy(2));
    CompletableFuture<Indexed> refresh = null;
    if (housekept != null && (at == null || housekept.readAt().isAfter(at.snapshot().readAt()))) {
      refresh = refresh(housekept);
    } else if (at == null || age(at.snapshot()).compareTo(staleAfter) > 0) {
      refresh = refresh(null);
    }
    if (at != null || refresh == null) {
      return at;
    }
    try {
      return refresh.get(FIRST_READ_WAIT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    } catch (ExecutionException | TimeoutException e) {
      return current;
    }
  }

  private static Duration max(Duration a, Duration b) {
    return a.compareTo(b) >= 0 ? a : b;
  }

  private Duration age(QueueStatisticsSnapshot snapshot) {
    return Duration.between(snapshot.readAt(), clock.instant());
  }

  /** One refresh at a time: indexes {@code housekept} if given, else reads the estimate. */
  private synchronized CompletableFuture<Indexed> refresh(QueueStatisticsSnapshot housekept) {
    if (refreshing != null && !refreshing.isDone()) {
      return refreshing;
    }
    refreshing = CompletableFuture.supplyAsync(() -> {
      try {
        Indexed indexed = housekept != null ? index(housekept, Source.HOUSEKEEPER)
            : index(repository.estimatedQueueStatistics(), Source.CONSOLE);
        Indexed previous = current;
        if (previous == null || !indexed.snapshot().readAt().isBefore(previous.snapshot().readAt())) {
          current = indexed;
        }
        return current;
      } catch (RuntimeException e) {
        log.warn("console: could not read the queue statistics; the pages keep showing the previous ones", e);
        throw e;
      }
    }, background);
    return refreshing;
  }

  static Indexed index(QueueStatisticsSnapshot snapshot, Source source) {
    List<QueueStatistics> queues = snapshot.queues();
    Map<String, QueueStatistics> byName = new HashMap<>(queues.size() * 2);
    for (QueueStatistics queue : queues) {
      byName.put(queue.queue(), queue);
    }
    Map<Order, QueueStatistics[]> sorted = new EnumMap<>(Order.class);
    QueueStatistics[] all = queues.toArray(new QueueStatistics[0]);
    for (Order order : Order.values()) {
      QueueStatistics[] copy = all.clone();
      Arrays.sort(copy, Comparator.comparingLong(order.key).reversed().thenComparing(QueueStatistics::queue));
      sorted.put(order, copy);
    }
    return new Indexed(snapshot, source, byName, sorted);
  }

  /** When the snapshot at hand was read, for tests. */
  Instant readAt() {
    Indexed at = current;
    return at == null ? null : at.snapshot().readAt();
  }
}
