//! Running the broker: the binary and its admin CLI, health, metrics and logs, stopping,
//! upgrading and moving it, several instances, keys, the audit log, caches and database faults.

mod audit;
mod caches;
mod cli;
mod cluster;
mod database_timeouts;
mod faults;
mod health;
mod keys;
mod logs;
mod metrics;
mod moving;
mod shutdown;
mod upgrade;
mod upgrade_organizations;
