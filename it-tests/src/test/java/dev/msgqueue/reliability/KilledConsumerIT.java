package dev.msgqueue.reliability;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.count;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.selectOne;
import static org.jooq.impl.DSL.table;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.child.ConsumerProcess;
import dev.msgqueue.it.Await;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.TestDatabase;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record;
import org.jooq.Table;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * Consumer processes killed with SIGKILL mid-batch. Two child JVMs ({@link ConsumerProcess}) consume one queue in lease
 * mode while this JVM publishes; every couple of seconds one of them is killed ({@code Process.destroyForcibly}) and a
 * new one started in its place. Each child records the messages it handled in a ledger table, committed before the
 * handler returns (so before the ack).
 *
 * <p>"In flight" at a kill means: handled by the killed child (its ledger row committed) but not acked (its item row
 * still exists once every connection of the killed child is gone). Those, and only those, must be handled again: the
 * final ledger must hold every committed message, nothing else, and each message exactly once plus once for every kill
 * it was in flight at. Messages the killed child had claimed but not yet handled are redelivered and handled once.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class KilledConsumerIT {
  private static final int KILLS = Integer.getInteger("msgqueue.killed.kills", 4);
  /**
   * The most kills when none of the first {@link #KILLS} caught a message in flight: a kill lands between a handler's
   * ledger commit and its ack only some of the time, and the test is about the kills that do.
   */
  private static final int MAX_KILLS = 3 * KILLS;
  private static final Duration BETWEEN_KILLS = Duration.ofMillis(Long.getLong("msgqueue.killed.intervalMillis", 2_000));
  // Long enough that the in-flight set is read before any of the victim's leases runs out, even on a busy machine
  // where its backends take many seconds to go.
  private static final Duration LEASE = Duration.ofSeconds(45);
  private static final long HANDLER_MILLIS = 5;
  /**
   * How long the children hold a finished handler's ack for others (at most a batch of 8): long enough that a kill
   * finds handled, unacked messages. With the default 5 ms, at about 50 messages a second per child, all four kills
   * found none in one CI run in many.
   */
  private static final long ACK_DELAY_MILLIS = 200;
  private static final String QUEUE = "work";
  private static final Table<Record> LEDGER = table(name(ConsumerProcess.LEDGER));
  // Qualified: inside a subquery on "MessageQueueItem" a bare "id" would be the item's.
  private static final Field<Long> LEDGER_ID = field(name(ConsumerProcess.LEDGER, "id"), Long.class);
  private static final Field<String> LEDGER_CONSUMER = field(name(ConsumerProcess.LEDGER, "consumer"), String.class);

  private final TestDatabase db;
  private final DSLContext dsl;
  private int started;

  KilledConsumerIT(TestDatabase db) {
    this.db = db;
    this.dsl = db.dsl();
  }

  @Test
  void everyCommittedMessageIsHandledAndTheDuplicatesAreExactlyTheInFlightOnes(@TempDir Path logs) throws Exception {
    // The test's own ledger table: DDL, which jOOQ's typed API does not cover for an ad-hoc table.
    dsl.execute("CREATE TABLE \"" + ConsumerProcess.LEDGER + "\" (id bigint NOT NULL, consumer text NOT NULL)");
    MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
    repository.bindQueue(QueueSpec.durable(QUEUE));

    Set<Long> committed = ConcurrentHashMap.newKeySet();
    AtomicBoolean publishing = new AtomicBoolean(true);
    Thread publisher = new Thread(() -> {
      int n = 0;
      while (publishing.get()) {
        List<String> batch = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
          batch.add("{\"n\": " + n++ + "}");
        }
        committed.addAll(repository.publishBatch(QueueSpec.durable(QUEUE), batch));
        sleep(100); // ~100 messages/s: well within what two children handle on a busy machine
      }
    }, "killed-consumer-publisher");

    List<Child> children = new ArrayList<>(List.of(start(logs), start(logs)));
    Map<String, Set<Long>> inFlightAtKill = new HashMap<>();
    long begin = System.nanoTime();
    publisher.start();
    try {
      for (int kill = 0; kill < KILLS || (kill < MAX_KILLS && caughtInFlight(inFlightAtKill) == 0); kill++) {
        sleep(BETWEEN_KILLS.toMillis());
        Child victim = children.remove(kill % 2 == 0 ? 0 : children.size() - 1);
        awaitTrue(() -> {
          if (!victim.process().isAlive()) {
            throw new AssertionError(victim.name() + " exited by itself: " + logOf(logs, victim.name()));
          }
          return handledBy(victim.name()) > 0;
        }, "the victim " + victim.name() + " has handled messages", Duration.ofSeconds(180));
        long killedAt = System.nanoTime();
        System.out.printf("KilledConsumerIT: kill %d at %d ms%n", kill, (killedAt - begin) / 1_000_000);
        victim.process().destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        // Once its backends are gone nothing more of the victim commits: its ledger and the item table are final.
        awaitTrue(() -> backendsOf(victim.name()) == 0, "the backends of " + victim.name() + " are gone");
        Set<Long> inFlight = new HashSet<>(dsl.select(LEDGER_ID).from(LEDGER)
            .where(LEDGER_CONSUMER.eq(victim.name()))
            .andExists(selectOne().from(MESSAGE_QUEUE_ITEM).where(MESSAGE_QUEUE_ITEM.ID.eq(LEDGER_ID)))
            .fetch(LEDGER_ID));
        assertThat(System.nanoTime() - killedAt)
            .as("the in-flight set was read before any lease of the victim ran out")
            .isLessThan(LEASE.toNanos());
        inFlightAtKill.put(victim.name(), inFlight);
        children.add(start(logs));
      }
    } finally {
      publishing.set(false);
      publisher.join(30_000);
    }
    System.out.printf("KilledConsumerIT: publishing stopped at %d ms%n", (System.nanoTime() - begin) / 1_000_000);
    try {
      awaitTrue(() -> dsl.fetchCount(MESSAGE_QUEUE_ITEM) == 0 && ledgerIds().containsAll(committed),
          "every committed message handled and acked", Duration.ofSeconds(180));
    } finally {
      for (Child child : children) {
        child.process().destroyForcibly().waitFor(30, TimeUnit.SECONDS);
      }
    }

    System.out.printf("KilledConsumerIT: drained at %d ms%n", (System.nanoTime() - begin) / 1_000_000);
    Map<Long, Integer> handledCounts = new HashMap<>();
    dsl.select(LEDGER_ID, count()).from(LEDGER).groupBy(LEDGER_ID).fetch()
        .forEach(row -> handledCounts.put(row.value1(), row.value2()));
    Map<Long, Integer> expected = new HashMap<>();
    committed.forEach(id -> expected.put(id, 1));
    inFlightAtKill.values().forEach(ids -> ids.forEach(id -> expected.merge(id, 1, Integer::sum)));
    assertThat(handledCounts.keySet()).as("handled = committed: none lost, none phantom")
        .containsExactlyInAnyOrderElementsOf(committed);
    Map<Long, String> mismatches = new java.util.TreeMap<>();
    expected.forEach((id, times) -> {
      if (!times.equals(handledCounts.get(id))) {
        mismatches.put(id, "expected " + times + ", handled " + handledCounts.get(id));
      }
    });
    assertThat(mismatches).as("each handled once, plus once per kill it was in flight at").isEmpty();
    int inFlightTotal = caughtInFlight(inFlightAtKill);
    assertThat(inFlightTotal).as("kills that caught messages in flight (mid-batch)").isPositive();
    System.out.printf("KilledConsumerIT: %d messages, %d kills, %d in flight at the kills %s, %d deliveries%n",
        committed.size(), inFlightAtKill.size(), inFlightTotal, inFlightAtKill.values().stream().map(Set::size).toList(),
        handledCounts.values().stream().mapToInt(Integer::intValue).sum());
  }

  private record Child(String name, Process process) { }

  private static int caughtInFlight(Map<String, Set<Long>> inFlightAtKill) {
    return inFlightAtKill.values().stream().mapToInt(Set::size).sum();
  }

  private Child start(Path logs) throws Exception {
    String name = "consumer-" + started++;
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    // C1 only and the serial collector: the child starts in a fraction of the default time on a busy machine.
    Process process = new ProcessBuilder(java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Duser.timezone=UTC",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp", System.getProperty("java.class.path"), ConsumerProcess.class.getName(),
        db.jdbcUrl(), QUEUE, name, Long.toString(LEASE.toMillis()), Long.toString(HANDLER_MILLIS),
        Long.toString(ACK_DELAY_MILLIS))
        .redirectErrorStream(true)
        .redirectOutput(logs.resolve(name + ".log").toFile())
        .start();
    return new Child(name, process);
  }

  private static String logOf(Path logs, String consumer) {
    try {
      return Files.readString(logs.resolve(consumer + ".log"));
    } catch (java.io.IOException e) {
      return "(no log: " + e + ")";
    }
  }

  private int handledBy(String consumer) {
    return dsl.fetchCount(LEDGER, LEDGER_CONSUMER.eq(consumer));
  }

  private Set<Long> ledgerIds() {
    return new HashSet<>(dsl.selectDistinct(LEDGER_ID).from(LEDGER).fetch(LEDGER_ID));
  }

  private int backendsOf(String consumer) {
    return dsl.fetchCount(table(name("pg_catalog", "pg_stat_activity")),
        field(name("application_name"), String.class).eq(consumer));
  }

  private static void awaitTrue(java.util.function.BooleanSupplier condition, String what) {
    awaitTrue(condition, what, Duration.ofSeconds(60));
  }

  private static void awaitTrue(java.util.function.BooleanSupplier condition, String what, Duration limit) {
    Await.until(what, limit, condition);
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
