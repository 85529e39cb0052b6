package dev.msgqueue.example.orders;

import java.time.OffsetDateTime;

/** An order as {@code GET /orders/{id}} shows it; {@code shippedAt} is null until it is shipped. */
public record Order(long id, String item, int quantity, OrderStatus status, OffsetDateTime placedAt,
    OffsetDateTime shippedAt) {
}
