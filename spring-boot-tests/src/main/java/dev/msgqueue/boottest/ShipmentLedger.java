package dev.msgqueue.boottest;

import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/** Records shipments in a {@code @Transactional} method, which joins the caller's transaction. */
@Service
public class ShipmentLedger {
  private final JdbcTemplate jdbc;

  public ShipmentLedger(JdbcTemplate jdbc) {
    this.jdbc = jdbc;
  }

  @Transactional
  public void record(String payload) {
    jdbc.update("INSERT INTO shipment (payload) VALUES (?)", payload);
  }
}
