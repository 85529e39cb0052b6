package dev.msgqueue.boottest;

import dev.msgqueue.it.TestDatabase;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * An empty database per test class on the test server ({@code MSGQUEUE_TEST_JDBC_URL}, else an embedded PostgreSQL
 * 17), for the service to migrate at its start. Declared before {@code @SpringBootTest}, so it is dropped only after
 * Spring closed the class's context ({@code @DirtiesContext}) and with it the service's pool.
 */
public final class ScratchDatabase implements BeforeAllCallback, AfterAllCallback {
  private static TestDatabase current;

  /** The current test class's database. */
  static synchronized TestDatabase current() {
    if (current == null) {
      throw new IllegalStateException("no scratch database: extend the test class with ScratchDatabase first");
    }
    return current;
  }

  @Override
  public synchronized void beforeAll(ExtensionContext context) {
    current = TestDatabase.createEmpty(context.getRequiredTestClass().getSimpleName());
  }

  @Override
  public synchronized void afterAll(ExtensionContext context) {
    current.close();
    current = null;
  }
}
