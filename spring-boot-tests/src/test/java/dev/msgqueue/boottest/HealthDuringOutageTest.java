package dev.msgqueue.boottest;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** {@code /actuator/health/msgqueue} while the database is gone (its relay cut) and once it is back. */
@ExtendWith({ScratchDatabase.class, DatabaseProxy.class, OutputCaptureExtension.class})
@SpringBootTest(classes = BootService.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    properties = "management.endpoint.health.show-details=always")
@DirtiesContext
class HealthDuringOutageTest {
  /** The longest one check may take during the outage (its own timeouts are 1 s). */
  private static final Duration ANSWER_BOUND = Duration.ofSeconds(2);

  @DynamicPropertySource
  static void database(DynamicPropertyRegistry registry) {
    registry.add("spring.datasource.url", () -> DatabaseProxy.current().jdbcUrl());
  }

  @Value("${local.server.port}")
  private int port;

  @Test
  void downWithinASecondOrSoDuringAnOutageLoggedOnceAndUpAtTheFirstCheckAfter(CapturedOutput output)
      throws IOException {
    Http http = new Http(port);
    assertThat(http.get("/actuator/health/msgqueue").status()).isEqualTo(200);

    DatabaseProxy.current().cut();
    for (int i = 0; i < 5; i++) {
      long started = System.nanoTime();
      Http.Response health = http.get("/actuator/health/msgqueue");
      Duration took = Duration.ofNanos(System.nanoTime() - started);
      assertThat(took).as("check %d during the outage", i).isLessThan(ANSWER_BOUND);
      assertThat(health.status()).isEqualTo(503);
      assertThat((String) health.json("$.status")).isEqualTo("DOWN");
      assertThat((String) health.json("$.details.database")).startsWith("unreachable: ");
    }
    assertThat(output.getAll().lines().filter(line -> line.contains("msgqueue health is DOWN")))
        .as("one line for the change of status, none per failed check").hasSize(1);

    DatabaseProxy.current().restore();
    Http.Response health = http.get("/actuator/health/msgqueue");
    assertThat(health.status()).as(health.body()).isEqualTo(200);
    assertThat((String) health.json("$.status")).isEqualTo("UP");
    assertThat(output.getAll().lines().filter(line -> line.contains("msgqueue health is UP again"))).hasSize(1);
  }
}
