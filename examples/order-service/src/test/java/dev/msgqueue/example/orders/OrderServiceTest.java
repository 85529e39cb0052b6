package dev.msgqueue.example.orders;

import static dev.msgqueue.example.orders.OrderTables.ORDERS;
import static dev.msgqueue.example.orders.OrderTables.ORDER_ID;
import static dev.msgqueue.example.orders.OrderTables.STOCK;
import static dev.msgqueue.example.orders.OrderTables.STOCK_AVAILABLE;
import static dev.msgqueue.example.orders.OrderTables.STOCK_ITEM;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.coalesce;
import static org.jooq.impl.DSL.jsonbGetAttributeAsText;
import static org.jooq.impl.DSL.max;
import static org.jooq.impl.DSL.val;

import com.fasterxml.jackson.databind.JsonNode;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.util.Map;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.jooq.DSLContext;
import org.jooq.impl.SQLDataType;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.web.client.RestClient;

/**
 * The service as its users run it: started whole on a random port over a fresh PostgreSQL database (Boot's Liquibase
 * applies its changelog, msgqueue's included), driven over HTTP, and checked in the database through a connection
 * of the test's own.
 */
@ExtendWith(OrderServiceTest.DropDatabaseAfterTheService.class)
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@DirtiesContext
class OrderServiceTest {
  private static final TestDatabase DATABASE = TestDatabase.createEmpty("order_service");
  /** How long the test waits for the listener; a bound on a wait, not a speed requirement. */
  private static final Duration PATIENCE = Duration.ofSeconds(30);

  @DynamicPropertySource
  static void database(DynamicPropertyRegistry registry) {
    registry.add("spring.datasource.url", DATABASE::jdbcUrl);
  }

  /**
   * Drops the database once the service has stopped: registered before {@link SpringBootTest}'s extension, its
   * after-all callback runs after Spring closed the context ({@link DirtiesContext}), subscriber and pool included.
   */
  static final class DropDatabaseAfterTheService implements AfterAllCallback {
    @Override
    public void afterAll(ExtensionContext context) {
      DATABASE.close();
    }
  }

  @LocalServerPort
  int port;

  private RestClient http;
  private final DSLContext db = DATABASE.dsl();

  @BeforeEach
  void client() {
    http = RestClient.builder()
        .baseUrl("http://127.0.0.1:" + port)
        .defaultStatusHandler(status -> true, (request, response) -> { })   // the tests read every status
        .build();
  }

  @Test
  void aPlacedOrderIsShipped() throws InterruptedException {
    ResponseEntity<JsonNode> placed = placeOrder("book", 2);

    assertThat(placed.getStatusCode()).isEqualTo(HttpStatus.CREATED);
    long orderId = placed.getBody().path("id").asLong();
    assertThat(placed.getBody().path("status").asText()).isEqualTo("PLACED");
    assertThat(placed.getHeaders().getLocation()).hasToString("http://127.0.0.1:" + port + "/orders/" + orderId);
    assertThat(availableStock("book")).isEqualTo(100 - 2);

    JsonNode shipped = awaitValue(() -> showOrder(orderId).getBody(),
        order -> order.path("status").asText().equals("SHIPPED"));
    assertThat(shipped.path("item").asText()).isEqualTo("book");
    assertThat(shipped.path("quantity").asInt()).isEqualTo(2);
    assertThat(shipped.path("shippedAt").isTextual()).as("shippedAt of %s", shipped).isTrue();
    assertThat(awaitValue(() -> messagesForOrdersAfter(orderId - 1), count -> count == 0))
        .as("the shipping message, acked once the order was shipped").isZero();
  }

  @Test
  void anOrderShortOfStockRollsBackWithItsMessage() {
    long lastOrderBefore = db.select(coalesce(max(ORDER_ID), val(0L))).from(ORDERS).fetchSingle().value1();

    ResponseEntity<JsonNode> refused = placeOrder("lamp", 4);   // 3 in stock

    assertProblem(refused, HttpStatus.CONFLICT, "not enough \"lamp\" in stock for 4");
    assertThat(db.fetchCount(ORDERS, ORDER_ID.gt(lastOrderBefore))).as("orders stored").isZero();
    // Published before the stock check failed. Had it committed on its own, it would still be here: the listener
    // finds no order to ship, throws, and the message waits out the retry policy's backoff.
    assertThat(messagesForOrdersAfter(lastOrderBefore)).as("shipping messages stored").isZero();
    assertThat(availableStock("lamp")).isEqualTo(3);
  }

  @Test
  void anOrderOfNothingIsABadRequest() {
    ResponseEntity<JsonNode> refused = placeOrder("book", 0);

    assertProblem(refused, HttpStatus.BAD_REQUEST, "quantity must be 1 to 1000, not 0");
  }

  @Test
  void anUnknownItemIsUnprocessableAndNothingIsStoredOrPublished() {
    long lastOrderBefore = db.select(coalesce(max(ORDER_ID), val(0L))).from(ORDERS).fetchSingle().value1();
    double publishedBefore = publishedCount();

    ResponseEntity<JsonNode> refused = placeOrder("chair", 1);

    assertProblem(refused, HttpStatus.UNPROCESSABLE_ENTITY, "no item \"chair\" is sold here");
    assertThat(db.fetchCount(ORDERS, ORDER_ID.gt(lastOrderBefore))).as("orders stored").isZero();
    assertThat(messagesForOrdersAfter(lastOrderBefore)).as("shipping messages stored").isZero();
    assertThat(publishedCount()).isEqualTo(publishedBefore);
  }

  @Test
  void aBodyThatIsNoOrderIsABadRequestThatShowsNoInternals() {
    for (String body : new String[] {"{\"item\": \"book\", \"quantity\": ", "{\"item\": \"book\", \"quantity\": \"two\"}",
        "[]"}) {
      ResponseEntity<String> refused = http.post().uri("/orders").contentType(MediaType.APPLICATION_JSON).body(body)
          .retrieve().toEntity(String.class);

      assertThat(refused.getStatusCode()).as(body).isEqualTo(HttpStatus.BAD_REQUEST);
      assertThat(refused.getHeaders().getContentType()).as(body).isEqualTo(MediaType.APPLICATION_PROBLEM_JSON);
      assertThat(refused.getBody()).as(body)
          .contains("the body must be a JSON object such as {\\\"item\\\": \\\"book\\\", \\\"quantity\\\": 2}")
          .doesNotContainIgnoringCase("exception").doesNotContain("JSON parse error", "com.fasterxml", "Source:",
              "line:");
    }
  }

  @Test
  void anOrderIdThatIsNoNumberIsABadRequestThatShowsNoInternals() {
    ResponseEntity<String> refused = http.get().uri("/orders/abc").retrieve().toEntity(String.class);

    assertThat(refused.getStatusCode()).isEqualTo(HttpStatus.BAD_REQUEST);
    assertThat(refused.getHeaders().getContentType()).isEqualTo(MediaType.APPLICATION_PROBLEM_JSON);
    assertThat(refused.getBody()).contains("\"detail\":\"an order id is a whole number\"")
        .doesNotContain("For input string", "java.").doesNotContainIgnoringCase("exception");
  }

  @Test
  void anUnknownOrderIsNotFound() {
    assertProblem(showOrder(Long.MAX_VALUE), HttpStatus.NOT_FOUND, "no order " + Long.MAX_VALUE);
  }

  @Test
  void publishedCountsTheCommittedOrderNotTheRolledBackOne() {
    double before = publishedCount();

    assertThat(placeOrder("pen", 1).getStatusCode()).isEqualTo(HttpStatus.CREATED);
    assertThat(placeOrder("lamp", 4).getStatusCode()).isEqualTo(HttpStatus.CONFLICT);   // its publish rolls back

    assertThat(publishedCount()).isEqualTo(before + 1);
  }

  @Test
  void healthAndMetricsAnswer() {
    ResponseEntity<JsonNode> health = http.get().uri("/actuator/health").retrieve().toEntity(JsonNode.class);

    assertThat(health.getStatusCode()).isEqualTo(HttpStatus.OK);
    assertThat(health.getBody().path("status").asText()).as("%s", health.getBody()).isEqualTo("UP");

    ResponseEntity<JsonNode> msgqueue =
        http.get().uri("/actuator/health/msgqueue").retrieve().toEntity(JsonNode.class);

    assertThat(msgqueue.getStatusCode()).isEqualTo(HttpStatus.OK);
    assertThat(msgqueue.getBody().path("status").asText()).as("%s", msgqueue.getBody()).isEqualTo("UP");
    assertThat(msgqueue.getBody().path("details").path("database").asText()).isEqualTo("reachable");
    assertThat(msgqueue.getBody().path("details").path("listener").asText()).isEqualTo("listening");

    placeOrder("pen", 1);
    ResponseEntity<JsonNode> published = http.get()
        .uri("/actuator/metrics/msgqueue.messages.published?tag=queue:shipping").retrieve().toEntity(JsonNode.class);

    assertThat(published.getStatusCode()).isEqualTo(HttpStatus.OK);
    assertThat(published.getBody().path("measurements").get(0).path("value").asDouble())
        .as("%s", published.getBody()).isGreaterThanOrEqualTo(1.0);
  }

  private static void assertProblem(ResponseEntity<JsonNode> response, HttpStatus status, String detail) {
    assertThat(response.getStatusCode()).as("%s", response.getBody()).isEqualTo(status);
    assertThat(response.getHeaders().getContentType()).isEqualTo(MediaType.APPLICATION_PROBLEM_JSON);
    assertThat(response.getBody().path("status").asInt()).isEqualTo(status.value());
    assertThat(response.getBody().path("detail").asText()).isEqualTo(detail);
  }

  /** {@code msgqueue.messages.published} of the shipping queue, from Actuator (0 before the first publish). */
  private double publishedCount() {
    ResponseEntity<JsonNode> published = http.get()
        .uri("/actuator/metrics/msgqueue.messages.published?tag=queue:shipping").retrieve().toEntity(JsonNode.class);
    if (published.getStatusCode() == HttpStatus.NOT_FOUND) {
      return 0;
    }
    assertThat(published.getStatusCode()).as("%s", published.getBody()).isEqualTo(HttpStatus.OK);
    return published.getBody().path("measurements").get(0).path("value").asDouble();
  }

  private ResponseEntity<JsonNode> placeOrder(String item, int quantity) {
    return http.post().uri("/orders")
        .contentType(MediaType.APPLICATION_JSON)
        .body(Map.of("item", item, "quantity", quantity))
        .retrieve()
        .toEntity(JsonNode.class);
  }

  private ResponseEntity<JsonNode> showOrder(long orderId) {
    return http.get().uri("/orders/{id}", orderId).retrieve().toEntity(JsonNode.class);
  }

  private int availableStock(String item) {
    return db.select(STOCK_AVAILABLE).from(STOCK).where(STOCK_ITEM.eq(item)).fetchSingle().value1();
  }

  /** Messages on any queue whose payload names an order after {@code orderId}. */
  private int messagesForOrdersAfter(long orderId) {
    return db.fetchCount(MESSAGE_QUEUE_ITEM,
        jsonbGetAttributeAsText(MESSAGE_QUEUE_ITEM.PAYLOAD, "orderId").cast(SQLDataType.BIGINT).gt(orderId));
  }

  /** The first value that satisfies {@code done}, or the last one read once {@link #PATIENCE} has passed. */
  private static <T> T awaitValue(Supplier<T> read, Predicate<T> done) throws InterruptedException {
    long deadline = System.nanoTime() + PATIENCE.toNanos();
    T value = read.get();
    while (!done.test(value) && System.nanoTime() < deadline) {
      Thread.sleep(20);
      value = read.get();
    }
    return value;
  }
}
