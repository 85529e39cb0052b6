package dev.msgqueue.boottest;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM_FAILURE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.Table;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The service as a user runs it: Boot's own auto-configuration (its DataSource, jOOQ, Liquibase, Actuator and metrics
 * registry, and the starter's beans, none supplied by the test) on a fresh database, driven over HTTP.
 */
// The output is captured from before the service starts (OutputCaptureExtension's class-level capture).
@ExtendWith({ScratchDatabase.class, OutputCaptureExtension.class})
@SpringBootTest(classes = BootService.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@DirtiesContext
class BootServiceTest {
  @DynamicPropertySource
  static void database(DynamicPropertyRegistry registry) {
    registry.add("spring.datasource.url", () -> ScratchDatabase.current().jdbcUrl());
  }

  @Value("${local.server.port}")
  private int port;

  @org.springframework.beans.factory.annotation.Autowired
  private Fulfilment fulfilment;

  private Http http() {
    return new Http(port);
  }

  private static DSLContext database() {
    return ScratchDatabase.current().dsl();
  }

  @Test
  void theServiceChangelogAppliedMsgqueuesAtStartup() {
    // Liquibase's own table: no generated class for it, so a table and a field by name.
    Table<?> changelog = table(name("databasechangelog"));
    List<String> files = database().select(field(name("filename"), String.class)).from(changelog)
        .orderBy(field(name("orderexecuted"))).fetch(0, String.class);
    // msgqueue's changesets carry a logical path of their own, the same whichever changelog includes them.
    assertThat(files).contains("msgqueue/001-initial-schema.xml", "msgqueue/002-claim-index.xml",
        "msgqueue/003-item-failures.xml");
    assertThat(files.get(files.size() - 1)).endsWith("service-changelog.xml");
    assertThat(database().fetchCount(MESSAGE_QUEUE_ITEM)).isNotNegative();
  }

  @Test
  void theFreshDatabaseMigratedWithoutAWarning(CapturedOutput output) {
    // Liquibase logged the service's start (so the capture saw it), and no notice of the server's as a warning.
    assertThat(output.getAll()).contains("msgqueue-005-message-queue-item-claim-index")
        .doesNotContain("does not exist, skipping");
  }

  @Test
  void aPublishCountsOnceItsTransactionCommitsAndARolledBackOneNever() {
    String queue = "boot-counted";
    assertThat(http().post("/failing-orders/" + queue, "{\"order\": \"rolled back\"}").status()).isEqualTo(409);
    assertThat(count("msgqueue.messages.published", queue)).as("after a rolled-back publish").isZero();

    assertThat(http().post("/queues/" + queue + "/orders", "{\"order\": \"kept\"}").status()).isEqualTo(200);
    assertThat(count("msgqueue.messages.published", queue)).as("after a committed publish").isEqualTo(1.0);

    assertThat(http().post("/failing-orders/" + queue, "{\"order\": \"rolled back\"}").status()).isEqualTo(409);
    assertThat(count("msgqueue.messages.published", queue)).as("after another rolled-back one").isEqualTo(1.0);
    assertThat(database().fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.QUEUE_ID.eq(queue))).isOne();
  }

  @Test
  void theConsoleIsOffUnlessEnabled() {
    assertThat(http().get("/msgqueue/").status()).isEqualTo(404);
    assertThat(http().get("/msgqueue/api/session").status()).isEqualTo(404);
  }

  @Test
  void healthIsUp() {
    Http.Response health = http().get("/actuator/health/msgqueue");
    assertThat(health.status()).isEqualTo(200);
    assertThat((String) health.json("$.status")).isEqualTo("UP");
  }

  @Test
  void placedOrdersAreShippedAndCountedInActuatorsMetrics() {
    List<Long> placed = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      Http.Response response = http().post("/orders", "{\"order\": " + i + "}");
      assertThat(response.status()).isEqualTo(200);
      placed.add(((Number) response.json("$.id")).longValue());
    }
    await("the listener shipped " + placed).atMost(Duration.ofSeconds(30))
        .until(() -> shipped().containsAll(placed));
    assertThat(shipped()).containsExactlyInAnyOrderElementsOf(placed);

    List<String> names = http().get("/actuator/metrics").json("$.names");
    assertThat(names).contains("msgqueue.messages.published", "msgqueue.messages.claimed", "msgqueue.messages.acked",
        "msgqueue.publish", "msgqueue.claim", "msgqueue.handler");
    // An ack follows its handler's return, so the count may trail the shipment by a moment.
    await("3 acks counted").atMost(Duration.ofSeconds(30)).until(() -> count("msgqueue.messages.acked") == 3.0);
    assertThat(count("msgqueue.messages.published")).isEqualTo(3.0);
    assertThat(count("msgqueue.messages.claimed")).isEqualTo(3.0);
    assertThat(count("msgqueue.messages.acked")).isEqualTo(3.0);
  }

  @Test
  void aPublishInAFailedTransactionalMethodJoinedItAndRolledBack() {
    Http.Response failed = http().post("/failing-orders/boot-rolled-back", "{\"order\": \"lost\"}");
    assertThat(failed.status()).isEqualTo(409);
    assertThat((Boolean) failed.json("$.visibleInTransaction")).as("the publish joined the transaction").isTrue();
    long id = ((Number) failed.json("$.id")).longValue();
    assertThat(database().fetchExists(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.eq(id))).isFalse();
  }

  @Test
  void housekeepingInsideAFailedTransactionalMethodCommitsNothingOfIt() {
    Http.Response failed = http().post("/failing-orders/boot-rolled-back-housekept?housekeeping=true",
        "{\"order\": \"lost\"}");
    assertThat(failed.status()).isEqualTo(409);
    assertThat((Boolean) failed.json("$.visibleInTransaction")).as("the publish joined the transaction").isTrue();
    assertThat((String) failed.json("$.housekeeping")).isEqualTo("COMPLETED");
    long id = ((Number) failed.json("$.id")).longValue();
    assertThat(database().fetchExists(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.ID.eq(id)))
        .as("the housekeeper and the reaper ran on connections of their own, not on the caller's transaction")
        .isFalse();
  }

  @Test
  void aListenersWritesThroughJdbcTemplateJooqAndTransactionalCommitWithTheMessageOrNotAtAll() {
    Http.Response placed = http().post("/fulfilments", "{\"order\": \"book\", \"failFirst\": true}");
    assertThat(placed.status()).isEqualTo(200);
    long id = ((Number) placed.json("$.id")).longValue();
    List<String> expected = List.of("jdbc " + id, "jooq " + id, "transactional " + id);

    // The first delivery writes all three rows and throws: they roll back with it, and the retry policy delivers the
    // message again after its backoff; the second returns: its three rows commit as the message leaves its queue.
    await("the order fulfilled").atMost(Duration.ofSeconds(60))
        .until(() -> shipments(id).size() == 3 && !database().fetchExists(MESSAGE_QUEUE_ITEM,
            MESSAGE_QUEUE_ITEM.ID.eq(id)));
    assertThat(shipments(id)).as("the failed delivery's writes did not stay: one row each")
        .containsExactlyInAnyOrderElementsOf(expected);
    assertThat(fulfilment.deliveries()).containsEntry(id, 2);
    assertThat(database().select(MESSAGE_QUEUE_ITEM_FAILURE.FAILED_DELIVERIES, MESSAGE_QUEUE_ITEM_FAILURE.LAST_ERROR_CLASS)
        .from(MESSAGE_QUEUE_ITEM_FAILURE).where(MESSAGE_QUEUE_ITEM_FAILURE.ITEM_ID.eq(id)).fetchOne())
        .as("the failed delivery counted with its error")
        .satisfies(row -> {
          assertThat(row.value1()).isOne();
          assertThat(row.value2()).isEqualTo(IllegalStateException.class.getName());
        });
  }

  private List<String> shipments(long id) {
    return database().select(field(name("payload"), String.class)).from(table(name("shipment")))
        .where(field(name("payload"), String.class).endsWith(" " + id)).fetch(0, String.class);
  }

  private List<Long> shipped() {
    List<Number> ids = http().get("/shipped").json("$");
    return ids.stream().map(Number::longValue).toList();
  }

  private double count(String meter) {
    return count(meter, BootService.ORDERS);
  }

  private double count(String meter, String queue) {
    Http.Response response = http().get("/actuator/metrics/" + meter + "?tag=queue:" + queue);
    assertThat(response.status()).as(meter + ": " + response.body()).isEqualTo(200);
    return ((Number) response.json("$.measurements[0].value")).doubleValue();
  }
}
