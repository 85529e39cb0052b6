package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Micrometer is optional: no class of core but {@link MicrometerMetrics} (and its nested classes) refers to it, so
 * nothing else can fail to load without it. Read from the compiled classes' constant pools.
 */
class OptionalMicrometerTest {
  @Test
  void onlyMicrometerMetricsRefersToMicrometer() throws Exception {
    Path classes = Path.of(MsgQueueRepository.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    List<String> referring;
    try (Stream<Path> files = Files.walk(classes)) {
      referring = files.filter(file -> file.toString().endsWith(".class"))
          .filter(OptionalMicrometerTest::refersToMicrometer)
          .map(file -> classes.relativize(file).toString())
          .toList();
    }
    assertThat(referring).isNotEmpty()
        .allSatisfy(name -> assertThat(name).startsWith("dev/msgqueue/MicrometerMetrics"));
  }

  private static boolean refersToMicrometer(Path classFile) {
    try {
      return new String(Files.readAllBytes(classFile), StandardCharsets.ISO_8859_1).contains("io/micrometer/");
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }
}
