package dev.msgqueue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.internal.sql.Receipt;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.Constructor;
import java.lang.reflect.Executable;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.SQLException;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.JSONB;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.tools.jdbc.MockConnection;
import org.jooq.tools.jdbc.MockResult;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The null rule, over the whole public API by reflection: a null argument is bad input like any other and fails with
 * {@link IllegalArgumentException} naming it, before any SQL; never with a {@link NullPointerException}. The only
 * nullable parameters are those whose Javadoc gives null a meaning, listed in {@link #NULLABLE}.
 */
class NullArgumentsTest {
  /**
   * Public types that take no input: exceptions (their message is Java's business), interfaces the caller implements,
   * and the values msgqueue returns (their constructors are not entry points).
   */
  private static final Set<Class<?>> NOT_ENTRY_POINTS = Set.of(QueueStatistics.class, QueueStatisticsSnapshot.class,
      HousekeepingRun.class,
      HousekeepingRun.Outcome.class, FailureOutcome.class, RepublishOutcome.class, DeadLetter.class, MessageHandler.class,
      WakeupListener.ConnectionFactory.class, TransactionalMessageHandler.class, ConsumeMode.class, CommitHook.class);
  /** "Class.method#index": null means "the default" there. */
  private static final Set<String> NULLABLE = Set.of(
      "PublishOptions.<init>#0", // ttl: the configured default TTL
      "QueueSpec.<init>#4", // exclusiveConsumerId of a queue that is not exclusive
      "Builder.wakeups#0", // no wake-up listener: polling only
      "PublishOptions.equals#0", "QueueSpec.equals#0", "MsgQueueConfig.equals#0", "RetryPolicy.equals#0");

  private final DSLContext mock = DSL.using(new MockConnection(ctx -> new MockResult[] {
      new MockResult(1, DSL.using(SQLDialect.POSTGRES).newResult())}), SQLDialect.POSTGRES);
  private final MsgQueueRepository repository = MsgQueueRepository.create(mock, MsgQueueConfig.defaults());
  private final MsgQueueRepository pooled =
      MsgQueueRepository.create(new PGSimpleDataSource(), MsgQueueConfig.defaults());
  private final ClaimedMessage claimed = new ClaimedMessage("q", JSONB.valueOf("{}"), new Receipt(1, LocalDateTime.now(), false));
  private final Subscriber subscriber =
      Subscriber.builder(repository, QueueSpec.durable("q"), m -> { }).mode(ConsumeMode.AT_MOST_ONCE)
          .pollInterval(Duration.ofHours(1)).start();
  private final WakeupListener listener = WakeupListener.start(() -> {
    throw new SQLException("no database in this test");
  });

  @AfterEach
  void stop() {
    subscriber.close(Duration.ofSeconds(5));
    listener.close();
  }

  @Test
  void everyPublicEntryPointRejectsNullWithIllegalArgumentException() throws Exception {
    Map<Class<?>, Object> instances = new HashMap<>();
    instances.put(MsgQueueRepository.class, repository);
    instances.put(TransactionalQueue.class, repository.inTransaction(mock));
    instances.put(QueueOperations.class, repository);
    instances.put(QueueSpec.class, QueueSpec.durable("q"));
    instances.put(PublishOptions.class, PublishOptions.defaults());
    instances.put(MsgQueueConfig.class, MsgQueueConfig.defaults());
    instances.put(MsgQueueConfig.Builder.class, MsgQueueConfig.builder());
    instances.put(Subscriber.class, subscriber);
    instances.put(Subscriber.Builder.class, Subscriber.builder(repository, QueueSpec.durable("q"), m -> { }));
    instances.put(WakeupListener.class, listener);
    instances.put(ClaimedMessage.class, claimed);
    instances.put(Housekeeper.Builder.class, Housekeeper.builder(pooled));
    instances.put(RetryPolicy.class, RetryPolicy.defaults("q-dlq"));
    instances.put(RetryPolicy.Builder.class, RetryPolicy.builder("q-dlq"));

    List<String> checked = new ArrayList<>();
    List<String> wrong = new ArrayList<>();
    for (Class<?> type : publicApi()) {
      List<Executable> entryPoints = new ArrayList<>(Arrays.asList(type.getConstructors()));
      entryPoints.addAll(Arrays.stream(type.getMethods()).filter(m -> m.getDeclaringClass() == type).toList());
      for (Executable entryPoint : entryPoints) {
        Class<?>[] parameters = entryPoint.getParameterTypes();
        for (int i = 0; i < parameters.length; i++) {
          String key = type.getSimpleName() + "." + (entryPoint instanceof Constructor ? "<init>" : entryPoint.getName())
              + "#" + i;
          if (parameters[i].isPrimitive() || NULLABLE.contains(key)) {
            continue;
          }
          Object[] arguments = validArguments(entryPoint, instances.get(type));
          arguments[i] = null;
          Throwable thrown = invoke(entryPoint, instances.get(type), arguments);
          checked.add(key);
          if (!(thrown instanceof IllegalArgumentException) || !thrown.getMessage().contains("null")) {
            wrong.add(describe(entryPoint) + " with null #" + i + " threw " + thrown);
          }
        }
      }
    }
    assertThat(wrong).isEmpty();
    // The reflection did find the entry points the rule is about.
    assertThat(checked).contains("PublishOptions.withTtl#0", "QueueSpec.exclusive#1", "MsgQueueRepository.ack#0",
        "MsgQueueRepository.release#1", "TransactionalQueue.publish#1", "Subscriber.close#0", "Builder.lease#0",
        "WakeupListener.start#0", "MsgQueueRepository.create#0", "MsgQueueConfig.<init>#0",
        "Housekeeper.builder#0", "MsgQueueRepository.queueStatistics#0",
        "MsgQueueRepository.fail#1", "TransactionalQueue.extendLeases#0", "RetryPolicy.<init>#5",
        "Builder.deadLetterTtl#0");
    assertThat(checked).hasSizeGreaterThan(60);
  }

  @Test
  void nullElementsAreBadInputToo() {
    assertThatThrownBy(() -> repository.ack(Arrays.asList(claimed, null))).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("index 1");
    assertThatThrownBy(() -> repository.publishBatch(QueueSpec.durable("q"), Arrays.asList("{}", null)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("payload 1");
  }

  /** Every public class and public nested class of the package, found in the compiled classes. */
  private static List<Class<?>> publicApi() throws Exception {
    Path classes = Path.of(MsgQueueRepository.class.getProtectionDomain().getCodeSource().getLocation().toURI())
        .resolve("dev/msgqueue");
    List<Class<?>> api = new ArrayList<>();
    try (Stream<Path> files = Files.list(classes)) {
      for (Path file : files.filter(f -> f.toString().endsWith(".class")).sorted().toList()) {
        String name = file.getFileName().toString();
        Class<?> type = Class.forName("dev.msgqueue." + name.substring(0, name.length() - ".class".length()));
        boolean isPublic = Modifier.isPublic(type.getModifiers())
            && (type.getEnclosingClass() == null || Modifier.isPublic(type.getEnclosingClass().getModifiers()));
        if (isPublic && !type.isAnonymousClass() && !Throwable.class.isAssignableFrom(type)
            && !NOT_ENTRY_POINTS.contains(type)) {
          api.add(type);
        }
      }
    }
    assertThat(api).contains(MsgQueueRepository.class, Subscriber.Builder.class, MsgQueueConfig.Builder.class);
    return api;
  }

  /** A record's canonical constructor gets a valid instance's components (its checks relate them); else samples. */
  private Object[] validArguments(Executable entryPoint, Object instance) throws Exception {
    Class<?> type = entryPoint.getDeclaringClass();
    Object[] arguments = new Object[entryPoint.getParameterCount()];
    if (entryPoint instanceof Constructor && type.isRecord()) {
      var components = type.getRecordComponents();
      for (int j = 0; j < components.length; j++) {
        arguments[j] = components[j].getAccessor().invoke(instance);
      }
      return arguments;
    }
    for (int j = 0; j < arguments.length; j++) {
      arguments[j] = sample(entryPoint.getParameterTypes()[j]);
    }
    return arguments;
  }

  private static Throwable invoke(Executable entryPoint, Object instance, Object[] arguments) throws Exception {
    try {
      if (entryPoint instanceof Constructor<?> constructor) {
        constructor.newInstance(arguments);
      } else {
        Method method = (Method) entryPoint;
        method.invoke(Modifier.isStatic(method.getModifiers()) ? null : instance, arguments);
      }
      return null;
    } catch (InvocationTargetException e) {
      return e.getCause();
    }
  }

  private Object sample(Class<?> type) {
    if (type == int.class) {
      return 1;
    } else if (type == long.class) {
      return 1L;
    } else if (type == boolean.class) {
      return false;
    } else if (type == String.class) {
      return "q";
    } else if (type == QueueSpec.class) {
      return QueueSpec.durable("q");
    } else if (type == Duration.class) {
      return Duration.ofSeconds(1);
    } else if (type == PublishOptions.class) {
      return PublishOptions.defaults();
    } else if (type == JSONB.class) {
      return JSONB.valueOf("{}");
    } else if (type == List.class) {
      return List.of("{}");
    } else if (type == Collection.class) {
      return List.of(claimed);
    } else if (type == ClaimedMessage.class) {
      return claimed;
    } else if (type == UUID.class) {
      return UUID.randomUUID();
    } else if (type == DSLContext.class) {
      return DSL.using(SQLDialect.POSTGRES);
    } else if (type == DataSource.class) {
      return new PGSimpleDataSource();
    } else if (type == MsgQueueConfig.class) {
      return MsgQueueConfig.defaults();
    } else if (type == MsgQueueRepository.class) {
      // A pool-backed repository (never connected to here) suits every entry point, the housekeeper's included.
      return pooled;
    } else if (type == MessageHandler.class) {
      return (MessageHandler) m -> { };
    } else if (type == TransactionalMessageHandler.class) {
      return (TransactionalMessageHandler) (m, tx) -> { };
    } else if (type == ConsumeMode.class) {
      return ConsumeMode.AT_MOST_ONCE;
    } else if (type == WakeupListener.ConnectionFactory.class) {
      return (WakeupListener.ConnectionFactory) () -> {
        throw new SQLException("unused");
      };
    } else if (type == WakeupListener.class) {
      return listener;
    } else if (type == Throwable.class) {
      return new IllegalStateException("handler failed");
    } else if (type == RetryPolicy.class) {
      return RetryPolicy.defaults("q-dlq");
    } else if (type == MeterRegistry.class) {
      return new SimpleMeterRegistry();
    } else if (type == CommitHook.class) {
      return CommitHook.IMMEDIATE;
    } else if (type == Object.class) {
      return "other";
    }
    throw new AssertionError("no sample value for " + type + ": add one");
  }

  private static String describe(Executable entryPoint) {
    return entryPoint.getDeclaringClass().getSimpleName() + "." + entryPoint.getName()
        + Arrays.toString(entryPoint.getParameterTypes());
  }
}
