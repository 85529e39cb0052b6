package dev.msgqueue.spring;

import dev.msgqueue.ClaimedMessage;
import dev.msgqueue.ConsumeMode;
import dev.msgqueue.MessageHandler;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.Subscriber;
import dev.msgqueue.WakeupListener;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.boot.convert.DurationStyle;
import org.springframework.context.EnvironmentAware;
import org.springframework.context.SmartLifecycle;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.env.Environment;
import org.springframework.util.ReflectionUtils;

/**
 * Finds {@link MsgQueueListener} methods on the application's beans and runs one {@link Subscriber} for each, started
 * with the application context and closed when it stops: a stop lets in-flight handlers finish and ack (bounded by
 * the close timeout) before the context goes on to close the {@code DataSource}.
 */
final class MsgQueueListenerRegistrar implements BeanPostProcessor, SmartLifecycle, EnvironmentAware {
  private static final Logger log = LoggerFactory.getLogger(MsgQueueListenerRegistrar.class);

  private final ObjectProvider<MsgQueueRepository> repository;
  private final ObjectProvider<WakeupListener> wakeups;
  private final ObjectProvider<MsgQueueProperties> properties;
  private final List<ListenerMethod> methods = new CopyOnWriteArrayList<>();
  private final List<Subscriber> running = new ArrayList<>();
  private Environment environment;

  MsgQueueListenerRegistrar(ObjectProvider<MsgQueueRepository> repository,
      ObjectProvider<WakeupListener> wakeups, ObjectProvider<MsgQueueProperties> properties) {
    this.repository = repository;
    this.wakeups = wakeups;
    this.properties = properties;
  }

  @Override
  public void setEnvironment(Environment environment) {
    this.environment = environment;
  }

  @Override
  public Object postProcessAfterInitialization(Object bean, String beanName) {
    Class<?> type = AopUtils.getTargetClass(bean);
    MethodIntrospector.selectMethods(type, (MethodIntrospector.MetadataLookup<MsgQueueListener>) method ->
            AnnotatedElementUtils.findMergedAnnotation(method, MsgQueueListener.class))
        .forEach((method, annotation) -> methods.add(ListenerMethod.of(bean, beanName, method, annotation)));
    return bean;
  }

  @Override
  public synchronized void start() {
    MsgQueueProperties.Subscriber defaults = properties.getObject().getSubscriber();
    for (ListenerMethod method : methods) {
      running.add(start(method, defaults));
    }
  }

  private Subscriber start(ListenerMethod method, MsgQueueProperties.Subscriber defaults) {
    MsgQueueListener annotation = method.annotation();
    String queueName = environment.resolveRequiredPlaceholders(annotation.queue());
    QueueSpec queue = annotation.autoDeleted() ? QueueSpec.autoDeleted(queueName) : QueueSpec.durable(queueName);
    Subscriber.Builder builder = Subscriber.builder(repository.getObject(), queue, method.handler());
    int concurrency = annotation.concurrency() > 0 ? annotation.concurrency() : orZero(defaults.getConcurrency());
    if (concurrency > 0) {
      builder.concurrency(concurrency);
    }
    int batchSize = annotation.batchSize() > 0 ? annotation.batchSize() : orZero(defaults.getBatchSize());
    if (batchSize > 0) {
      builder.batchSize(batchSize);
    }
    ConsumeMode mode = annotation.mode().isEmpty() ? defaults.getMode()
        : mode(environment.resolveRequiredPlaceholders(annotation.mode()), method);
    if (mode != null) {
      builder.mode(mode);
    }
    Duration lease = annotation.lease().isEmpty() ? defaults.getLease()
        : DurationStyle.detectAndParse(environment.resolveRequiredPlaceholders(annotation.lease()));
    if (lease != null) {
      builder.lease(lease);
    }
    if (defaults.getTransactionTimeout() != null) {
      builder.transactionTimeout(defaults.getTransactionTimeout());
    }
    if (defaults.getPollInterval() != null) {
      builder.pollInterval(defaults.getPollInterval());
    }
    if (defaults.getCloseTimeout() != null) {
      builder.closeTimeout(defaults.getCloseTimeout());
    }
    WakeupListener listener = wakeups.getIfAvailable();
    if (listener != null) {
      builder.wakeups(listener);
    }
    Subscriber subscriber = builder.start();
    log.info("msgqueue listener {} subscribed to \"{}\"", method.description(), queueName);
    return subscriber;
  }

  /** A mode as written in an annotation: its name, in any case, with - or _ between words. */
  private static ConsumeMode mode(String text, ListenerMethod method) {
    String name = text.trim().toUpperCase(java.util.Locale.ROOT).replace('-', '_');
    try {
      return ConsumeMode.valueOf(name);
    } catch (IllegalArgumentException e) {
      throw new IllegalStateException("@MsgQueueListener method " + method.description() + ": mode \"" + text
          + "\" is none of transaction, lease, at-most-once", e);
    }
  }

  private static int orZero(Integer value) {
    return value == null ? 0 : value;
  }

  @Override
  public synchronized void stop() {
    for (Subscriber subscriber : running) {
      subscriber.close();
    }
    running.clear();
  }

  @Override
  public synchronized boolean isRunning() {
    return !running.isEmpty();
  }

  /** The subscribers this registrar runs (for the health indicator and tests). */
  synchronized List<Subscriber> subscribers() {
    return List.copyOf(running);
  }

  private record ListenerMethod(Object bean, String beanName, Method method, MsgQueueListener annotation) {
    static ListenerMethod of(Object bean, String beanName, Method method, MsgQueueListener annotation) {
      Class<?>[] parameters = method.getParameterTypes();
      if (parameters.length != 1
          || !(parameters[0] == ClaimedMessage.class || parameters[0] == String.class)) {
        throw new IllegalStateException("@MsgQueueListener method " + beanName + "." + method.getName()
            + " must take one parameter, a ClaimedMessage or a String (the payload)");
      }
      Method invocable = AopUtils.selectInvocableMethod(method, bean.getClass());
      ReflectionUtils.makeAccessible(invocable);
      return new ListenerMethod(bean, beanName, invocable, annotation);
    }

    String description() {
      return beanName + "." + method.getName();
    }

    MessageHandler handler() {
      boolean takesPayload = method.getParameterTypes()[0] == String.class;
      return message -> {
        try {
          method.invoke(bean, takesPayload ? message.payload() : message);
        } catch (InvocationTargetException e) {
          Throwable cause = e.getCause();
          if (cause instanceof Exception exception) {
            throw exception;
          }
          throw (Error) cause;
        }
      };
    }
  }
}
