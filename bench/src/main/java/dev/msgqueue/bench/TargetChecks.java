package dev.msgqueue.bench;

import dev.msgqueue.Subscriber;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The project's performance targets, evaluated against this run's measurements (ratios within one run, so the
 * machine's speed cancels out). A target whose inputs were not measured (e.g. 32 publishers not in
 * {@code --publishers}) is evaluated at the nearest publisher count and says so.
 */
final class TargetChecks {
  static final int TARGET_PUBLISHERS = 32;

  private TargetChecks() { }

  /** @param measured the value this run measured; {@code passed} whether it meets {@code target} */
  record Check(String name, String target, double measured, boolean passed, String basis) { }

  static List<Check> evaluate(PublishContentionScenario.ContentionResult contention,
      BatchingScenario.BatchingResult batching, ReaperRaceScenario.ReaperRaceResult race) {
    List<Check> checks = new ArrayList<>();
    if (contention != null && !contention.cells().isEmpty()) {
      int publishers = contention.cells().stream().map(PublishContentionScenario.Cell::publishers)
          .min((a, b) -> Integer.compare(Math.abs(a - TARGET_PUBLISHERS), Math.abs(b - TARGET_PUBLISHERS)))
          .orElseThrow();
      String basis = publishers + " publishers, one hot auto-deleted queue, one message per publish";
      PublishContentionScenario.Cell ours = contention.cell(Strategies.MSGQUEUE, publishers);
      PublishContentionScenario.Cell upsert = contention.cell(Strategies.UPSERT_PER_PUBLISH, publishers);
      PublishContentionScenario.Cell seed = contention.cell(Strategies.OPTIMISTIC_HEAL, publishers);
      double oursRate = ours.messagesPerSecond();
      checks.add(atLeast("msgqueue / upsert-per-publish", 4, oursRate / upsert.messagesPerSecond(), basis));
      checks.add(atLeast("msgqueue / optimistic-heal", 2.0, oursRate / seed.messagesPerSecond(), basis));
      checks.add(atLeast("msgqueue / no-fk-ceiling", 1.5, ours.ratioToNoFkCeiling(), basis));
      checks.add(new Check("msgqueue p99 / optimistic-heal p99", "<= 1.5", ours.p99Millis() / seed.p99Millis(),
          ours.p99Millis() <= 1.5 * seed.p99Millis(), basis));
      checks.add(new Check("msgqueue lock-wait share", "< 1%", ours.lockWaitShare(), ours.lockWaitShare() < 0.01,
          basis));
      PublishContentionScenario.Cell single = contention.cell(Strategies.MSGQUEUE, 1);
      PublishContentionScenario.Cell singleSeed = contention.cell(Strategies.OPTIMISTIC_HEAL, 1);
      if (single != null && singleSeed != null) {
        checks.add(atLeast("msgqueue / optimistic-heal, 1 publisher", 0.95,
            single.messagesPerSecond() / singleSeed.messagesPerSecond(), "1 publisher, one message per publish"));
      }
      PublishContentionScenario.Cell check = contention.keepAliveCheck();
      if (check != null) {
        double allowedWrites = Math.ceil(check.keepAliveIntervals());
        checks.add(new Check("msgqueue parent-row writes per keep-alive interval", "<= 1",
            check.parentRowWrites() / check.keepAliveIntervals(), check.parentRowWrites() <= allowedWrites,
            String.format(Locale.ROOT, "%d publishers, keep-alive %.2f s; %d writes over %.1f intervals",
                check.publishers(), contention.checkKeepAliveSeconds(), check.parentRowWrites(),
                check.keepAliveIntervals())));
      }
    }
    if (batching != null) {
      BatchingScenario.Row thousand = batching.row(1000);
      BatchingScenario.Row copyThousand = batching.copyRow(1000);
      if (thousand != null && copyThousand != null) {
        checks.add(atLeast("publishBatch(1000) / COPY of 1000", 0.95,
            thousand.messagesPerSecond() / copyThousand.messagesPerSecond(), "1 publisher, messages/s"));
      }
      BatchingScenario.Row hundred = batching.row(100);
      if (hundred != null && Double.isFinite(hundred.speedupOverSingle())) {
        checks.add(atLeast("publishBatch(100) / single-message rate", 10, hundred.speedupOverSingle(),
            batching.publishers() + " publisher, messages/s"));
      }
    }
    if (race != null) {
      ReaperRaceScenario.Row ours = race.row(Strategies.MSGQUEUE, ReaperRaceScenario.MSGQUEUE_REAPER);
      if (ours != null) {
        long lost = ours.unexpiredOrphans() + ours.failedPublishes();
        checks.add(new Check("msgqueue reaper race: orphaned items + failed publishes", "= 0", lost, lost == 0,
            "msgqueue publish with the msgqueue reaper"));
      }
    }
    return checks;
  }

  /** The consumption targets: drain ratios within this run, and a sustained backlog that does not grow. */
  static List<Check> consumption(DrainScenario.DrainResult drain, SustainedScenario.SustainedResult sustained) {
    List<Check> checks = new ArrayList<>();
    if (drain != null) {
      for (int concurrency : List.of(1, 4)) {
        String cell = "conc " + concurrency;
        ratio(checks, drain, DrainScenario.SUBSCRIBER, DrainScenario.PGMQ_SHAPE, concurrency, 1.5,
            "Subscriber held tx / pgmq-shape SQL, " + cell, "drain, no-op handler, same concurrency");
        ratio(checks, drain, DrainScenario.SUBSCRIBER, DrainScenario.SUBSCRIBER_TAKE, concurrency, 0.8,
            "Subscriber held tx / take, " + cell, "drain, no-op handler, same concurrency");
        ratio(checks, drain, DrainScenario.SUBSCRIBER_INSERT, DrainScenario.SUBSCRIBER_LEASE_INSERT, concurrency, 2.0,
            "held tx insert / lease + own tx + ack, " + cell, "drain, handler inserts a row per message");
        ratio(checks, drain, DrainScenario.SUBSCRIBER_LEASE, DrainScenario.LEASE_SQL, concurrency, 0.85,
            "Subscriber lease / its SQL (claim, ack), " + cell, "drain, same threads or concurrency");
        ratio(checks, drain, DrainScenario.HELD_SQL_COUNTED, DrainScenario.HELD_SQL, concurrency, 0.9,
            "held SQL with crash count / without, " + cell, "drain, plain JDBC, same threads");
      }
      DrainScenario.Row loop = drain.row(DrainScenario.REPOSITORY, 1);
      DrainScenario.Row production1 = drain.row(DrainScenario.PRODUCTION, 1);
      if (loop != null && production1 != null) {
        checks.add(atLeast("claim(100)+ack loop / production SQL, 1 thread", 0.8,
            loop.messagesPerSecond() / production1.messagesPerSecond(), "drain, one thread each"));
      }
    }
    if (sustained != null) {
      for (SustainedScenario.Row row : sustained.rows()) {
        double ratio = row.handledPerSecond() / row.publishedPerSecond();
        String cell = "concurrency " + row.concurrency() + ", " + row.mode() + " mode";
        checks.add(atLeast("sustained handled/s / published/s, " + cell, 1.0, ratio,
            sustained.publishers() + " publishers, default Subscriber settings"));
        checks.add(atMost("sustained p99 publish-to-handler ms, " + cell, 50,
            row.p99Millis(), sustained.publishers() + " publishers"));
        if (!"lease".equals(row.mode())) {
          // Takes and held transactions delete what they handle: an ack statement here would be a second settlement.
          checks.add(atMost("sustained ack statements' largest, " + cell, 0, row.largestAck(),
              "receipts: only lease mode writes acks"));
          continue;
        }
        // A run that handled messages but saw no ack statement measured nothing: a FAIL, not a vacuous PASS.
        Check largestAck = atMost("sustained largest ack statement, " + cell,
            Subscriber.DEFAULT_BATCH_SIZE, row.largestAck(), "receipts, batchSize " + Subscriber.DEFAULT_BATCH_SIZE);
        boolean seen = row.largestAck() > 0 || row.handledPerSecond() == 0;
        checks.add(seen ? largestAck : new Check(largestAck.name(), largestAck.target(), largestAck.measured(), false,
            "no ack statement was seen while messages were handled"));
      }
    }
    return checks;
  }

  /** A check that {@code consumer}'s rate is at least {@code target} times {@code reference}'s, if both ran. */
  private static void ratio(List<Check> checks, DrainScenario.DrainResult drain, String consumer, String reference,
      int concurrency, double target, String name, String basis) {
    DrainScenario.Row measured = drain.row(consumer, concurrency);
    DrainScenario.Row against = drain.row(reference, concurrency);
    if (measured != null && against != null) {
      checks.add(atLeast(name, target, measured.messagesPerSecond() / against.messagesPerSecond(), basis));
    }
  }

  private static Check atMost(String name, double target, double measured, String basis) {
    return new Check(name, String.format(Locale.ROOT, "<= %s", target), measured, measured <= target, basis);
  }

  private static Check atLeast(String name, double target, double measured, String basis) {
    return new Check(name, String.format(Locale.ROOT, ">= %sx", target), measured, measured >= target, basis);
  }

  static void print(List<Check> checks, PrintStream out) {
    for (Check check : checks) {
      out.printf(Locale.ROOT, "%-4s %-55s %10.3f  target %-7s (%s)%n", check.passed() ? "PASS" : "FAIL",
          check.name(), check.measured(), check.target(), check.basis());
    }
  }
}
