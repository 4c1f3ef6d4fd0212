//! The broker's own MCP face: its tools, prompts and resources, elicitation and round trips
//! in both protocol eras, sessions and their streams, driven by rmcp's client, the Python SDK's
//! and raw HTTP.

mod connection_status;
mod consent;
mod flow;
mod forms;
mod parking;
mod prompts;
mod protocol;
mod provider_request;
mod python_client;
mod resources;
mod revision_2026;
mod round_trip_consent_race;
mod round_trip_timings;
mod round_trips;
mod session_owner;
mod streams;
mod tool_arguments;
