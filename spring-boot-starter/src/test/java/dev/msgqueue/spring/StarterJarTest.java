package dev.msgqueue.spring;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The starter's packaging: what Spring Boot and the IDE read from the jar. */
class StarterJarTest {
  @Test
  void theAutoConfigurationIsRegisteredAndThePropertiesHaveMetadata() throws IOException {
    Path classes = Path.of("target", "classes", "META-INF");
    assertThat(Files.readString(classes.resolve(
        "spring/org.springframework.boot.autoconfigure.AutoConfiguration.imports")).trim())
        .isEqualTo(MsgQueueAutoConfiguration.class.getName() + "\n" + MsgQueueConsoleAutoConfiguration.class.getName());
    String metadata = Files.readString(classes.resolve("spring-configuration-metadata.json"));
    assertThat(metadata).contains("\"msgqueue.keep-alive-interval\"", "\"msgqueue.housekeeper.interval\"",
        "\"msgqueue.listener.url\"", "\"msgqueue.subscriber.lease\"", "\"msgqueue.console.enabled\"",
        "\"msgqueue.console.path\"", "\"msgqueue.console.actions-enabled\"");
  }
}
