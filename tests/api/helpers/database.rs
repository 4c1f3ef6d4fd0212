//! Databases the tests make and drop: a fresh PostgreSQL database per test app, and an empty
//! database (nothing migrated) for the tests of the migrations themselves.

use super::Backend;

/// An empty database (nothing migrated), for tests of the migrations themselves.
#[allow(dead_code, reason = "used by the forms tests")]
pub struct EmptyDatabase {
    pub url: String,
    _dir: tempfile::TempDir,
    postgres: Option<PostgresDb>,
}

#[allow(dead_code, reason = "used by the forms tests")]
impl EmptyDatabase {
    /// `None` when PostgreSQL is unreachable (printing `SKIPPED postgres: …`, see `on_both_backends`).
    pub async fn create(backend: Backend) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        match backend {
            Backend::Sqlite => {
                let url = format!("sqlite://{}/empty.db?mode=rwc", dir.path().display());
                Some(Self { url, _dir: dir, postgres: None })
            }
            Backend::Postgres => {
                let db = PostgresDb::create().await?;
                Some(Self { url: db.url.clone(), _dir: dir, postgres: Some(db) })
            }
        }
    }

    pub async fn drop_now(mut self) {
        if let Some(db) = self.postgres.take() {
            db.drop_database().await;
        }
    }
}

/// A fresh PostgreSQL database per test, dropped at the end.
pub(super) struct PostgresDb {
    admin_url: String,
    name: String,
    pub(super) url: String,
}

impl PostgresDb {
    pub(super) async fn create() -> Option<Self> {
        use sqlx::Connection;
        let admin_url =
            std::env::var("TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let required = std::env::var("REQUIRE_POSTGRES").is_ok_and(|v| v == "1");
        let mut conn = match sqlx::PgConnection::connect(&admin_url).await {
            Ok(conn) => conn,
            Err(error) => {
                if required {
                    panic!("REQUIRE_POSTGRES=1 but PostgreSQL at {admin_url} is unreachable: {error}");
                }
                eprintln!("SKIPPED postgres: cannot connect to {admin_url}: {error}");
                return None;
            }
        };
        let name = format!("oauth_broker_test_{}", uuid::Uuid::new_v4().simple());
        sqlx::Executor::execute(&mut conn, format!("CREATE DATABASE {name}").as_str()).await.unwrap();
        let mut url = url::Url::parse(&admin_url).unwrap();
        url.set_path(&format!("/{name}"));
        Some(Self { admin_url, name, url: url.to_string() })
    }

    pub(super) async fn drop_database(self) {
        use sqlx::Connection;
        if let Ok(mut conn) = sqlx::PgConnection::connect(&self.admin_url).await {
            let _ = sqlx::Executor::execute(
                &mut conn,
                format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name).as_str(),
            )
            .await;
        }
    }
}
