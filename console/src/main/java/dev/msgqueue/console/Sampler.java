package dev.msgqueue.console;

import dev.msgqueue.Housekeeper;
import dev.msgqueue.HousekeepingRun;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the throughput and housekeeping views show over time, sampled on an interval by the console's thread: this
 * process's counters (as its metrics count them), the server's running totals of rows written to the message table
 * (every client's, one cheap statement), and each new tick of the housekeeper in this process.
 */
final class Sampler {
  private static final Logger log = LoggerFactory.getLogger(Sampler.class);
  /** How many housekeeping ticks the housekeeping view lists. */
  static final int RUNS_KEPT = 20;

  /** One sample: when, this process's totals (empty without counters), the server's totals (null if unread). */
  record Sample(Instant at, Map<String, Double> process, ConsoleStatements.TableCounters database) { }

  private final ConsoleStatements statements;
  private final ProcessCounters counters;
  private final Housekeeper housekeeper;
  private final Clock clock;
  private final int kept;
  private final Deque<Sample> samples = new ArrayDeque<>();
  private final Deque<HousekeepingRun> runs = new ArrayDeque<>();
  private boolean databaseFailureLogged;

  Sampler(ConsoleStatements statements, ProcessCounters counters, Housekeeper housekeeper, Duration interval,
      Duration history, Clock clock) {
    this.statements = statements;
    this.counters = counters;
    this.housekeeper = housekeeper;
    this.clock = clock;
    this.kept = (int) Math.max(2, history.toMillis() / interval.toMillis() + 1);
  }

  /** Takes one sample; never throws (the schedule must go on). */
  void sample() {
    Map<String, Double> process = Map.of();
    ConsoleStatements.TableCounters database = null;
    try {
      process = counters == null ? Map.of() : Map.copyOf(counters.totals());
    } catch (RuntimeException e) {
      log.debug("console: could not read the process counters", e);
    }
    try {
      database = statements.messageTableCounters().orElse(null);
      databaseFailureLogged = false;
    } catch (RuntimeException e) {
      if (!databaseFailureLogged) {
        log.warn("console: could not read the message table's counters; the throughput view shows a gap", e);
        databaseFailureLogged = true;
      }
    }
    Sample sample = new Sample(clock.instant(), process, database);
    synchronized (this) {
      samples.addLast(sample);
      while (samples.size() > kept) {
        samples.removeFirst();
      }
      if (housekeeper != null) {
        housekeeper.lastRun().ifPresent(run -> {
          if (runs.isEmpty() || !runs.peekLast().startedAt().equals(run.startedAt())) {
            runs.addLast(run);
            while (runs.size() > RUNS_KEPT) {
              runs.removeFirst();
            }
          }
        });
      }
    }
  }

  synchronized List<Sample> samples() {
    return new ArrayList<>(samples);
  }

  /** The housekeeping ticks seen, newest first. */
  synchronized List<HousekeepingRun> runs() {
    List<HousekeepingRun> newestFirst = new ArrayList<>(runs);
    java.util.Collections.reverse(newestFirst);
    return newestFirst;
  }
}
