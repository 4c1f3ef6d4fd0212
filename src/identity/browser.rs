//! Browser sign-in sessions.
