package dev.msgqueue.it;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Runs the Liquibase command line in a JVM of its own, as a service or the {@code liquibase} launcher would, with
 * this test JVM's class path: msgqueue-migrations (the changelog), Liquibase, picocli, pgjdbc. In-process runs share
 * Liquibase's JVM-wide state (its lock service is looked up by database URL, so two "services" in one JVM share one
 * and deadlock on its release), which is not what two services starting at once do.
 */
final class LiquibaseCli {
  private final Process process;
  private final Path output;

  private LiquibaseCli(Process process, Path output) {
    this.process = process;
    this.output = output;
  }

  /** Starts {@code liquibase update} of the msgqueue changelog against {@code jdbcUrl}, logging to {@code output}. */
  static LiquibaseCli update(String jdbcUrl, Path output) throws IOException {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process process = new ProcessBuilder(List.of(java, "-cp", System.getProperty("java.class.path"),
        "-Dliquibase.analytics.enabled=false",
        "-Dliquibase.changelogLockPollRate=1",
        "liquibase.integration.commandline.LiquibaseCommandLine",
        "--show-banner=false",
        "--url=" + jdbcUrl,
        "update",
        "--changelog-file=" + Migrations.CHANGELOG))
        .redirectErrorStream(true)
        .redirectOutput(output.toFile())
        .start();
    return new LiquibaseCli(process, output);
  }

  /** Waits for the run (at most past Liquibase's own 5-minute lock wait) and returns its exit code. */
  int exitCode() throws InterruptedException {
    if (!process.waitFor(330, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      throw new AssertionError("liquibase did not finish; its output:\n" + output());
    }
    return process.exitValue();
  }

  String output() {
    try {
      return Files.readString(output);
    } catch (IOException e) {
      return "(unreadable: " + e + ")";
    }
  }
}
