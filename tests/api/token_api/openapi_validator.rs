//! The token API's OpenAPI document, as the real server serves it, checked by a real OpenAPI
//! validator (PyPI `openapi-spec-validator`, pinned in `.ci/python.sh`), plus what issue 27 found
//! missing from it: `wait` an optional query parameter, the `/token` exchange and every proxy
//! method as operations, every problem code, `GET /v1/connections`.
//!
//! The interpreter is `MCP_PYTHON`, else the venv `bash .ci/python.sh` makes under `.ci/python/`
//! (as `crate::helpers::python` finds it). Without a validator there the validation prints
//! `SKIPPED openapi-validator: …`, unless `REQUIRE_PYTHON_MCP=1` (CI), where it fails instead.

use std::path::PathBuf;

use serde_json::Value;

use crate::helpers::*;

/// The interpreter with the validator, or `None` after printing why the validation skips.
fn validator() -> Option<PathBuf> {
    let path = std::env::var_os("MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/python/bin/python"));
    let reason = if !path.is_file() {
        format!("no Python at {} (run `bash .ci/python.sh` once)", path.display())
    } else {
        let probe = std::process::Command::new(&path).args(["-c", "import openapi_spec_validator"]).output();
        match probe {
            Ok(output) if output.status.success() => return Some(path),
            Ok(_) => format!("{} has no openapi-spec-validator (run `bash .ci/python.sh`)", path.display()),
            Err(error) => format!("{} did not run: {error}", path.display()),
        }
    };
    if std::env::var("REQUIRE_PYTHON_MCP").is_ok_and(|v| v == "1") {
        panic!("REQUIRE_PYTHON_MCP=1 but {reason}");
    }
    eprintln!("SKIPPED openapi-validator: {reason}");
    None
}

async fn served_document(app: &TestApp) -> Value {
    let response = app.http().get(app.url("/v1/openapi.json")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn the_served_openapi_document_passes_a_real_validator() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let document = served_document(&app).await;
    app.stop().await;
    let Some(python) = validator() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, serde_json::to_vec(&document).unwrap()).unwrap();
    // `validate` picks the 3.1 validator from the document's own `openapi` field and raises on
    // the first error, which it prints whole.
    let script = "import json, sys\n\
                  from openapi_spec_validator import validate\n\
                  validate(json.load(open(sys.argv[1])))\n\
                  print('valid')\n";
    let output = std::process::Command::new(&python).args(["-c", script]).arg(&file).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success() && stdout.contains("valid"), "the validator refused the document:\n{stderr}");
}

#[tokio::test]
async fn the_document_says_what_the_api_does() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let document = served_document(&app).await;
    app.stop().await;
    let paths = &document["paths"];

    // `wait` is an optional query parameter, not a required path one.
    let params = paths["/v1/authorizations/{id}"]["get"]["parameters"].as_array().unwrap();
    let wait = params.iter().find(|p| p["name"] == "wait").expect("wait is documented");
    assert_eq!((wait["in"].as_str(), wait["required"].as_bool()), (Some("query"), Some(false)), "{wait}");

    // The RFC 8693 exchange and every proxy method are operations, each with its own id.
    assert!(paths["/token"]["post"]["requestBody"]["content"]["application/x-www-form-urlencoded"].is_object());
    let proxy = &paths["/v1/proxy/{provider}/{path}"];
    let mut ids = Vec::new();
    for method in ["get", "head", "post", "put", "patch", "delete"] {
        let operation = &proxy[method];
        assert!(operation.is_object(), "{method} is an operation");
        assert_eq!(operation["requestBody"].is_null(), ["get", "head"].contains(&method), "{method}'s body");
        ids.push(operation["operationId"].as_str().unwrap().to_owned());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 6, "distinct operation ids: {ids:?}");

    // Every problem code, rate_limited too; and the connection status endpoint.
    let codes = &document["components"]["schemas"]["ProblemDocument"]["properties"]["code"]["enum"];
    for code in oauth_broker::api::openapi::PROBLEM_CODES {
        assert!(codes.as_array().unwrap().iter().any(|c| c == code), "{code} in {codes}");
    }
    assert!(codes.as_array().unwrap().iter().any(|c| c == "rate_limited"));
    let connections = &paths["/v1/connections"]["get"];
    assert!(connections.is_object());
    let statuses = serde_json::to_string(&document["components"]["schemas"]["ConnectionEntry"]).unwrap();
    for status in oauth_broker::broker::connection_status::Status::CODES {
        assert!(statuses.contains(status), "{status} is explained");
    }
}
