package dev.msgqueue.it;

import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * Gives each test class one freshly migrated {@link TestDatabase} (as a constructor, lifecycle-method or test-method
 * parameter), dropped when the class finishes.
 */
public final class MsgQueueDatabaseExtension implements ParameterResolver {
  private static final ExtensionContext.Namespace NAMESPACE =
      ExtensionContext.Namespace.create(MsgQueueDatabaseExtension.class);

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    return parameter.getParameter().getType() == TestDatabase.class;
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    ExtensionContext classContext = context;
    while (classContext.getTestMethod().isPresent() && classContext.getParent().isPresent()) {
      classContext = classContext.getParent().get();
    }
    Class<?> testClass = classContext.getRequiredTestClass();
    return classContext.getStore(NAMESPACE)
        .getOrComputeIfAbsent("database", key -> new ClosingDatabase(TestDatabase.createMigrated(testClass.getSimpleName())),
            ClosingDatabase.class)
        .database();
  }

  private record ClosingDatabase(TestDatabase database)
      implements ExtensionContext.Store.CloseableResource, AutoCloseable {
    @Override
    public void close() {
      database.close();
    }
  }
}
