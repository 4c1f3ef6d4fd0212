//! Webhooks for services: every connection change delivered once, signed, in order, to a real
//! receiver, even when an instance dies mid-delivery.

mod crash;
mod deliveries;
mod refresh;
