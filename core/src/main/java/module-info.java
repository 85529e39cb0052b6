/**
 * msgqueue's core: the API in {@code dev.msgqueue}, nothing else exported. The sub-packages of
 * {@code dev.msgqueue.internal} are its rooms (publish, consume, maintenance, SQL, support) and may change in any
 * release.
 */
module dev.msgqueue.core {
  requires transitive java.sql;
  requires transitive org.jooq;
  requires transitive dev.msgqueue.codegen;
  requires com.fasterxml.jackson.core;
  requires org.postgresql.jdbc;
  requires org.slf4j;
  requires static micrometer.core;

  exports dev.msgqueue;
}
