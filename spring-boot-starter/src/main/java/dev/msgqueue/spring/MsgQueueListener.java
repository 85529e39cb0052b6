package dev.msgqueue.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a bean method as the handler of one queue: the starter runs a {@link dev.msgqueue.Subscriber} for it from
 * application start to shutdown. The method takes one parameter, a {@link dev.msgqueue.ClaimedMessage} or a
 * {@code String} (the payload's JSON text).
 *
 * <p>In the default mode, {@code transaction}, the method runs inside the transaction that holds its message, bound
 * to Spring's transaction synchronization for the application's {@code DataSource}: a {@code JdbcTemplate}, Boot's
 * jOOQ {@code DSLContext} and {@code @Transactional} methods it calls join that transaction. Returning commits their
 * writes together with the message's removal; throwing rolls them back and hands the message to the retry policy
 * (retried after a backoff, dead-lettered to {@code <queue>-dead-letters} after 5 deliveries). In {@code lease} mode
 * a throw redelivers the message after its lease; in {@code at-most-once} mode it is lost.
 *
 * <p>Attributes left at their defaults take the {@code msgqueue.subscriber.*} properties; {@code queue},
 * {@code mode} and {@code lease} accept {@code ${...}} placeholders.
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

  /**
   * How messages are delivered: {@code "transaction"}, {@code "lease"} or {@code "at-most-once"}
   * ({@link dev.msgqueue.ConsumeMode}); empty takes {@code msgqueue.subscriber.mode}, whose default is
   * {@code transaction}.
   */
  String mode() default "";

  /**
   * The lease (e.g. {@code "30s"}) of lease mode; empty takes {@code msgqueue.subscriber.lease}. Only with lease
   * mode.
   */
  String lease() default "";
}
