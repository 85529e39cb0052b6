package dev.msgqueue.example.orders;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.msgqueue.it.TestDatabase;
import java.util.concurrent.TimeUnit;
import org.jooq.DSLContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The whole service on a fresh database: Boot's Liquibase applies the service's changelog, msgqueue's included. */
@ExtendWith(OrderServiceTest.DropDatabaseAfterTheService.class)
@SpringBootTest
@DirtiesContext
class OrderServiceTest {
  private static final TestDatabase DATABASE = TestDatabase.createEmpty("order_service");

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

  @Autowired
  OrderService orders;
  @Autowired
  ShippingListener shipping;
  @Autowired
  DSLContext dsl;

  @Test
  void aPlacedOrderIsShipped() throws InterruptedException {
    long orderId = orders.placeOrder("book", 2);

    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!shipping.shipped().contains(orderId) && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertThat(shipping.shipped()).contains(orderId);
  }

  @Test
  void aRolledBackOrderLeavesNoMessage() {
    int messagesBefore = dsl.fetchCount(MESSAGE_QUEUE_ITEM);
    int ordersBefore = dsl.fetchCount(table(name("orders")));

    assertThatThrownBy(() -> orders.placeOrder("nothing", 0)).isInstanceOf(IllegalStateException.class);

    assertThat(dsl.fetchCount(table(name("orders")))).isEqualTo(ordersBefore);
    assertThat(dsl.fetchCount(MESSAGE_QUEUE_ITEM)).as("the message rolled back with the order")
        .isLessThanOrEqualTo(messagesBefore);
    assertThat(dsl.fetchCount(MESSAGE_QUEUE_ITEM, MESSAGE_QUEUE_ITEM.PAYLOAD.cast(String.class).like("%\"quantity\": 0%")))
        .isZero();
  }
}
