package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import dev.msgqueue.internal.consume.Consumption;
import dev.msgqueue.internal.consume.HeldTransaction.LockedMessage;
import dev.msgqueue.internal.consume.QueueStore;
import dev.msgqueue.internal.publish.Publisher;
import dev.msgqueue.internal.sql.PublishStatements;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.TestDatabase;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jooq.Configuration;
import org.jooq.DSLContext;
import org.jooq.ExecuteContext;
import org.jooq.ExecuteListener;
import org.jooq.Query;
import org.jooq.SQLDialect;
import org.jooq.conf.ParamType;
import org.jooq.conf.Settings;
import org.jooq.impl.DSL;
import org.jooq.impl.DefaultConfiguration;
import org.jooq.impl.DefaultExecuteListenerProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Renders every statement msgqueue runs into {@code docs/statements.sql}, each under the Javadoc (with its locks) of
 * the method that defines it, parameters as {@code $n} as in a generic plan, and fails when the committed file differs.
 * The statements are captured while the API runs every path once against PostgreSQL (publish in autocommit and in a
 * transaction, heal, keep-alive, claim in both modes, the at-most-once take and its release, the held transaction's
 * lock, quarantine and deletion, ack, release, lease extension, retries, dead letters, statistics, the reaper, the
 * cleanup and a housekeeper tick), so the file is what actually runs, not a copy.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class StatementsDocIT {
  private static final Path DOCUMENT = Path.of("..", "docs", "statements.sql");
  private static final Path CORE_SOURCES = Path.of("..", "core", "src", "main", "java");
  private static final String REGENERATE = "MSGQUEUE_REGENERATE_STATEMENTS";
  /** Where the classes that only observe statements live: their frames never name a statement. */
  private static final Set<String> OBSERVERS =
      Set.of("dev.msgqueue.internal.support.StatementDeadlines", "dev.msgqueue.internal.support.FailureTranslation");
  private static final Pattern STATEMENT_CALL =
      Pattern.compile("\\b(\\w*(?:Statements|Query|ServerTime|SessionSettings))\\.(\\w+)\\(");
  private static final DSLContext RENDERER = DSL.using(SQLDialect.POSTGRES, new Settings()
      .withParamType(ParamType.NAMED)
      .withRenderNamedParamPrefix("$")
      .withRenderFormatted(true));

  private final TestDatabase db;
  /** Statement origin ("Class.method") to the distinct statements rendered there. */
  private final Map<String, Set<String>> captured = new TreeMap<>();

  StatementsDocIT(TestDatabase db) {
    this.db = db;
  }

  @Test
  void docsStatementsSqlIsCurrent() throws IOException {
    runEveryPath();
    String rendered = document();
    if (System.getenv(REGENERATE) != null) {
      Files.writeString(DOCUMENT, rendered, StandardCharsets.UTF_8);
    }
    String committed = Files.exists(DOCUMENT) ? Files.readString(DOCUMENT, StandardCharsets.UTF_8) : "";
    if (!committed.equals(rendered)) {
      fail("docs/statements.sql is out of date. Regenerate it with\n  " + REGENERATE + "=1 mvn -B -q -pl it-tests -am"
          + " verify -Dit.test=StatementsDocIT -Dtest=NONE -Dsurefire.failIfNoSpecifiedTests=false\nand commit it.");
    }
    assertThat(captured).containsKeys("ClaimStatements.claim", "MaintenanceStatements.lockIdleQueues",
        "MaintenanceStatements.tryAdvisoryLock", "RetryStatements.deadLetter");
  }

  private void runEveryPath() {
    QueueRows rows = new QueueRows(db.dsl());
    MsgQueueRepository setup = MsgQueueRepository.create(db.dataSource(), MsgQueueConfig.defaults());
    setup.bindQueue(QueueSpec.durable("orders"));
    setup.bindQueue(QueueSpec.autoDeleted("kept-alive-in-tx"));
    Configuration capturing = new DefaultConfiguration()
        .set(db.dataSource())
        .set(SQLDialect.POSTGRES)
        .set(new DefaultExecuteListenerProvider(new ExecuteListener() {
          @Override
          public void executeStart(ExecuteContext ctx) {
            capture(ctx.query());
          }
        }));
    MsgQueueRepository queues = MsgQueueRepository.create(capturing.dsl(), MsgQueueConfig.defaults());
    QueueSpec orders = QueueSpec.durable("orders");
    QueueSpec events = QueueSpec.autoDeleted("events");
    RetryPolicy policy = RetryPolicy.builder("orders-dead-letters").maxDeliveries(2).build();

    queues.publish(orders, "{}");                                    // the coalesced insert, carrying the keep-alive
    queues.publish(orders, "{}");                                    // the plain insert: no keep-alive due
    queues.publish(events, "{}");                                    // heal in autocommit
    queues.publishBatch(orders, List.of("{}", "{}", "{}", "{}", "{}", "{}", "{}", "{}"));
    queues.publishBatch(orders, Collections.nCopies(Publisher.COPY_MIN_BATCH, "{}")); // ids drawn, then COPY
    queues.bindQueue(events);
    queues.keepAlive("events");
    // The wake-ups of concurrent autocommit publishes to several queues, batched into one statement.
    dev.msgqueue.internal.sql.NotifyStatements.notifyWakeups(capturing.dsl(), List.of("orders", "events"));
    capturing.dsl().transaction(tx -> {
      TransactionalQueue inTransaction = queues.inTransaction(tx.dsl());
      inTransaction.publish(orders, "{}");                           // publish in a caller's transaction
      inTransaction.publish(QueueSpec.autoDeleted("kept-alive-in-tx"), "{}"); // its keep-alive, outside it
      inTransaction.publish(QueueSpec.autoDeleted("healed-in-tx"), "{}");
    });

    List<ClaimedMessage> plain = queues.claim("orders", 2);
    queues.ack(plain.get(0));
    Consumption consumption = new Consumption(queues.context(), ClaimedMessageAccess.INSTANCE);
    consumption.ackCount("orders", List.of(plain.get(1)));
    // The at-most-once Subscriber's claim, which deletes what it takes, and the put-back of what it took unstarted,
    // each in a transaction that reads its own id.
    List<ClaimedMessage> taken = consumption.take("orders", 2);
    consumption.putBack(QueueSpec.durable("orders"), taken).attempt();
    List<ClaimedMessage> leased = queues.claim("orders", 6, Duration.ofMinutes(5));
    queues.release(leased.get(0), Duration.ZERO);
    consumption.release(List.of(leased.get(1)));
    ClaimedMessage extended = queues.extendLease(leased.get(2), Duration.ofMinutes(5)).orElseThrow();
    queues.extendLeases(List.of(extended, leased.get(3)), Duration.ofMinutes(5));
    queues.fail(leased.get(4), new IllegalStateException("retry"), policy);
    rows.leasesRunOut("orders");
    List<ClaimedMessage> toHandle =
        countRedeliveries(queues, queues.claim("orders", 6, Duration.ofMinutes(5)), policy);
    queues.fail(toHandle.get(0), new IllegalStateException("dead"), RetryPolicy.builder("orders-dead-letters")
        .maxDeliveries(1).build());
    long deadLetter = queues.deadLetters("orders-dead-letters", 10).get(0).id();
    queues.republishDeadLetter(deadLetter);
    queues.republishDeadLetter(deadLetter);                          // no longer a dead letter: says why
    runHeldTransactionPaths(queues);
    consumption.queueExists("orders");
    consumption.bindWithin(events, Duration.ofSeconds(1));
    queues.queueStatistics("orders");
    queues.queueStatistics();

    rows.makeIdle("events", Duration.ofHours(2));
    rows.expireItems("events");
    queues.reapIdleQueues();
    rows.expireItems("orders");
    queues.cleanUpExpiredMessages();
    assertThat(Housekeeper.builder(queues).build().runOnce().outcome()).isEqualTo(HousekeepingRun.Outcome.COMPLETED);

    // The COPY after the ids runs through pgjdbc, where no listener sees it: documented from its one definition.
    assertThat(captured).containsKey("PublishStatements.reserveItems");
    captured.put("PublishStatements.copyItems", new TreeSet<>(Set.of(PublishStatements.COPY_ITEMS)));
  }

  private void capture(Query query) {
    if (query == null) {
      return;
    }
    String sql = RENDERER.renderNamedParams(query);
    synchronized (captured) {
      captured.computeIfAbsent(origin(), key -> new TreeSet<>()).add(sql);
    }
  }

  /**
   * "Class.method" of the method that defines the statement running now: the outermost of the consecutive frames in
   * the first core class on the stack (a public statement method, not the private helper it runs through), or, when
   * that class only runs a statement another class built, the statement method called on that line.
   */
  private static String origin() {
    StackTraceElement[] frames = Thread.currentThread().getStackTrace();
    for (int i = 0; i < frames.length; i++) {
      String type = outerClass(frames[i]);
      if (!type.startsWith("dev.msgqueue.") || OBSERVERS.contains(type) || !Files.exists(sourceFile(type))) {
        continue;
      }
      int outermost = i;
      while (outermost + 1 < frames.length && outerClass(frames[outermost + 1]).equals(type)) {
        outermost++;
      }
      Optional<String> built = calledStatementOn(type, frames[i].getLineNumber());
      String method = frames[outermost].getMethodName().replaceAll("^lambda\\$(\\w+)\\$\\d+$", "$1");
      return built.orElse(type.substring(type.lastIndexOf('.') + 1) + "." + method);
    }
    return "unknown";
  }

  private static String outerClass(StackTraceElement frame) {
    return frame.getClassName().replaceAll("\\$.*", "");
  }

  private static Optional<String> calledStatementOn(String type, int line) {
    if (type.endsWith("Statements") || type.endsWith("Query")) {
      return Optional.empty();
    }
    List<String> lines = source(type);
    for (int i = line - 1; i >= Math.max(0, line - 3); i--) {
      Matcher call = STATEMENT_CALL.matcher(lines.get(i));
      if (call.find()) {
        return Optional.of(call.group(1) + "." + call.group(2));
      }
    }
    return Optional.empty();
  }

  private String document() {
    StringBuilder out = new StringBuilder();
    out.append("-- Every statement msgqueue runs, under the Javadoc of the method that defines it (which names its\n")
        .append("-- locks); parameters are $n, as in a generic plan. Generated by it-tests' StatementsDocIT from a run\n")
        .append("-- of every API path against PostgreSQL; do not edit. Regenerate:\n")
        .append("--   ").append(REGENERATE).append("=1 mvn -B -q -pl it-tests -am verify -Dit.test=StatementsDocIT")
        .append(" -Dtest=NONE -Dsurefire.failIfNoSpecifiedTests=false\n");
    captured.forEach((origin, statements) -> {
      out.append("\n-- ").append(origin).append('\n');
      for (String line : javadoc(origin)) {
        out.append("--   ").append(line).append('\n');
      }
      for (String sql : statements) {
        out.append(sql.strip()).append(";\n");
      }
    });
    return out.toString();
  }

  /** The Javadoc of {@code Class.method} in core's sources, as plain lines; empty if it has none. */
  private static List<String> javadoc(String origin) {
    String type = origin.substring(0, origin.indexOf('.'));
    String method = origin.substring(origin.indexOf('.') + 1);
    String text = String.join("\n", source(qualified(type)));
    Matcher declaration = Pattern.compile("/\\*\\*((?:(?!\\*/).)*)\\*/\\s*(?:@\\w+\\s*)*(?:(?:public|private|"
        + "protected|static|final)\\s+)*[\\w<>\\[\\], ?]+\\s+" + Pattern.quote(method) + "\\(", Pattern.DOTALL)
        .matcher(text);
    if (!declaration.find()) {
      return List.of();
    }
    return declaration.group(1).lines()
        .map(line -> line.strip().replaceFirst("^\\* ?", ""))
        .filter(line -> !line.isBlank())
        .toList();
  }

  private static String qualified(String simpleName) {
    try (var files = Files.walk(CORE_SOURCES)) {
      Path file = files.filter(f -> f.getFileName().toString().equals(simpleName + ".java")).findFirst().orElseThrow();
      return CORE_SOURCES.relativize(file).toString().replace('/', '.').replaceAll("\\.java$", "");
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  private static Path sourceFile(String qualifiedName) {
    return CORE_SOURCES.resolve(qualifiedName.replace('.', '/') + ".java");
  }

  private static List<String> source(String qualifiedName) {
    try {
      return Files.readAllLines(sourceFile(qualifiedName));
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * The held-transaction mode's statements, on a queue of their own: a batch locked and rolled back (its deliveries end
   * without commit), locked again with the crash count, quarantined, one message failed and one deleted; then the
   * quarantined messages locked alone (one by key and dead-lettered, one by a search of the queue), and the rest
   * locked again after a rollback.
   */
  private static void runHeldTransactionPaths(MsgQueueRepository queues) {
    QueueSpec heldQueue = QueueSpec.durable("held");
    queues.bindQueue(heldQueue);
    queues.publishBatch(heldQueue, List.of("{}", "{}", "{}", "{}", "{}"));
    QueueStore store = new QueueStore(queues.context(), ClaimedMessageAccess.INSTANCE, heldQueue, ConsumeMode.TRANSACTION,
        null, RetryPolicy.builder("held-dead-letters").maxDeliveries(3).build(), Duration.ofMinutes(1));
    try {
      store.inHeldTransaction(tx -> {
        tx.lock(2);
        throw new IllegalStateException("the lane dies");
      });
    } catch (IllegalStateException expected) {
      // Rolled back: both deliveries ended without commit.
    }
    List<Long> ended = store.inHeldTransaction(tx -> {
      List<LockedMessage> locked = tx.lock(4);
      List<Long> suspects =
          locked.stream().filter(LockedMessage::endedWithoutCommit).map(m -> m.message().id()).toList();
      assertThat(suspects).hasSize(2);
      store.countEndedDeliveries(suspects);
      tx.quarantine(suspects);
      List<LockedMessage> fresh = locked.stream().filter(m -> !m.endedWithoutCommit()).toList();
      tx.fail(fresh.get(0).message(), new IllegalStateException("retry"));
      tx.delete(List.of(fresh.get(1).message().id()));
      return suspects;
    });
    store.inHeldTransaction(tx -> {
      LockedMessage quarantined = tx.lockQuarantined(ended); // those this subscriber quarantined, by key
      assertThat(quarantined).isNotNull();
      return tx.deadLetterEnded(quarantined.message(), 3);
    });
    store.inHeldTransaction(tx -> {
      LockedMessage quarantined = tx.lockQuarantined(); // any of the queue: a search
      assertThat(quarantined).isNotNull();
      tx.delete(List.of(quarantined.message().id()));
      return null;
    });
    List<Long> left = store.inHeldTransaction(tx -> tx.lock(10)).stream().map(m -> m.message().id()).toList();
    store.inHeldTransaction(tx -> tx.lockAgain(left));
  }

  /** The redelivery count a subscriber runs after each lease-mode claim. */
  private static List<ClaimedMessage> countRedeliveries(
      MsgQueueRepository repository, List<ClaimedMessage> claimed, RetryPolicy policy) {
    return new Consumption(repository.context(), ClaimedMessageAccess.INSTANCE)
        .countRedeliveries(claimed.get(0).queueName(), claimed, policy);
  }
}
