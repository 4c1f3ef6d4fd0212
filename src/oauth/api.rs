//! Calling a provider API with the user token.
