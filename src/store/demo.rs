//! The demo provider's tables (see `crate::demo_provider`).
