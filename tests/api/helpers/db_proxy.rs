//! A TCP proxy between the broker and PostgreSQL that a test can cut (every connection closed,
//! new ones refused) or freeze (bytes stop flowing, sockets stay open, as when a network path
//! goes silent), and restore.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Forward,
    Cut,
    Freeze,
}

pub struct DbProxy {
    pub addr: SocketAddr,
    mode: watch::Sender<Mode>,
}

impl DbProxy {
    /// Proxies to `upstream` (host:port).
    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mode = watch::Sender::new(Mode::Forward);
        let modes = mode.subscribe();
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else { return };
                if *modes.borrow() == Mode::Cut {
                    drop(client);
                    continue;
                }
                let upstream = upstream.clone();
                let modes = modes.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(&upstream).await else { return };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::spawn(pump(client_read, server_write, modes.clone()));
                    tokio::spawn(pump(server_read, client_write, modes));
                });
            }
        });
        Self { addr, mode }
    }

    /// `url` (a PostgreSQL URL) pointed at this proxy.
    pub fn url_for(&self, url: &str) -> String {
        let mut parsed = url::Url::parse(url).unwrap();
        parsed.set_host(Some("127.0.0.1")).unwrap();
        parsed.set_port(Some(self.addr.port())).unwrap();
        parsed.to_string()
    }

    /// Spawn options that send an app's database connections through this proxy, with
    /// `toml` added to its config (e.g. a short `database_timeout`).
    pub fn spawn_options(&self, toml: &str) -> crate::helpers::SpawnOptions {
        let port = self.addr.port();
        crate::helpers::SpawnOptions {
            toml: toml.to_owned(),
            database_url: Some(Box::new(move |url: &str| {
                let mut target = url::Url::parse(url).unwrap();
                target.set_host(Some("127.0.0.1")).unwrap();
                target.set_port(Some(port)).unwrap();
                target.to_string()
            })),
            ..Default::default()
        }
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}

/// Copies `from` to `to` while forwarding; holds what it read while frozen; ends (closing its
/// halves) when cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            _ = mode.wait_for(|m| *m == Mode::Cut) => return,
        };
        match mode.wait_for(|m| *m != Mode::Freeze).await.map(|m| *m) {
            Ok(Mode::Forward) => {}
            _ => return,
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The PostgreSQL server tests use, as host:port.
pub fn postgres_upstream() -> String {
    let admin = std::env::var("TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let parsed = url::Url::parse(&admin).unwrap();
    format!("{}:{}", parsed.host_str().unwrap_or("127.0.0.1"), parsed.port().unwrap_or(5432))
}
