package dev.msgqueue.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a bean method as the handler of one queue: the starter runs a {@link dev.msgqueue.Subscriber} for it from
 * application start to shutdown. The method takes one parameter, a {@link dev.msgqueue.ClaimedMessage} or a
 * {@code String} (the payload's JSON text). Returning acks the message; throwing leaves it to the mode (lease mode:
 * redelivered; default mode: not redelivered).
 *
 * <p>Attributes left at their defaults take the {@code msgqueue.subscriber.*} properties; {@code queue} and
 * {@code lease} accept {@code ${...}} placeholders.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface MsgQueueListener {
  /** The queue's name. */
  String queue();

  /** Whether the queue is auto-deleted (reaped when idle) rather than durable. */
  boolean autoDeleted() default false;

  /** How many handlers run at once; 0 takes {@code msgqueue.subscriber.concurrency}. */
  int concurrency() default 0;

  /** The most messages one claim takes; 0 takes {@code msgqueue.subscriber.batch-size}. */
  int batchSize() default 0;

  /** The lease (e.g. {@code "30s"}) for lease mode; empty takes {@code msgqueue.subscriber.lease}. */
  String lease() default "";
}
