package dev.msgqueue.example.orders;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import java.time.OffsetDateTime;
import org.jooq.Field;
import org.jooq.Record;
import org.jooq.Table;
import org.jooq.impl.EnumConverter;
import org.jooq.impl.SQLDataType;

/**
 * The service's own tables (db/changelog/db.changelog-master.xml) as typed jOOQ fields. Two small tables are declared
 * by name here to keep the example one module; a service with more generates them, as msgqueue does for its own.
 */
final class OrderTables {
  static final Table<Record> ORDERS = table(name("orders"));
  static final Field<Long> ORDER_ID = field(name("orders", "id"), SQLDataType.BIGINT);
  static final Field<String> ORDER_ITEM = field(name("orders", "item"), SQLDataType.CLOB);
  static final Field<Integer> ORDER_QUANTITY = field(name("orders", "quantity"), SQLDataType.INTEGER);
  static final Field<OrderStatus> ORDER_STATUS = field(name("orders", "status"),
      SQLDataType.CLOB.asConvertedDataType(new EnumConverter<>(String.class, OrderStatus.class)));
  static final Field<OffsetDateTime> ORDER_PLACED_AT =
      field(name("orders", "placed_at"), SQLDataType.TIMESTAMPWITHTIMEZONE);
  static final Field<OffsetDateTime> ORDER_SHIPPED_AT =
      field(name("orders", "shipped_at"), SQLDataType.TIMESTAMPWITHTIMEZONE);

  static final Table<Record> STOCK = table(name("stock"));
  static final Field<String> STOCK_ITEM = field(name("stock", "item"), SQLDataType.CLOB);
  static final Field<Integer> STOCK_AVAILABLE = field(name("stock", "available"), SQLDataType.INTEGER);

  private OrderTables() {
  }
}
