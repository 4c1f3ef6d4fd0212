//! Instance B: the real binary in its own process, on the database of the test's own app
//! (instance A) with the same key and public URL, as another instance behind a load balancer.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{ClientKind, McpClient, TestApp, binary, eventually, mcp_client_at};

/// Instance B: the real binary, in its own process, on A's database.
pub struct OtherInstance {
    pub process: Child,
    /// `http://127.0.0.1:PORT`
    pub address: String,
    _config_dir: tempfile::TempDir,
}

impl OtherInstance {
    /// Starts the binary as another instance of `first` (same database, key and public URL)
    /// and waits until it is ready.
    pub async fn start(first: &TestApp, toml: &str) -> Self {
        let config_dir = tempfile::tempdir().unwrap();
        let config_file = config_dir.path().join("broker.toml");
        std::fs::write(&config_file, toml).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let instance = first.instance();
        let process = Command::new(binary())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("OAUTH_BROKER_ENCRYPTION_KEY", secrecy::ExposeSecret::expose_secret(&instance.encryption_key))
            .env("OAUTH_BROKER_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .args(["serve", "--demo", "--listen", &format!("127.0.0.1:{port}"), "--public-url", &instance.public_url])
            .args(["--database-url", &instance.database_url, "--data-dir"])
            .arg(config_dir.path())
            .arg("--config")
            .arg(&config_file)
            .spawn()
            .unwrap();
        let address = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        eventually("instance B becomes ready", Duration::from_secs(30), || async {
            http.get(format!("{address}/readyz")).send().await.is_ok_and(|r| r.status() == 200)
        })
        .await;
        Self { process, address, _config_dir: config_dir }
    }

    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.address)
    }

    /// A real rmcp client of this instance, as `name` (a token A issued: keys are shared).
    pub async fn mcp_client(&self, first: &TestApp, name: &str, kind: ClientKind) -> McpClient {
        mcp_client_at(&self.mcp_url(), &first.token_for(name).await, kind).await.unwrap()
    }

    pub fn kill(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Drop for OtherInstance {
    fn drop(&mut self) {
        self.kill();
    }
}
