/** The jOOQ typed tables of msgqueue's schema, generated from the Liquibase changelog. */
module dev.msgqueue.codegen {
  requires transitive org.jooq;

  exports dev.msgqueue.jooq;
  exports dev.msgqueue.jooq.enums;
  exports dev.msgqueue.jooq.tables;
  exports dev.msgqueue.jooq.tables.records;
}
