package dev.msgqueue.example.orders;

/** The payload on the shipping queue: which order to ship. */
record ShippingMessage(long orderId) {
}
