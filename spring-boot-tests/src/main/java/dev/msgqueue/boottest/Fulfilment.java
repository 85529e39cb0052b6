package dev.msgqueue.boottest;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.spring.MsgQueueListener;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Component;

/**
 * Fulfils every order published to {@link BootService#FULFIL}, in the default (held-transaction) mode, writing a
 * shipment row three ways: through a {@code JdbcTemplate}, through Boot's jOOQ {@code DSLContext}, and through a
 * {@code @Transactional} method of another bean. An order whose payload asks for it fails its first delivery after
 * those writes.
 */
@Component
public class Fulfilment {
  private final JdbcTemplate jdbc;
  private final DSLContext dsl;
  private final ShipmentLedger ledger;
  private final Map<Long, AtomicInteger> deliveries = new ConcurrentHashMap<>();

  public Fulfilment(JdbcTemplate jdbc, DSLContext dsl, ShipmentLedger ledger) {
    this.jdbc = jdbc;
    this.dsl = dsl;
    this.ledger = ledger;
  }

  @MsgQueueListener(queue = BootService.FULFIL)
  void fulfil(ClaimedMessage order) {
    int delivery = deliveries.computeIfAbsent(order.id(), id -> new AtomicInteger()).incrementAndGet();
    jdbc.update("INSERT INTO shipment (payload) VALUES (?)", "jdbc " + order.id());
    // The service's own table, which has no generated class here: names.
    dsl.insertInto(table(name("shipment")), field(name("payload"), String.class)).values("jooq " + order.id())
        .execute();
    ledger.record("transactional " + order.id());
    if (delivery == 1 && order.payload().contains("\"failFirst\": true")) {
      throw new IllegalStateException("the first delivery of order " + order.id() + " fails after its writes");
    }
  }

  /** How many times each order was delivered so far. */
  public Map<Long, Integer> deliveries() {
    Map<Long, Integer> copy = new java.util.HashMap<>();
    deliveries.forEach((id, count) -> copy.put(id, count.get()));
    return copy;
  }
}
