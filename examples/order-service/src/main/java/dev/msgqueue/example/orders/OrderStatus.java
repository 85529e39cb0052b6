package dev.msgqueue.example.orders;

/** Where an order is: placed by {@code POST /orders}, shipped by the shipping listener. */
public enum OrderStatus {
  PLACED,
  SHIPPED
}
