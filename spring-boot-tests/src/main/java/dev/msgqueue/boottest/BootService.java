package dev.msgqueue.boottest;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * A service as a new user writes it: web, Actuator, Boot's Liquibase and msgqueue-spring-boot-starter, every msgqueue
 * bean from the starter. It publishes orders over HTTP inside {@code @Transactional} methods and ships them from a
 * {@code @MsgQueueListener}.
 */
@SpringBootApplication
public class BootService {
  /** The queue orders are published to and shipped from. */
  public static final String ORDERS = "boot-orders";
  /** The queue orders are fulfilled from, with the listener's writes in the transaction that holds each message. */
  public static final String FULFIL = "boot-fulfil";

  public static void main(String[] args) {
    SpringApplication.run(BootService.class, args);
  }
}
