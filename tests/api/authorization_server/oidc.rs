//! `[identity] mode = "oidc"`: an OpenID Connect issuer served by the test itself (discovery,
//! a JWK set with RSA, EC and Ed25519 keys, an authorization endpoint that signs one fixed user
//! in and honours PKCE and the nonce, a token endpoint) and a broker pointed at it. Every token
//! rule is tried with a hand-made token, key rotation and its rate limit are watched through the
//! issuer's JWKS hit counter, and the browser sign-in runs end to end with its refusals.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::pkcs8::EncodePrivateKey;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use oauth_broker::App;
use oauth_broker::clock::{Clock, ManualClock};
use oauth_broker::config::{Config, SettingsArgs};
use oauth_broker::state::AppState;
use secrecy::SecretString;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::helpers::{Backend, EmptyDatabase, hidden_field, location, urlencode};

const CLIENT_ID: &str = "broker-client";
const CLIENT_SECRET: &str = "broker-secret";
/// The user the test issuer signs in.
const SUBJECT: &str = "user-42";
/// Required of every /mcp token by the broker under test.
const SCOPE: &str = "mcp:use";

// Test-only keys (generated for these tests; they protect nothing).
const RSA1_PRIVATE: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQDjmMQNzXxSNlzQ\n\
U7yQ8LWyMZJtAYMVF42IqBLgFI2YdjN/MEtXsm8IHlfsIUbbbh39ji0LXrS7dwG2\n\
ygVavRls5kLhYfLqqT5/vkXphW475HYamgLH5x/hgj0GcF2nC2D20te2mtMfOhCR\n\
VovYhA/9xs1+hpyBflclEVd4uwq1d57FF9XzyY2R8LhrgKBg4ZwglfJdYZDQGD5P\n\
qBN8PpZQCX5Hd9y30Z/XWYIA+nALJnYWrG1oXtU30QWFB8TBBcd7uFzdwBBAb6Pb\n\
kxydoKlbJzdHKGS9lKFRZ6sggsAU/xDs7eOx6bf6u79fgQd0ODipTnQVdTu5ZuJo\n\
wmaBibG1AgMBAAECggEAANh69gAq85U/IAkHnNRAIJLdk+kbBxOI05aoR0vcQNJD\n\
m7fet8sybWnLctWm0T7l/qCuGyo1arLk/zxd67njI8vxOKwn/mY1lLzsvpLf13og\n\
VDX5R6vcqvZUarc1Kd85c4FSCtwlZ6rMD/Yt29aVxqAb+Fngr/x7r2gSlqC/R/BR\n\
i7Zz/eacvz5QoUKLMmiZYbw1kvU4fWj7sQAPEwLxUUU1IticcmY9lVluZK78IOJF\n\
rcLI57LStHtdniYSDSddcOqmNZEfiHbLoSQJsxEjcwC1VnAyv12kuyLtACsRQlFA\n\
sDd9CBEjQ31npSy1qUnD6Lvt2Aiui5xmYfXS6164GwKBgQD6NwbNiBHNTNppoAuH\n\
aY9h/VBBesjkjto36x2D8Q1khWhaV9S2OUuM5y6oLQTlVk4NlZAVnZ+XOe5uogpw\n\
1ko6kTQX/CUjqgUMRQNlbYQ6pFz4P8pFRpR9jGjQ79adxeAg1KmwnYHEtryckqXG\n\
2OKRqTENUZVOhc344ynVnUCy+wKBgQDo293UAfL++dn9PNGpDI/zWMtpN/hmNCEB\n\
rd8dZmCvM7ySy6HKfc0Oo2eSvgJbAjkQruHRw6xrZ3hMwJ+MdAULTkxqgIhrtRXc\n\
hINEe3OtHrTckyhPO7b4XtnpVexXhcclOCVzJybyFIJpJ/MUc/ybb7n342NCk9oa\n\
B76KYT+PDwKBgB77f1El3yZvtL/NfH/49zMn/a8N+CAs/CJeb5ot1/2xczl0lLc3\n\
ov5Ahgt2/5syM5oFAgFbMi60kqyKTgao0iosXqn1o9elrthVF1WQ2QW14nku1On9\n\
Elf1ceklOYrxvI30J0riRfZItlQg6HwV0QA+Vf+TMYy2jsmZv01fGmrPAoGBAOGz\n\
CmXNpduiDLo50vXJqVUzAaXwjCFz8XIRNyrl6lynBuY53Y3JNZI0q9U9uka/9tPG\n\
zjZlNJ+94Ip0QbD/W0xEDilEf/X1xUTCZAFirxJjquYI9I8n0AcY2JojoDqM/iOD\n\
MjlU/5iwbF7ETAXNDlESj+xHSBRl/oYwb2ztKY/dAoGBAKw/m47O0CsqrjKBW8ni\n\
eD0HlqTwKtsfnGruY6JzEr0WnV2f4T7jGvi+9K61Pgdof9H5vRZ+zJAHDODlthkd\n\
BKcMRlLJxF/OCZzrTLr9jDxJulM++qa0AjE6YH1KluZ1Tv2CJPlGH0hlPmvL283p\n\
IudxBDIF9/oTiVxvmIquz/py\n\
-----END PRIVATE KEY-----\n";
const RSA1_PUBLIC: &str = "\
-----BEGIN PUBLIC KEY-----\n\
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA45jEDc18UjZc0FO8kPC1\n\
sjGSbQGDFReNiKgS4BSNmHYzfzBLV7JvCB5X7CFG224d/Y4tC160u3cBtsoFWr0Z\n\
bOZC4WHy6qk+f75F6YVuO+R2GpoCx+cf4YI9BnBdpwtg9tLXtprTHzoQkVaL2IQP\n\
/cbNfoacgX5XJRFXeLsKtXeexRfV88mNkfC4a4CgYOGcIJXyXWGQ0Bg+T6gTfD6W\n\
UAl+R3fct9Gf11mCAPpwCyZ2FqxtaF7VN9EFhQfEwQXHe7hc3cAQQG+j25McnaCp\n\
Wyc3RyhkvZShUWerIILAFP8Q7O3jsem3+ru/X4EHdDg4qU50FXU7uWbiaMJmgYmx\n\
tQIDAQAB\n\
-----END PUBLIC KEY-----\n";
const RSA2_PRIVATE: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQCzPTloPjt99eg2\n\
yB99KWiNkvchRppU95LB9obYcBy4i6M8h2dJpioJ1T+FF2+rawuLavGZvFktxeag\n\
7h58o87KLlSs9X1DTri88LWL9Yx5RyYyEvBMg17cTo1QCGx5az0d2ksyBy+YFKAU\n\
1WwovD6aJefqFOn5SbXspBnJmqHvQ/7fi0Z9q6a3z0NfiOiRA4NM3kSJUp/KoFyZ\n\
ch/yM9OXI3fYZCf4R1d7F9ydcbKJEFJOD1NgQ8P57vAT5tVLGxrzUZlMZ3a6pZTw\n\
Vu9/CQBxpNgB4ga4GJ0JHUmgZzb+BkzGsGtZZIYMX24NV30yEPlemt/+eR+sb0KV\n\
fjqUwNMPAgMBAAECggEACYjEF3slkspnkXzTgMbMAXZKWZ8V6yQgm3TmI/g4U7BV\n\
1nMenhvN8g6OXbseUEBJWAXjZFNqn2H+2Ruhf1OYieFG1TM/xQdLq2Ojr8mEsRgF\n\
FgMAFknWQqJip1mzXEGrxn0/Cu7rHxjykcXvUwfKzeW4FuSi54UX8MajFCBhS2CI\n\
2W3GIZ25FFMbO7HdArH14V0cJj9PNpOhgdjNpVZMKkbJqf3ILF9OByxggkx1wG6S\n\
cM1gZK9gTPaY8ICOq3k1ISQVcENVOkTqQROs2IW10jvTsCTA4W0496vTzxSAgnsm\n\
KqKILcwBXrBTsa9k7qY0OZwQkFd1MwtnnXy52ypI+QKBgQDfWWF+qANsH+TvDq+3\n\
+YMlZZ7++zVCyg5z0RHtHUGkHHY1aYNfFAkLdPTBhTvH//ZEDt5KcdW0/KT1PWOc\n\
GCGymFjQBsy2ZTSmWc3LVQfLTf9tRo8+ZrVOkml+cSM1N8L5InpYRivfuStHWkwK\n\
8sRj+JX0j8FLnJ9vLK3JRMSadwKBgQDNcRI0JrXMxqZtda7zLJrfAbiTwjgxGqaR\n\
TyY62vFEclhurc7cqdtwfj8IxkKO0QOyZZi1xQW+80Pr2ZjaGWQuYfJ3CznmNCoy\n\
un6Sh2qoBFZmWZB3N+QntJYAteKNgcJMf1jjiA6F1Kd++V+wZiaTZmyCIIBcOy6S\n\
7z2KhAwaKQKBgQCAgUGqCOsnK9ahgNazSHkfbC+lz01epzjXhCQHRDz/Omz84D94\n\
1eM6V0l3irvRn8DGebOGK6bk4jPa8j48klnZEvSOhEsGaoZ3a9YPNlYssCzVZ7KF\n\
Gb0Zfv35hQjX1sR0aVTxMzaNG1H+VMLJzdIXHvDQbGGvqmbFJXS8B7gCkwKBgAdE\n\
+/7qa75uPQ9cfa9PIb/IYM6hrblXFxPHODQW8TiZzzVDYzF9tS0a2oIl+c7x6G6U\n\
l72+1gA2vW2ICpeVFG1ru9eohwj1SZT38mie8BA37xK6EpmVWbZp9nDZ/sVBFS39\n\
x5hthQ4JQ1AD5PXp9215z1cfbUtWMMS0QHo5R/BZAoGBAJ02QBOAiShTa1ZN2ARU\n\
/eHCHHgnnb5HUt4ONY2/FDXdpZ+Tpboc+hijB2kAj+FmxBNIDIKVOfCI+uDVNWjS\n\
9t3TsYoBlg7VnQbIKEvY/RXnn85/4f8WobENkSdXnUCa/pf+yhCfALlxPFFbnYL0\n\
nrPDR/i+cOcZsNNImRUJ1EG5\n\
-----END PRIVATE KEY-----\n";
const EC1_PRIVATE: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgTqM1m2zr/iB5706Z\n\
bUdU9uBvugZ5UAKgiaHQonMXbd+hRANCAARO8ZiQjASd7eoEvRC2GZ7CVM64J6c5\n\
Pa0pFIXC6OqWcWQj90zpsUd4ca7YyVyRAbXltrgr5mufC4PzfS6LMJNF\n\
-----END PRIVATE KEY-----\n";

// ---------------------------------------------------------------------------------------------
// The test issuer.

/// Deviations the next sign-in's issuer makes, to try the broker's checks.
#[derive(Debug, Default, Clone)]
struct Tweak {
    /// The ID token's `nonce` instead of the one the broker sent.
    nonce: Option<String>,
    /// The ID token's `aud` instead of our client id.
    aud: Option<Value>,
    /// The `iss` parameter of the authorization response instead of the issuer.
    iss_param: Option<String>,
    /// The ID token's `groups` claim (none without it).
    groups: Option<Value>,
}

struct PendingCode {
    redirect_uri: String,
    challenge: String,
    nonce: String,
}

struct Issuer {
    /// `http://127.0.0.1:PORT`, exactly the `iss` of its tokens.
    url: String,
    /// The broker's callback, which the issuer insists on exactly.
    redirect_uri: String,
    clock: ManualClock,
    /// The published JWK set.
    keys: Mutex<Vec<Value>>,
    jwks_hits: AtomicUsize,
    codes: Mutex<HashMap<String, PendingCode>>,
    tweak: Mutex<Tweak>,
}

type Shared = Arc<Issuer>;

impl Issuer {
    fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(self.clone())
    }

    fn jwks_hits(&self) -> usize {
        self.jwks_hits.load(Ordering::SeqCst)
    }

    fn publish(&self, jwk: Value) {
        self.keys.lock().unwrap().push(jwk);
    }
}

async fn discovery(State(issuer): State<Shared>) -> Json<Value> {
    Json(json!({
        "issuer": issuer.url,
        "jwks_uri": format!("{}/jwks", issuer.url),
        "authorization_endpoint": format!("{}/authorize", issuer.url),
        "token_endpoint": format!("{}/token", issuer.url),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256", "PS256", "ES256", "EdDSA"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
    }))
}

async fn jwks(State(issuer): State<Shared>) -> Json<Value> {
    issuer.jwks_hits.fetch_add(1, Ordering::SeqCst);
    Json(json!({ "keys": *issuer.keys.lock().unwrap() }))
}

/// Auto-approves [`SUBJECT`] after checking the request the broker built.
async fn authorize(State(issuer): State<Shared>, Query(q): Query<HashMap<String, String>>) -> Response {
    let param = |name: &str| q.get(name).cloned().unwrap_or_default();
    let scopes: Vec<String> = param("scope").split(' ').map(str::to_owned).collect();
    let well_formed = param("response_type") == "code"
        && param("client_id") == CLIENT_ID
        && param("redirect_uri") == issuer.redirect_uri
        && ["openid", "profile", "email"].iter().all(|s| scopes.iter().any(|g| g == s))
        && param("code_challenge_method") == "S256"
        && param("code_challenge").len() == 43
        && param("nonce").len() >= 32
        && param("state").len() >= 32;
    if !well_formed {
        return (StatusCode::BAD_REQUEST, format!("bad authorization request: {q:?}")).into_response();
    }
    let code = uuid::Uuid::new_v4().to_string();
    let pending =
        PendingCode { redirect_uri: param("redirect_uri"), challenge: param("code_challenge"), nonce: param("nonce") };
    issuer.codes.lock().unwrap().insert(code.clone(), pending);
    let iss = issuer.tweak.lock().unwrap().iss_param.clone().unwrap_or_else(|| issuer.url.clone());
    let target = format!(
        "{}?code={}&state={}&iss={}",
        param("redirect_uri"),
        urlencode(&code),
        urlencode(&param("state")),
        urlencode(&iss)
    );
    (StatusCode::FOUND, [("location", target)]).into_response()
}

/// Client authentication (Basic), single-use codes, exact redirect URI, PKCE S256; answers with an
/// RS256 ID token carrying the nonce.
async fn token(
    State(issuer): State<Shared>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let refuse = |error: &str| (StatusCode::BAD_REQUEST, Json(json!({"error": error}))).into_response();
    let expected = format!("Basic {}", STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}")));
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": "invalid_client"}))).into_response();
    }
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    if field("grant_type") != "authorization_code" {
        return refuse("unsupported_grant_type");
    }
    let Some(pending) = issuer.codes.lock().unwrap().remove(&field("code")) else { return refuse("invalid_grant") };
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(field("code_verifier").as_bytes()));
    if field("redirect_uri") != pending.redirect_uri || challenge != pending.challenge {
        return refuse("invalid_grant");
    }
    let tweak = issuer.tweak.lock().unwrap().clone();
    let now = issuer.clock.now();
    let mut claims = json!({
        "iss": issuer.url,
        "sub": SUBJECT,
        "aud": tweak.aud.unwrap_or_else(|| json!(CLIENT_ID)),
        "exp": now + 300,
        "iat": now,
        "nonce": tweak.nonce.unwrap_or(pending.nonce),
        "name": "Test User",
    });
    if let Some(groups) = tweak.groups {
        claims["groups"] = groups;
    }
    let id_token = sign(Algorithm::RS256, Some("rsa-1"), &rsa1(), &claims);
    Json(
        json!({"access_token": "opaque-access-token", "token_type": "Bearer", "expires_in": 300, "id_token": id_token}),
    )
    .into_response()
}

// ---------------------------------------------------------------------------------------------
// Keys and hand-made tokens.

fn rsa1() -> EncodingKey {
    EncodingKey::from_rsa_pem(RSA1_PRIVATE.as_bytes()).unwrap()
}

fn rsa2() -> EncodingKey {
    EncodingKey::from_rsa_pem(RSA2_PRIVATE.as_bytes()).unwrap()
}

fn ec1() -> EncodingKey {
    EncodingKey::from_ec_pem(EC1_PRIVATE.as_bytes()).unwrap()
}

fn ed_signing() -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[9u8; 32])
}

fn ed1() -> EncodingKey {
    EncodingKey::from_ed_der(ed_signing().to_pkcs8_der().unwrap().as_bytes())
}

/// The public JWK of `key` under `kid`; with `pin_alg` the JWK also names its algorithm.
fn public_jwk(key: &EncodingKey, alg: Algorithm, kid: &str, pin_alg: bool) -> Value {
    let mut jwk = serde_json::to_value(Jwk::from_encoding_key(key, alg).unwrap()).unwrap();
    jwk["kid"] = json!(kid);
    jwk["use"] = json!("sig");
    if !pin_alg {
        jwk.as_object_mut().unwrap().remove("alg");
    }
    jwk
}

fn ed1_jwk() -> Value {
    let x = URL_SAFE_NO_PAD.encode(ed_signing().verifying_key().to_bytes());
    json!({"kty": "OKP", "crv": "Ed25519", "kid": "ed-1", "use": "sig", "x": x})
}

fn sign(alg: Algorithm, kid: Option<&str>, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

/// A JWS with an arbitrary header and an empty signature (for `alg: none`).
fn unsigned(header: Value, claims: &Value) -> String {
    format!("{}.{}.", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()))
}

// ---------------------------------------------------------------------------------------------
// The broker under test.

struct Setup {
    issuer: Arc<Issuer>,
    /// `http://127.0.0.1:PORT` of the broker.
    address: String,
    state: AppState,
    clock: ManualClock,
    shutdown: Vec<tokio::sync::oneshot::Sender<()>>,
    _data_dir: tempfile::TempDir,
    database: Option<EmptyDatabase>,
}

/// An issuer publishing `rsa-1` (no `alg`, so RS256 and PS256), `ec-1` (ES256) and `ed-1`
/// (EdDSA), and a broker (SQLite) in oidc mode requiring scope [`SCOPE`]. With `reachable`
/// false the broker is pointed at a closed port instead.
async fn spawn_with(reachable: bool) -> Setup {
    spawn_full(reachable, None).await
}

/// The OIDC set-up on `backend`; `None` when PostgreSQL is unreachable (and not required).
async fn spawn_on(backend: Backend) -> Option<Setup> {
    let database = EmptyDatabase::create(backend).await?;
    Some(spawn_full(true, Some(database)).await)
}

async fn spawn_full(reachable: bool, database: Option<EmptyDatabase>) -> Setup {
    let clock = ManualClock::starting_now();
    let broker_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", broker_listener.local_addr().unwrap());
    let issuer_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer_url = format!("http://{}", issuer_listener.local_addr().unwrap());
    let issuer = Arc::new(Issuer {
        url: issuer_url.clone(),
        redirect_uri: format!("{address}/login/oidc/callback"),
        clock: clock.clone(),
        keys: Mutex::new(vec![
            public_jwk(&rsa1(), Algorithm::RS256, "rsa-1", false),
            public_jwk(&ec1(), Algorithm::ES256, "ec-1", true),
            ed1_jwk(),
        ]),
        jwks_hits: AtomicUsize::new(0),
        codes: Mutex::new(HashMap::new()),
        tweak: Mutex::new(Tweak::default()),
    });
    let mut shutdown = Vec::new();
    let configured_issuer = if reachable {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let router = issuer.router();
        tokio::spawn(async move {
            axum::serve(issuer_listener, router)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await
        });
        shutdown.push(tx);
        issuer_url
    } else {
        drop(issuer_listener);
        issuer_url
    };
    let data_dir = tempfile::tempdir().unwrap();
    let args = SettingsArgs {
        listen: Some(broker_listener.local_addr().unwrap()),
        public_url: Some(address.parse().unwrap()),
        database_url: Some(match &database {
            Some(database) => database.url.clone(),
            None => format!("sqlite://{}/broker.db?mode=rwc", data_dir.path().display()),
        }),
        data_dir: Some(data_dir.path().to_path_buf()),
        demo: false,
        config: None,
        ..Default::default()
    };
    let toml = format!(
        "[identity]\nmode = \"oidc\"\nissuer = \"{configured_issuer}\"\nclient_id = \"{CLIENT_ID}\"\n\
         client_secret = \"{CLIENT_SECRET}\"\nadmin_claim = \"groups\"\nadmin_value = \"broker-admins\"\nrequired_scopes = [\"{SCOPE}\"]\nscopes_supported = [\"{SCOPE}\", \"openid\"]\n\
         [providers.files]\ndisplay_name = \"Files\"\nauthorization_url = \"https://files.example/authorize\"\n\
         token_url = \"https://files.example/token\"\nclient_id = \"broker\"\nclient_secret = \"s\"\n\
         scopes = [\"read\"]\napi_base_url = \"https://api.files.example\"\n"
    );
    let mut config = Config::from_toml(&args, &toml).unwrap();
    config.encryption_key = Some(SecretString::from(oauth_broker::crypto::Sealer::generate_key()));
    let app = App::build(config, Arc::new(clock.clone())).await.unwrap();
    let state = app.state().clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(app.run(broker_listener, async move {
        let _ = rx.await;
    }));
    shutdown.push(tx);
    Setup { issuer, address, state, clock, shutdown, _data_dir: data_dir, database }
}

async fn spawn() -> Setup {
    spawn_with(true).await
}

impl Setup {
    async fn stop(self) {
        for tx in self.shutdown {
            let _ = tx.send(());
        }
        self.state.core.store.close().await;
        if let Some(database) = self.database {
            database.drop_now().await;
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    fn mcp_url(&self) -> String {
        self.url("/mcp")
    }

    fn now(&self) -> i64 {
        self.clock.now()
    }

    /// Claims the broker accepts; tests break one at a time.
    fn claims(&self) -> Value {
        let now = self.now();
        json!({
            "iss": self.issuer.url, "sub": SUBJECT, "aud": self.mcp_url(),
            "exp": now + 600, "iat": now, "scope": format!("openid {SCOPE}"),
        })
    }

    fn claims_with(&self, changes: Value) -> Value {
        let mut claims = self.claims();
        for (name, value) in changes.as_object().unwrap() {
            if value.is_null() {
                claims.as_object_mut().unwrap().remove(name);
            } else {
                claims[name] = value.clone();
            }
        }
        claims
    }

    /// A genuine RS256 token from the issuer's `rsa-1` key.
    fn token(&self, claims: &Value) -> String {
        sign(Algorithm::RS256, Some("rsa-1"), &rsa1(), claims)
    }

    async fn post_mcp(&self, token: &str) -> reqwest::Response {
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
        http()
            .post(self.mcp_url())
            .header("accept", "application/json, text/event-stream")
            .bearer_auth(token)
            .json(&initialize)
            .send()
            .await
            .unwrap()
    }

    async fn users_of_the_issuer(&self) -> Vec<oauth_broker::store::users::User> {
        let users = self.state.core.store.users().list().await.unwrap();
        users.into_iter().filter(|u| u.issuer == self.issuer.url).collect()
    }

    /// `GET /login?next=…` → `/login/oidc` → the issuer's authorization URL; returns it and the
    /// login cookie the broker set.
    async fn start_sign_in(&self, browser: &reqwest::Client, next: &str) -> (String, String) {
        let login = browser.get(self.url(&format!("/login?next={}", urlencode(next)))).send().await.unwrap();
        assert_eq!(login.status(), 303, "the local form is not offered in oidc mode");
        let oidc_path = location(&login);
        assert!(oidc_path.starts_with("/login/oidc?next="), "{oidc_path}");
        let start = browser.get(self.url(&oidc_path)).send().await.unwrap();
        assert_eq!(start.status(), 303);
        let cookie = start
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .find(|c| c.starts_with("oauth_broker_oidc_login="))
            .expect("a login cookie");
        (location(&start), cookie.split(';').next().unwrap().to_owned())
    }

    /// Lets the issuer approve; returns the callback URL it redirects to.
    async fn approve_at_issuer(&self, browser: &reqwest::Client, authorize_url: &str) -> String {
        let answer = browser.get(authorize_url).send().await.unwrap();
        assert_eq!(answer.status(), 302, "{}", answer.text().await.unwrap());
        let callback = location(&answer);
        assert!(callback.starts_with(&self.url("/login/oidc/callback?")), "{callback}");
        callback
    }

    /// Who the home page says is signed in in `browser`, if anyone.
    async fn signed_in_as(&self, browser: &reqwest::Client) -> Option<String> {
        let html = browser.get(self.url("/")).send().await.unwrap().text().await.unwrap();
        let rest = html.split("Signed in as <strong>").nth(1)?;
        Some(rest.split("</strong>").next()?.to_owned())
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

fn challenge(response: &reqwest::Response) -> String {
    response.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default()
}

async fn assert_invalid_token(setup: &Setup, what: &str, token: &str) {
    let response = setup.post_mcp(token).await;
    assert_eq!(response.status(), 401, "{what} must be refused");
    let challenge = challenge(&response);
    assert!(challenge.starts_with("Bearer error=\"invalid_token\""), "{what}: {challenge}");
    let metadata = setup.url("/.well-known/oauth-protected-resource/mcp");
    assert!(challenge.contains(&format!("resource_metadata=\"{metadata}\"")), "{what}: {challenge}");
    // SEP-835: the challenge names the scopes to ask for.
    assert!(challenge.contains(&format!("scope=\"{SCOPE}\"")), "{what}: {challenge}");
}

// ---------------------------------------------------------------------------------------------
// Bearer tokens on /mcp.

#[tokio::test]
async fn the_protected_resource_metadata_names_the_issuer_and_the_scopes() {
    let setup = spawn().await;
    for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"] {
        let metadata: Value = http().get(setup.url(path)).send().await.unwrap().json().await.unwrap();
        assert_eq!(metadata["resource"], setup.mcp_url(), "RFC 9728 §3.3: exactly the MCP endpoint");
        assert_eq!(metadata["authorization_servers"], json!([setup.issuer.url]), "the issuer, as it spells itself");
        assert_eq!(metadata["scopes_supported"], json!([SCOPE, "openid"]));
    }
    setup.stop().await;
}

#[tokio::test]
async fn tokens_signed_by_each_published_key_get_in_and_their_user_is_created_once() {
    let setup = spawn().await;
    assert!(setup.users_of_the_issuer().await.is_empty());
    let claims = setup.claims();
    for (what, token) in [
        ("RS256", sign(Algorithm::RS256, Some("rsa-1"), &rsa1(), &claims)),
        ("PS256 on the same RSA key", sign(Algorithm::PS256, Some("rsa-1"), &rsa1(), &claims)),
        ("ES256", sign(Algorithm::ES256, Some("ec-1"), &ec1(), &claims)),
        ("EdDSA", sign(Algorithm::EdDSA, Some("ed-1"), &ed1(), &claims)),
    ] {
        assert_eq!(setup.post_mcp(&token).await.status(), 200, "{what}");
    }
    let users = setup.users_of_the_issuer().await;
    assert_eq!(users.len(), 1, "one user per (iss, sub), created on first sight");
    assert_eq!(users[0].subject, SUBJECT);
    assert_eq!(users[0].username, None, "an external user never takes a local username");
    let orgs = setup.state.core.store.organizations().of_user(&users[0].id).await.unwrap();
    let orgs: Vec<_> = orgs.iter().map(|(org, role)| (org.slug.as_str(), role.as_str())).collect();
    assert_eq!(orgs, [("default", "member")], "the deployment's issuer vouches for the default organization's people");
    setup.stop().await;
}

#[tokio::test]
async fn forged_tokens_are_refused_with_invalid_token() {
    let setup = spawn().await;
    let claims = setup.claims();
    let mut hs_header = Header::new(Algorithm::HS256);
    hs_header.kid = Some("rsa-1".into());
    let hs_with_public_key =
        jsonwebtoken::encode(&hs_header, &claims, &EncodingKey::from_secret(RSA1_PUBLIC.as_bytes())).unwrap();
    let n = public_jwk(&rsa1(), Algorithm::RS256, "x", false)["n"].as_str().unwrap().to_owned();
    let hs_with_modulus =
        jsonwebtoken::encode(&hs_header, &claims, &EncodingKey::from_secret(&URL_SAFE_NO_PAD.decode(n).unwrap()))
            .unwrap();
    let cases = [
        ("another key under the issuer's kid", sign(Algorithm::RS256, Some("rsa-1"), &rsa2(), &claims)),
        ("alg none", unsigned(json!({"alg": "none", "typ": "JWT", "kid": "rsa-1"}), &claims)),
        ("alg none without kid", unsigned(json!({"alg": "none"}), &claims)),
        ("HS256 keyed with the RSA public key PEM", hs_with_public_key),
        ("HS256 keyed with the RSA modulus", hs_with_modulus),
        ("ES256 header naming the RSA key", sign(Algorithm::ES256, Some("rsa-1"), &ec1(), &claims)),
        ("RS256 header naming the EC key", sign(Algorithm::RS256, Some("ec-1"), &rsa1(), &claims)),
        ("EdDSA header naming the RSA key", sign(Algorithm::EdDSA, Some("rsa-1"), &ed1(), &claims)),
        ("PS256 header naming the EC key", sign(Algorithm::PS256, Some("ec-1"), &rsa1(), &claims)),
        ("RS384, valid but not on the allow-list", sign(Algorithm::RS384, Some("rsa-1"), &rsa1(), &claims)),
        ("no kid while the issuer has several keys", sign(Algorithm::RS256, None, &rsa1(), &claims)),
        ("a tampered payload", {
            let token = setup.token(&claims);
            let parts: Vec<&str> = token.split('.').collect();
            let forged = URL_SAFE_NO_PAD.encode(setup.claims_with(json!({"sub": "admin"})).to_string());
            format!("{}.{forged}.{}", parts[0], parts[2])
        }),
        ("garbage", "not-a-jwt".to_owned()),
    ];
    for (what, token) in cases {
        assert_invalid_token(&setup, what, &token).await;
    }
    assert!(setup.users_of_the_issuer().await.is_empty(), "no forged token created a user");
    setup.stop().await;
}

#[tokio::test]
async fn tokens_with_a_wrong_claim_are_refused_with_invalid_token() {
    let setup = spawn().await;
    let now = setup.now();
    let issuer = setup.issuer.url.clone();
    let cases = [
        ("another issuer", json!({"iss": "http://127.0.0.1:1"})),
        ("the issuer with a trailing slash", json!({"iss": format!("{issuer}/")})),
        ("issuer as an array", json!({"iss": [issuer]})),
        ("no issuer", json!({"iss": null})),
        ("another audience", json!({"aud": "https://other.example/mcp"})),
        ("our URL with a trailing slash", json!({"aud": setup.url("/mcp/")})),
        ("audiences without us", json!({"aud": ["a", "b"]})),
        ("the client id as audience", json!({"aud": CLIENT_ID})),
        ("no audience", json!({"aud": null})),
        ("expired beyond the 60 s leeway", json!({"exp": now - 61})),
        ("expired an hour ago", json!({"exp": now - 3600})),
        ("no expiry", json!({"exp": null})),
        ("not valid for another two minutes", json!({"nbf": now + 120})),
        ("issued in the future", json!({"iat": now + 300})),
        ("no subject", json!({"sub": null})),
        ("an empty subject", json!({"sub": ""})),
        ("a subject longer than 255 bytes", json!({"sub": "x".repeat(256)})),
    ];
    for (what, changes) in cases {
        let token = setup.token(&setup.claims_with(changes));
        assert_invalid_token(&setup, what, &token).await;
    }
    setup.stop().await;
}

#[tokio::test]
async fn clock_skew_within_the_leeway_and_audience_arrays_naming_us_are_accepted() {
    let setup = spawn().await;
    let now = setup.now();
    let cases = [
        ("expired 30 s ago, inside the 60 s leeway", json!({"exp": now - 30})),
        ("valid from 30 s from now, inside the leeway", json!({"nbf": now + 30})),
        ("issued 30 s in the future, inside the leeway", json!({"iat": now + 30})),
        ("an audience array that names us", json!({"aud": ["https://other.example", setup.mcp_url()]})),
        ("scopes in an scp array", json!({"scope": null, "scp": ["openid", SCOPE]})),
        ("a fractional expiry", json!({"exp": (now + 600) as f64 + 0.5})),
    ];
    for (what, changes) in cases {
        let response = setup.post_mcp(&setup.token(&setup.claims_with(changes))).await;
        assert_eq!(response.status(), 200, "{what}");
    }
    setup.stop().await;
}

#[tokio::test]
async fn a_token_without_the_required_scope_gets_403_insufficient_scope() {
    let setup = spawn().await;
    let metadata = setup.url("/.well-known/oauth-protected-resource/mcp");
    let anonymous = http().post(setup.mcp_url()).json(&json!({})).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(challenge(&anonymous), format!("Bearer resource_metadata=\"{metadata}\", scope=\"{SCOPE}\""));
    for (what, changes, scope) in [
        ("other scopes", json!({"scope": "openid profile"}), format!("{SCOPE} openid profile")),
        ("no scope claim", json!({"scope": null}), SCOPE.to_owned()),
        ("a prefix of the scope", json!({"scope": "mcp"}), format!("{SCOPE} mcp")),
    ] {
        let response = setup.post_mcp(&setup.token(&setup.claims_with(changes))).await;
        assert_eq!(response.status(), 403, "{what}");
        let challenge = challenge(&response);
        assert!(challenge.starts_with("Bearer error=\"insufficient_scope\""), "{what}: {challenge}");
        assert!(challenge.contains(&format!("scope=\"{scope}\"")), "{what}: {challenge}");
        assert!(challenge.contains(&format!("resource_metadata=\"{metadata}\"")), "{what}: {challenge}");
    }
    setup.stop().await;
}

#[tokio::test]
async fn an_unknown_kid_triggers_one_rate_limited_refresh_and_a_rotated_key_is_then_accepted() {
    let setup = spawn().await;
    let at_start = setup.issuer.jwks_hits();
    assert_eq!(at_start, 1, "keys are fetched once at start-up");
    // Signed by the issuer's next key, which it does not publish yet.
    let rotated = sign(Algorithm::RS256, Some("rsa-2"), &rsa2(), &setup.claims());

    // Within 30 s of the start-up fetch: no refresh, refused.
    assert_invalid_token(&setup, "an unknown kid right after start-up", &rotated).await;
    assert_eq!(setup.issuer.jwks_hits(), at_start, "the refresh is rate-limited");

    // Later, an unknown kid causes exactly one refresh, then a refusal…
    setup.clock.advance(31);
    assert_invalid_token(&setup, "an unknown kid", &rotated).await;
    assert_eq!(setup.issuer.jwks_hits(), at_start + 1);
    // …and made-up kids right after cause none.
    for kid in ["made-up-1", "made-up-2", "made-up-3"] {
        let token = sign(Algorithm::RS256, Some(kid), &rsa2(), &setup.claims());
        assert_invalid_token(&setup, kid, &token).await;
    }
    assert_eq!(setup.issuer.jwks_hits(), at_start + 1, "at most one refresh per 30 s");

    // The issuer rotates: the new key is accepted once the rate limit allows a refresh.
    setup.issuer.publish(public_jwk(&rsa2(), Algorithm::RS256, "rsa-2", true));
    assert_invalid_token(&setup, "the new kid inside the rate limit window", &rotated).await;
    setup.clock.advance(31);
    let rotated = sign(Algorithm::RS256, Some("rsa-2"), &rsa2(), &setup.claims());
    assert_eq!(setup.post_mcp(&rotated).await.status(), 200, "accepted after the refresh");
    assert_eq!(setup.issuer.jwks_hits(), at_start + 2);
    // Known keys need no fetch.
    assert_eq!(setup.post_mcp(&setup.token(&setup.claims())).await.status(), 200);
    assert_eq!(setup.issuer.jwks_hits(), at_start + 2);
    setup.stop().await;
}

#[tokio::test]
async fn an_unreachable_issuer_answers_503_not_401_and_no_sign_in_page() {
    let setup = spawn_with(false).await;
    let response = setup.post_mcp(&setup.token(&setup.claims())).await;
    assert_eq!(response.status(), 503, "the token may be valid: the issuer is what failed");
    let sign_in = http().get(setup.url("/login/oidc?next=/")).send().await.unwrap();
    assert_eq!(sign_in.status(), 503);
    assert!(sign_in.text().await.unwrap().contains("cannot be reached"));
    setup.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Browser sign-in.

#[tokio::test]
async fn the_browser_signs_in_at_the_issuer_and_lands_on_next_as_the_bearer_user() {
    let setup = spawn().await;
    // The same person first reaches /mcp with a bearer token…
    assert_eq!(setup.post_mcp(&setup.token(&setup.claims())).await.status(), 200);
    let browser = browser();
    let (authorize_url, _) = setup.start_sign_in(&browser, "/connections?x=1").await;

    let url = url::Url::parse(&authorize_url).unwrap();
    assert_eq!(url.as_str().split('?').next().unwrap(), format!("{}/authorize", setup.issuer.url));
    let params: HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(params["response_type"], "code");
    assert_eq!(params["client_id"], CLIENT_ID);
    assert_eq!(params["redirect_uri"], setup.url("/login/oidc/callback"));
    assert_eq!(params["scope"], "openid profile email");
    assert_eq!(params["code_challenge_method"], "S256");
    assert!(params["state"].len() >= 43 && params["nonce"].len() >= 43);
    assert_ne!(params["state"], params["nonce"]);

    let callback = setup.approve_at_issuer(&browser, &authorize_url).await;
    let landed = browser.get(&callback).send().await.unwrap();
    assert_eq!(landed.status(), 303);
    assert_eq!(location(&landed), "/connections?x=1", "back to the local next");
    let cookies: Vec<String> =
        landed.headers().get_all("set-cookie").iter().map(|v| v.to_str().unwrap().to_owned()).collect();
    assert!(cookies.iter().any(|c| c.starts_with("oauth_broker_session=")), "{cookies:?}");
    assert!(cookies.iter().any(|c| c.starts_with("oauth_broker_oidc_login=;")), "login cookie cleared: {cookies:?}");

    // …and the browser is signed in as that same (iss, sub) user.
    assert_eq!(setup.signed_in_as(&browser).await.as_deref(), Some("Test User"), "shown by the ID token's name");
    assert_eq!(setup.users_of_the_issuer().await.len(), 1, "bearer and browser name the same user");
    setup.stop().await;
}

#[tokio::test]
async fn signing_in_again_rotates_the_session_cookie() {
    let setup = spawn().await;
    let browser = browser();
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let (authorize_url, _) = setup.start_sign_in(&browser, "/").await;
        let callback = setup.approve_at_issuer(&browser, &authorize_url).await;
        let landed = browser.get(&callback).send().await.unwrap();
        assert_eq!(landed.status(), 303);
        let session = landed
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .find(|c| c.starts_with("oauth_broker_session="))
            .unwrap();
        sessions.push(session.split(';').next().unwrap().to_owned());
    }
    assert_ne!(sessions[0], sessions[1], "a new session value at every sign-in");
    // The first session was ended, not just replaced in this browser.
    let old = http().get(setup.url("/")).header("cookie", &sessions[0]).send().await.unwrap().text().await.unwrap();
    assert!(!old.contains("Signed in as"), "the old session must be gone");
    setup.stop().await;
}

#[tokio::test]
async fn a_callback_is_single_use() {
    let setup = spawn().await;
    let browser = browser();
    let (authorize_url, login_cookie) = setup.start_sign_in(&browser, "/").await;
    let callback = setup.approve_at_issuer(&browser, &authorize_url).await;
    assert_eq!(browser.get(&callback).send().await.unwrap().status(), 303);

    // The same browser again: its login cookie was cleared.
    let again = browser.get(&callback).send().await.unwrap();
    assert_eq!(again.status(), 400);
    assert!(again.text().await.unwrap().contains("Sign in again from the home page"));
    // Even with the old login cookie replayed, the state was consumed.
    let replay = http().get(&callback).header("cookie", &login_cookie).send().await.unwrap();
    assert_eq!(replay.status(), 400);
    assert!(
        !replay
            .headers()
            .get_all("set-cookie")
            .iter()
            .any(|c| c.to_str().unwrap().starts_with("oauth_broker_session="))
    );
    setup.stop().await;
}

#[tokio::test]
async fn a_callback_carried_to_another_browser_or_with_another_state_is_refused() {
    let setup = spawn().await;
    let victim = browser();
    let attacker = browser();
    // Login CSRF: the attacker's own callback URL, opened in the victim's browser.
    let (authorize_url, _) = setup.start_sign_in(&attacker, "/").await;
    let callback = setup.approve_at_issuer(&attacker, &authorize_url).await;
    assert_eq!(victim.get(&callback).send().await.unwrap().status(), 400);
    assert_eq!(setup.signed_in_as(&victim).await, None);

    // A state that is not this browser's.
    let (authorize_url, _) = setup.start_sign_in(&victim, "/").await;
    let callback = setup.approve_at_issuer(&victim, &authorize_url).await;
    let url = url::Url::parse(&callback).unwrap();
    let mut params: HashMap<String, String> = url.query_pairs().into_owned().collect();
    params.insert("state".into(), "A".repeat(43));
    let forged = format!("{}?{}", setup.url("/login/oidc/callback"), serde_urlencoded(&params));
    assert_eq!(victim.get(&forged).send().await.unwrap().status(), 400);
    assert_eq!(setup.signed_in_as(&victim).await, None);
    assert!(setup.users_of_the_issuer().await.is_empty());
    setup.stop().await;
}

#[tokio::test]
async fn id_tokens_with_a_wrong_nonce_or_audience_and_mixed_up_responses_are_refused() {
    let setup = spawn().await;
    let cases = [
        ("a nonce from another sign-in", Tweak { nonce: Some("N".repeat(43)), ..Tweak::default() }),
        ("an ID token for another client", Tweak { aud: Some(json!("another-client")), ..Tweak::default() }),
        ("several audiences and no azp", Tweak { aud: Some(json!([CLIENT_ID, "another-client"])), ..Tweak::default() }),
        (
            "an iss parameter naming another issuer",
            Tweak { iss_param: Some("https://evil.example".into()), ..Tweak::default() },
        ),
    ];
    for (what, tweak) in cases {
        *setup.issuer.tweak.lock().unwrap() = tweak;
        let browser = browser();
        let (authorize_url, _) = setup.start_sign_in(&browser, "/").await;
        let callback = setup.approve_at_issuer(&browser, &authorize_url).await;
        let refused = browser.get(&callback).send().await.unwrap();
        assert_eq!(refused.status(), 400, "{what}");
        assert!(refused.text().await.unwrap().contains("Sign in again from the home page"), "{what}");
        assert_eq!(setup.signed_in_as(&browser).await, None, "{what}");
    }
    assert!(setup.users_of_the_issuer().await.is_empty());
    setup.stop().await;
}

#[tokio::test]
async fn the_local_sign_in_form_is_not_offered_in_oidc_mode() {
    let setup = spawn().await;
    let form = http().get(setup.url("/login?next=/connect/abc")).send().await.unwrap();
    assert_eq!(form.status(), 303);
    assert_eq!(location(&form), "/login/oidc?next=/connect/abc");
    let unsafe_next = http().get(setup.url("/login?next=//evil.example")).send().await.unwrap();
    assert_eq!(location(&unsafe_next), "/login/oidc?next=/");
    let html = http().get(setup.url("/login")).send().await.unwrap().text().await.unwrap();
    assert!(hidden_field(&html, "csrf_token").is_none());
    let post = http()
        .post(setup.url("/login"))
        .form(&[("username", "someone"), ("password", "x"), ("csrf_token", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 404);
    setup.stop().await;
}

fn serde_urlencoded(params: &HashMap<String, String>) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(params.iter()).finish()
}

#[tokio::test]
async fn the_client_is_taken_from_client_id_azp_cid_or_appid() {
    use oauth_broker::crypto::sha256_hex;
    use oauth_broker::identity::ClientIdentity;
    let setup = spawn().await;
    let cases = [
        (json!({"client_id": "rfc9068", "azp": "keycloak"}), ClientIdentity::OAuthClient("rfc9068".into())),
        (json!({"azp": "keycloak"}), ClientIdentity::OAuthClient("keycloak".into())),
        (json!({"cid": "okta-app"}), ClientIdentity::OAuthClient("okta-app".into())),
        (json!({"appid": "entra-v1"}), ClientIdentity::OAuthClient("entra-v1".into())),
        (json!({"azp": ""}), ClientIdentity::Unidentified),
        (
            json!({"azp": "x".repeat(300)}),
            ClientIdentity::OAuthClient(format!("sha256:{}", sha256_hex(&"x".repeat(300)))),
        ),
        (json!({}), ClientIdentity::Unidentified),
    ];
    for (extra, expected) in cases {
        let token = setup.token(&setup.claims_with(extra.clone()));
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        let user = oauth_broker::identity::bearer::authenticate(&setup.state.identity, &headers).await.unwrap();
        assert_eq!(user.client, expected, "{extra}");
    }
    setup.stop().await;
}

/// First sight of a user by many concurrent requests, and a sign-in that records the display
/// name, on both databases (the upsert's `ON CONFLICT` must behave the same).
async fn external_users_are_created_once_and_named_at_sign_in(backend: Backend) {
    let Some(setup) = spawn_on(backend).await else { return };
    let token = setup.token(&setup.claims());
    let attempts = (0..8).map(|_| setup.post_mcp(&token));
    for response in futures::future::join_all(attempts).await {
        assert_eq!(response.status(), 200);
    }
    assert_eq!(setup.users_of_the_issuer().await.len(), 1, "one user however many first requests race");

    let browser = browser();
    let (authorize_url, _) = setup.start_sign_in(&browser, "/").await;
    let callback = setup.approve_at_issuer(&browser, &authorize_url).await;
    assert_eq!(browser.get(&callback).send().await.unwrap().status(), 303);
    let users = setup.users_of_the_issuer().await;
    assert_eq!(users.len(), 1, "the browser found the same user");
    assert_eq!(users[0].display_name.as_deref(), Some("Test User"));
    assert_eq!(users[0].username, None);
    setup.stop().await;
}

#[tokio::test]
async fn external_users_on_sqlite() {
    external_users_are_created_once_and_named_at_sign_in(Backend::Sqlite).await;
}

#[tokio::test]
async fn external_users_on_postgres() {
    external_users_are_created_once_and_named_at_sign_in(Backend::Postgres).await;
}

/// The token API in OIDC mode: a tool server presents the issuer's token for its own resource
/// (the user is created on first sight, as on /mcp); a token for the broker is refused; the
/// exchange at /token answers in this mode too, though the broker is no authorization server.
#[tokio::test]
async fn a_tool_server_exchanges_the_issuers_token_for_its_resource_only() {
    let setup = spawn().await;
    let secret = oauth_broker::crypto::OneTimeSecret::generate("obs_", 32);
    let providers = [oauth_broker::domain::ProviderId::parse("files").unwrap()].into();
    let resource = url::Url::parse("https://tools.example/mcp").unwrap();
    let new = oauth_broker::store::token_api::NewService {
        name: "notes",
        providers: &providers,
        resource: Some(&resource),
        proxy_only: false,
        trusted: false,
        secret_hash: secret.hash(),
        organization: &oauth_broker::domain::OrganizationId::default_organization(),
    };
    setup.state.core.store.services().create(&new, setup.now()).await.unwrap();
    let ask = |token: String| {
        http()
            .post(setup.url("/v1/tokens"))
            .basic_auth("svc_notes", Some(secret.expose_plaintext()))
            .json(&json!({"subject_token": token, "provider": "files"}))
            .send()
    };

    // The broker's required_scopes are for its own /mcp, not for a tool server's clients.
    let for_tool_server =
        setup.token(&setup.claims_with(json!({"aud": "https://tools.example/mcp", "scope": "openid"})));
    let answer = ask(for_tool_server.clone()).await.unwrap();
    assert_eq!(answer.status(), StatusCode::CONFLICT);
    let problem: Value = answer.json().await.unwrap();
    assert_eq!(problem["reason"], "not_connected", "{problem}");
    assert!(problem["authorization"]["url"].as_str().unwrap().starts_with(&setup.url("/connect/")));
    assert_eq!(setup.users_of_the_issuer().await.len(), 1, "the user is created on first sight");

    let for_the_broker = setup.token(&setup.claims());
    let refused = ask(for_the_broker).await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let problem: Value = refused.json().await.unwrap();
    assert_eq!(problem["code"], "invalid_subject_token");

    let exchanged = http()
        .post(setup.url("/token"))
        .basic_auth("svc_notes", Some(secret.expose_plaintext()))
        .form(&[
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
            ("subject_token", for_tool_server.as_str()),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"),
            ("provider", "files"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(exchanged.status(), StatusCode::CONFLICT);
    let error: Value = exchanged.json().await.unwrap();
    assert_eq!(error["error"], "authorization_required", "{error}");
    // Other grants at /token stay local-mode only.
    let code = http().post(setup.url("/token")).form(&[("grant_type", "authorization_code")]).send().await.unwrap();
    assert_eq!(code.status(), StatusCode::NOT_FOUND);
    setup.stop().await;
}

// Issue 10: in OIDC mode the issuer's group claim decides who is an admin, afresh at each
// sign-in; the change is audited.
#[tokio::test]
async fn the_configured_group_claim_makes_an_admin_at_sign_in_and_losing_it_unmakes_one() {
    let setup = spawn().await;
    let sign_in = |groups: Value| {
        let setup = &setup;
        async move {
            setup.issuer.tweak.lock().unwrap().groups = Some(groups);
            let browser = browser();
            let (authorize_url, _) = setup.start_sign_in(&browser, "/admin").await;
            let callback = setup.approve_at_issuer(&browser, &authorize_url).await;
            assert_eq!(browser.get(&callback).send().await.unwrap().status(), 303);
            browser.get(setup.url("/admin")).send().await.unwrap().status()
        }
    };
    assert_eq!(sign_in(json!(["staff"])).await, 403, "not in the group: no admin pages");
    assert_eq!(sign_in(json!(["staff", "broker-admins"])).await, 200, "in the group: an admin");
    assert_eq!(sign_in(json!("broker-admins")).await, 200, "a single string counts too");
    assert_eq!(sign_in(json!(["staff"])).await, 403, "removed from the group at the issuer: no longer");
    let changes = setup.state.core.store.audit().entries(None, 100).await.unwrap();
    assert_eq!(changes.iter().filter(|e| e.action == "user.admin_from_claim").count(), 2, "each change audited");
    setup.stop().await;
}

// Issue 10: an issuer's valid token for a user an admin disabled is refused at /mcp, and the
// browser sign-in says the account is disabled; enabling restores both.
#[tokio::test]
async fn a_disabled_users_issuer_tokens_and_sign_in_are_refused_until_enabled() {
    let setup = spawn().await;
    let token = setup.token(&setup.claims());
    assert_eq!(setup.post_mcp(&token).await.status(), 200);
    let user = setup.users_of_the_issuer().await.remove(0);
    setup.state.core.store.users().set_disabled(&user.id, Some(setup.clock.now())).await.unwrap();
    assert_invalid_token(&setup, "a disabled user's token", &token).await;
    let browser = browser();
    let (authorize_url, _) = setup.start_sign_in(&browser, "/").await;
    let callback = setup.approve_at_issuer(&browser, &authorize_url).await;
    let refused = browser.get(&callback).send().await.unwrap();
    assert_eq!(refused.status(), 403);
    assert!(refused.text().await.unwrap().contains("Account disabled"));
    assert_eq!(setup.signed_in_as(&browser).await, None);
    setup.state.core.store.users().set_disabled(&user.id, None).await.unwrap();
    assert_eq!(setup.post_mcp(&token).await.status(), 200);
    setup.stop().await;
}
