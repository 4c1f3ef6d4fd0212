//! The token API for registered services and tool servers (`/v1/…`, the RFC 8693 exchange at
//! `/token`), with the example tool server as its client.

mod audit;
mod flow;
mod instances;
mod limits;
mod openapi_validator;
mod round_trips;
mod services;
