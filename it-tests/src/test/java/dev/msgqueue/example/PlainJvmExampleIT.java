package dev.msgqueue.example;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.it.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The plain-JVM service of docs/operations.md ({@link PlainJvmService}, in a package of its own so that it can only
 * use the public API): it runs on an empty database, and the document shows exactly its code.
 */
class PlainJvmExampleIT {
  private static final Path SOURCE = Path.of("src/test/java/dev/msgqueue/example/PlainJvmService.java");
  private static final Path DOCUMENT = Path.of("../docs/operations.md");

  @Test
  void mainAppliesTheSchemaThenPublishesAndHandlesEveryOrder() throws Exception {
    try (TestDatabase db = TestDatabase.createEmpty("PlainJvmExample")) {
      PlainJvmService.main(new String[] {db.jdbcUrl()}); // throws unless all three orders were handled in 30 s

      assertThat(db.dsl().fetchCount(MESSAGE_QUEUE, MESSAGE_QUEUE.NAME.eq("orders"))).isOne();
      assertThat(db.dsl().fetchCount(MESSAGE_QUEUE_ITEM)).as("orders left unacked").isZero();
    }
  }

  @Test
  void theDocumentShowsTheExampleAsCompiled() throws Exception {
    String source = Files.readString(SOURCE);
    // Everything after the package line: the imports and the class, as a reader copies them.
    String example = source.substring(source.indexOf('\n', source.indexOf("package ")) + 1).strip();

    assertThat(Files.readString(DOCUMENT)).contains("```java\n" + example + "\n```");
  }
}
