//! End-to-end tests: the real server on a random port, a real database (SQLite and
//! PostgreSQL), rmcp's client, a cookie-keeping HTTP client as the browser, and the strict demo
//! provider as the third party.

mod db_proxy;
mod helpers;
mod quirky_provider;
mod strict_provider;

mod admin;
mod admin_paging;
mod api_keys;
mod audit;
mod authorization_server;
mod bearer;
mod browser;
mod caches;
mod cli;
mod cluster;
mod consent;
mod database_timeouts;
mod faults;
mod flow;
mod forms;
mod hardening;
mod health;
mod keys;
mod layers;
mod lifecycle;
mod logs;
mod metrics;
mod moving;
mod oidc;
mod pages;
mod parking;
mod prompts;
mod protocol;
mod provider_request;
mod providers;
mod python_client;
mod refresh;
mod refresh_backoff;
mod refresh_cluster;
mod refresh_faults;
mod resources;
mod review;
mod revision_2026;
mod round_trip_consent_race;
mod round_trip_timings;
mod round_trips;
mod security;
mod services;
mod shutdown;
mod streams;
mod token_api;
mod token_api_audit;
mod token_api_limits;
mod tool_server_mrtr;
