package dev.msgqueue.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.jooq.codegen.GenerationTool;
import org.jooq.meta.jaxb.Configuration;
import org.jooq.meta.jaxb.Database;
import org.jooq.meta.jaxb.Generate;
import org.jooq.meta.jaxb.Generator;
import org.jooq.meta.jaxb.Jdbc;
import org.jooq.meta.jaxb.Strategy;
import org.jooq.meta.jaxb.Target;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * The typed tables in msgqueue-codegen are generated from a PostgreSQL migrated by the changelog and committed. This
 * test regenerates them from a freshly migrated database and fails on any difference, so a changeset without
 * regenerated sources (or a hand edit of generated code) cannot land.
 *
 * <p>Regenerate with {@code mvn -pl it-tests -am verify -Dit.test=SchemaCodegenDriftIT -Dmsgqueue.codegen.write=true
 * -Dsurefire.failIfNoSpecifiedTests=false}: the same generation, written over codegen/src/main/java.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class SchemaCodegenDriftIT {
  static final String PACKAGE = "dev.msgqueue.jooq";

  @Test
  void committedTypedTablesMatchTheMigratedSchema(TestDatabase database, @TempDir Path generated) throws Exception {
    Path committed = Path.of(System.getProperty("msgqueue.codegen.sourceDir", "../codegen/src/main/java"));
    boolean write = Boolean.getBoolean("msgqueue.codegen.write");
    Path target = write ? committed : generated;
    if (write) {
      deleteTree(committed.resolve(PACKAGE.replace('.', '/')));
    }

    GenerationTool.generate(configuration(database.jdbcUrl(), target));

    Map<String, String> expected = javaSources(target);
    assertThat(expected).as("generated sources").containsKeys(
        "dev/msgqueue/jooq/tables/MessageQueue.java",
        "dev/msgqueue/jooq/tables/MessageQueueItem.java",
        "dev/msgqueue/jooq/enums/MessageQueueItemStatus.java");
    assertThat(javaSources(committed))
        .as("committed sources under %s; regenerate them (see this class's Javadoc)", committed)
        .isEqualTo(expected);
  }

  static Configuration configuration(String jdbcUrl, Path targetDirectory) {
    return new Configuration()
        .withJdbc(new Jdbc().withDriver("org.postgresql.Driver").withUrl(jdbcUrl))
        .withGenerator(new Generator()
            .withStrategy(new Strategy().withName(CamelCaseNamesStrategy.class.getName()))
            .withDatabase(new Database()
                .withName("org.jooq.meta.postgres.PostgresDatabase")
                .withInputSchema("public")
                // Services apply the schema wherever their search_path points; the generated code must not pin it.
                .withOutputSchemaToDefault(true)
                .withExcludes("databasechangelog|databasechangeloglock"))
            .withGenerate(new Generate()
                .withGeneratedAnnotation(false)
                .withJavaTimeTypes(true))
            .withTarget(new Target()
                .withPackageName(PACKAGE)
                .withDirectory(targetDirectory.toString())
                .withClean(false)));
  }

  private static Map<String, String> javaSources(Path root) throws IOException {
    Map<String, String> sources = new TreeMap<>();
    Path packageRoot = root.resolve(PACKAGE.replace('.', '/'));
    if (!Files.isDirectory(packageRoot)) {
      return sources;
    }
    try (Stream<Path> files = Files.walk(packageRoot)) {
      files.filter(file -> file.toString().endsWith(".java")).forEach(file -> {
        try {
          sources.put(root.relativize(file).toString().replace('\\', '/'), Files.readString(file));
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
      });
    }
    return sources;
  }

  private static void deleteTree(Path directory) throws IOException {
    if (!Files.exists(directory)) {
      return;
    }
    try (Stream<Path> paths = Files.walk(directory)) {
      for (Path path : paths.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(path);
      }
    }
  }
}
