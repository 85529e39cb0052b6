package dev.msgqueue.reliability;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.count;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.msgqueue.DeadLetter;
import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.child.HeldConsumerProcess;
import dev.msgqueue.it.Await;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
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
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * Held-transaction consumers in JVMs of their own ({@link HeldConsumerProcess}), killed: with SIGKILL
 * ({@code Process.destroyForcibly}) mid-batch while this JVM publishes, and by a poison message that halts its
 * consumer from inside the handler. Each handler writes a ledger row in the transaction that holds its message, so the
 * ledger row commits exactly when the message leaves its queue.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class KilledHeldConsumerIT {
  private static final int KILLS = Integer.getInteger("msgqueue.killed.kills", 4);
  private static final int MAX_KILLS = 3 * KILLS;
  private static final Duration BETWEEN_KILLS = Duration.ofMillis(Long.getLong("msgqueue.killed.intervalMillis", 2_000));
  private static final Duration AWAIT = Duration.ofSeconds(180);
  private static final Table<Record> LEDGER = table(name(HeldConsumerProcess.LEDGER));
  private static final Field<Long> LEDGER_ID = field(name(HeldConsumerProcess.LEDGER, "id"), Long.class);
  private static final String QUEUE = "held-work";

  private final TestDatabase db;
  private final DSLContext dsl;
  private int started;

  KilledHeldConsumerIT(TestDatabase db) {
    this.db = db;
    this.dsl = db.dsl();
  }

  @BeforeEach
  void ledger() {
    // The test's own ledger table: DDL, which jOOQ's typed API does not cover for an ad-hoc table.
    dsl.execute("CREATE TABLE IF NOT EXISTS \"" + HeldConsumerProcess.LEDGER
        + "\" (id bigint NOT NULL, consumer text NOT NULL)");
    dsl.truncate(LEDGER).execute();
  }

  @Test
  void consumersKilledMidBatchLoseNothingAndRepeatNoEffect(@TempDir Path logs) throws Exception {
    MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
    QueueSpec queue = QueueSpec.durable(QUEUE);
    repository.bindQueue(queue);
    Set<Long> committed = ConcurrentHashMap.newKeySet();
    AtomicBoolean publishing = new AtomicBoolean(true);
    Thread publisher = new Thread(() -> {
      int n = 0;
      while (publishing.get()) {
        List<String> batch = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
          batch.add("{\"n\": " + n++ + "}");
        }
        committed.addAll(repository.publishBatch(queue, batch));
        sleep(100); // ~100 messages/s: well within what two children handle on a busy machine
      }
    }, "killed-held-publisher");

    List<Child> children = new ArrayList<>(List.of(start(logs, 10), start(logs, 10)));
    long begin = System.nanoTime();
    publisher.start();
    int kills = 0;
    try {
      while (kills < KILLS || (kills < MAX_KILLS && endedDeliveries() == 0)) {
        sleep(BETWEEN_KILLS.toMillis());
        Child victim = children.remove(kills % 2 == 0 ? 0 : children.size() - 1);
        Await.until("the victim " + victim.name() + " has handled messages", AWAIT, () -> {
          if (!victim.process().isAlive()) {
            throw new AssertionError(victim.name() + " exited by itself: " + logOf(logs, victim.name()));
          }
          return handledBy(victim.name()) > 0;
        });
        System.out.printf("KilledHeldConsumerIT: kill %d at %d ms%n", kills,
            TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - begin));
        victim.process().destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        kills++;
        children.add(start(logs, 10));
      }
    } finally {
      publishing.set(false);
      publisher.join(30_000);
    }
    try {
      Await.until("every committed message handled and removed", AWAIT,
          () -> dsl.fetchCount(MESSAGE_QUEUE_ITEM) == 0 && ledgerCounts().keySet().containsAll(committed));
    } finally {
      for (Child child : children) {
        child.process().destroyForcibly().waitFor(30, TimeUnit.SECONDS);
      }
    }

    Map<Long, Integer> handled = ledgerCounts();
    assertThat(handled.keySet()).as("handled = committed: none lost, none phantom")
        .containsExactlyInAnyOrderElementsOf(committed);
    Map<Long, Integer> repeated = new HashMap<>();
    handled.forEach((id, times) -> {
      if (times != 1) {
        repeated.put(id, times);
      }
    });
    assertThat(repeated).as("each message's effect committed once, whatever the kills").isEmpty();
    assertThat(endedDeliveries()).as("deliveries the kills cut short mid-batch, counted when redelivered")
        .isPositive();
    System.out.printf("KilledHeldConsumerIT: %d messages, %d kills, %d deliveries cut short, %d ledger rows%n",
        committed.size(), kills, endedDeliveries(), handled.values().stream().mapToInt(Integer::intValue).sum());
  }

  @Test
  void aPoisonMessageThatKillsItsConsumerEachTimeIsDeadLetteredAfterTheConfiguredDeliveries(@TempDir Path logs)
      throws Exception {
    MsgQueueRepository repository = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
    QueueSpec queue = QueueSpec.durable(QUEUE);
    repository.bindQueue(queue);
    List<String> payloads = new ArrayList<>();
    for (int i = 0; i < 24; i++) {
      payloads.add(i == 11 ? "{\"poison\": true}" : "{\"n\": " + i + "}");
    }
    List<Long> ids = repository.publishBatch(queue, payloads);
    long poison = ids.get(11);
    int maxDeliveries = 3;

    int killedByPoison = 0;
    Child child = start(logs, 5, maxDeliveries);
    for (int restarts = 0; restarts < 10; restarts++) {
      Child running = child;
      Await.until("the consumer killed or the poison dead-lettered", AWAIT,
          () -> !running.process().isAlive() || !repository.deadLetters(HeldConsumerProcess.DEAD_LETTERS, 10)
              .isEmpty());
      if (running.process().isAlive()) {
        break;
      }
      assertThat(running.process().exitValue()).isEqualTo(HeldConsumerProcess.KILLED_BY_POISON);
      killedByPoison++;
      child = start(logs, 5, maxDeliveries);
    }
    Child last = child;
    try {
      Await.until("the other messages handled", AWAIT, () -> ledgerCounts().size() == ids.size() - 1);
    } catch (AssertionError e) {
      throw new AssertionError(e.getMessage() + "; killed by poison " + killedByPoison + ", last alive "
          + last.process().isAlive() + ", ledger " + ledgerCounts() + ", left " + dsl.selectFrom(MESSAGE_QUEUE_ITEM)
          .fetch() + ", failures " + dsl.selectFrom(MESSAGE_QUEUE_ITEM_FAILURE).fetch() + ", log "
          + logOf(logs, last.name()), e);
    } finally {
      last.process().destroyForcibly().waitFor(30, TimeUnit.SECONDS);
    }

    assertThat(killedByPoison).as("the poison killed a consumer once per delivery").isEqualTo(maxDeliveries);
    List<DeadLetter> letters = repository.deadLetters(HeldConsumerProcess.DEAD_LETTERS, 10);
    assertThat(letters).hasSize(1);
    assertThat(letters.get(0).id()).isEqualTo(poison);
    assertThat(letters.get(0).deliveries()).isEqualTo(maxDeliveries);
    assertThat(letters.get(0).errorClass()).isEqualTo(DeadLetter.TRANSACTION_ENDED);
    assertThat(ledgerCounts()).doesNotContainKey(poison).hasSize(ids.size() - 1)
        .allSatisfy((id, times) -> assertThat(times).as("message %d", id).isOne());
  }

  private record Child(String name, Process process) { }

  private Child start(Path logs, long handlerMillis) throws Exception {
    return start(logs, handlerMillis, 10);
  }

  private Child start(Path logs, long handlerMillis, int maxDeliveries) throws Exception {
    String name = "held-consumer-" + started++;
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    // C1 only and the serial collector: the child starts in a fraction of the default time on a busy machine.
    Process process = new ProcessBuilder(java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Duser.timezone=UTC",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp", System.getProperty("java.class.path"), HeldConsumerProcess.class.getName(),
        db.jdbcUrl(), QUEUE, name, Long.toString(handlerMillis), Integer.toString(maxDeliveries))
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
    return dsl.fetchCount(LEDGER, field(name(HeldConsumerProcess.LEDGER, "consumer"), String.class).eq(consumer));
  }

  private Map<Long, Integer> ledgerCounts() {
    Map<Long, Integer> counts = new HashMap<>();
    dsl.select(LEDGER_ID, count()).from(LEDGER).groupBy(LEDGER_ID).fetch()
        .forEach(row -> counts.put(row.value1(), row.value2()));
    return counts;
  }

  private int endedDeliveries() {
    return dsl.fetchCount(MESSAGE_QUEUE_ITEM_FAILURE,
        MESSAGE_QUEUE_ITEM_FAILURE.LAST_ERROR_CLASS.eq(DeadLetter.TRANSACTION_ENDED));
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
