//! Databases an earlier build made (`tests/fixtures/upgrade*/`), restored into a fresh database
//! of either backend, and the binary run on them as an operator runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::{Backend, EmptyDatabase, binary};

/// One fixture folder's database and `fixture.json`.
pub struct Fixture {
    pub facts: Value,
    pub dir: PathBuf,
}

impl Fixture {
    /// `tests/fixtures/FOLDER/BACKEND`.
    pub fn load(folder: &str, backend: Backend) -> Self {
        let backend = match backend {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        };
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(folder).join(backend);
        let facts = serde_json::from_str(&std::fs::read_to_string(dir.join("fixture.json")).unwrap()).unwrap();
        Self { facts, dir }
    }

    pub fn text(&self, key: &str) -> String {
        self.facts[key].as_str().unwrap_or_else(|| panic!("fixture.json has no {key}")).to_owned()
    }

    /// The old build's database, restored into a fresh one of this backend; `None` when
    /// PostgreSQL is not there (see `on_both_backends`).
    pub async fn restore(&self, backend: Backend) -> Option<EmptyDatabase> {
        let db = EmptyDatabase::create(backend).await?;
        match backend {
            Backend::Sqlite => {
                let path = db.url.strip_prefix("sqlite://").unwrap().split('?').next().unwrap();
                std::fs::copy(self.dir.join("broker.db"), path).unwrap();
            }
            Backend::Postgres => {
                let loaded = Command::new("psql")
                    .args(["-q", "-v", "ON_ERROR_STOP=1", "-f"])
                    .arg(self.dir.join("broker.sql"))
                    .arg(&db.url)
                    .output()
                    .expect("psql (PostgreSQL's client) loads the fixture");
                assert!(loaded.status.success(), "{}", String::from_utf8_lossy(&loaded.stderr));
            }
        }
        Some(db)
    }

    /// `oauth-broker ARGS` against `database_url` with the fixture's key and public URL, as an
    /// operator runs it; must succeed.
    pub fn operator(&self, database_url: &str, args: &[&str]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let output = Command::new(binary())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("OAUTH_BROKER_DATA_DIR", dir.path())
            .env("OAUTH_BROKER_DATABASE_URL", database_url)
            .env("OAUTH_BROKER_PUBLIC_URL", self.text("public_url"))
            .env("OAUTH_BROKER_ENCRYPTION_KEY", self.text("encryption_key"))
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{args:?}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
        stdout
    }
}
