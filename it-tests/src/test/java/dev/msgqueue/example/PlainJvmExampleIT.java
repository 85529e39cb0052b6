package dev.msgqueue.example;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.it.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The plain-JVM service of docs/operations.md ({@link PlainJvmService}, in a package of its own so that it can only
 * use the public API): it runs on an empty database, the document shows exactly its code, and run as the document's
 * command runs it, in a JVM of its own, it prints what happened and no library noise.
 */
class PlainJvmExampleIT {
  private static final Path SOURCE = Path.of("src/test/java/dev/msgqueue/example/PlainJvmService.java");
  private static final Path DOCUMENT = Path.of("../docs/operations.md");
  /** The JVM flags of the document's run command: jOOQ's logo and tip off, Liquibase's INFO lines left out. */
  static final List<String> RUN_FLAGS = List.of("-Dorg.jooq.no-logo=true", "-Dorg.jooq.no-tips=true",
      "-Dorg.slf4j.simpleLogger.log.liquibase=warn");

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

    assertThat(Files.readString(DOCUMENT)).contains("```java\n" + example + "\n```")
        .contains("java " + String.join(" ", RUN_FLAGS) + " \\\n  -cp ");
  }

  @Test
  void runLikeTheDocumentItPrintsWhatHappenedAndNoLibraryNoise() throws Exception {
    try (TestDatabase db = TestDatabase.createEmpty("PlainJvmExampleLog")) {
      List<String> command = new ArrayList<>();
      command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      command.addAll(RUN_FLAGS);
      // Nothing else of this test JVM's settings (time zone, log levels): a user's JVM, on the same class path.
      command.addAll(List.of("-cp", System.getProperty("java.class.path"), PlainJvmService.class.getName(),
          db.jdbcUrl()));
      Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
      byte[] output = process.getInputStream().readAllBytes();
      assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
      String printed = new String(output, StandardCharsets.UTF_8);
      List<String> lines = printed.lines().toList();

      assertThat(process.exitValue()).as("exit code; output:%n%s", printed).isZero();
      assertThat(lines.stream().filter(line -> line.contains("shipping {\"orderId\": "))).as(printed).hasSize(3);
      // Every line is one of slf4j-simple's ([thread] LEVEL logger - message): Liquibase's java.util.logging lines
      // went through SLF4J, and neither jOOQ's logo nor a multi-line message is left.
      assertThat(lines).as(printed).allMatch(line -> line.matches("\\[[^\\]]+\\] (INFO|WARN|ERROR) \\S+ - .*"));
      assertThat(printed)
          .doesNotContain("@@@@@@@@", "tip of the day")   // jOOQ's logo and tip
          .doesNotContain("does not exist, skipping")     // a server notice
          .doesNotContain("UPDATE SUMMARY", "liquibase"); // Liquibase at INFO: its lines and its summary
      // The pool's start and stop, the housekeeper, jOOQ's dialect line, three orders, the subscriber's close.
      assertThat(lines).as(printed).hasSizeLessThanOrEqualTo(12);
    }
  }
}
