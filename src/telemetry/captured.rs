//! Log lines captured in unit tests: what a piece of code logged while it ran, as text or as the
//! JSON lines `log_format = "json"` writes.

use std::sync::{Arc, Mutex};

/// A writer the tests read back.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// Runs `f` with this thread's log lines captured as text.
pub(crate) fn logs<T>(f: impl FnOnce() -> T) -> (T, String) {
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let value = tracing::subscriber::with_default(subscriber, f);
    (value, buffer.text())
}

/// Runs `f` with this thread's log lines captured as JSON lines.
pub(crate) fn json_logs<T>(f: impl FnOnce() -> T) -> (T, String) {
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt().json().with_writer(move || writer.clone()).finish();
    let value = tracing::subscriber::with_default(subscriber, f);
    (value, buffer.text())
}
