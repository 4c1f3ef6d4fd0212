//! A request refused before its body is read (no bearer token on `/mcp`, no such route) leaves
//! its keep-alive connection usable: the next request on it is answered.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::TestApp;
use crate::on_both_backends;

/// Writes `first` (with a body too big to arrive in one read) and then `second` on one
/// connection, and returns everything the server sent until it closed.
async fn two_requests_on_one_connection(app: &TestApp, first: &str, second: &str) -> String {
    let address = app.address.strip_prefix("http://").unwrap();
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let body = "x".repeat(256 * 1024);
    let first = format!("{first}Content-Length: {}\r\n\r\n{body}", body.len());
    let second = second.to_owned();
    // Written concurrently with reading: the server may answer before the body is all sent.
    let writing = tokio::spawn(async move {
        writer.write_all(first.as_bytes()).await?;
        writer.write_all(second.as_bytes()).await?;
        writer.flush().await?;
        Ok::<_, std::io::Error>(writer)
    });
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), reader.read_to_end(&mut received)).await;
    assert!(read.is_ok(), "the server closes after the second request (Connection: close)");
    let _ = writing.await;
    String::from_utf8_lossy(&received).into_owned()
}

async fn early_refusals_keep_the_connection_usable(app: &TestApp) {
    let host = app.address.strip_prefix("http://").unwrap();
    let second = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    for (first, status) in [
        // 401: no bearer token, body never read.
        (format!("POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"), "401"),
        // 404: no such route.
        (format!("POST /no-such-path HTTP/1.1\r\nHost: {host}\r\n"), "404"),
    ] {
        let received = two_requests_on_one_connection(app, &first, &second).await;
        assert!(received.starts_with(&format!("HTTP/1.1 {status}")), "{received}");
        let answers = received.matches("HTTP/1.1 ").count();
        assert_eq!(answers, 2, "the second request on the connection is answered: {received}");
        assert!(received.ends_with("ok"), "{received}");
    }
}
on_both_backends!(keep_alive, early_refusals_keep_the_connection_usable);
