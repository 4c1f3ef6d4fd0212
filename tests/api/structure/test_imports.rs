//! No test file imports another: what several need is in `helpers/`. A test that reads every
//! file under `tests/api/` and fails on a path into another test file — `crate::X` for any
//! module `main.rs` declares other than `helpers`, or `super::X` for a sibling file — and beside
//! it a test that the check finds such a path in files written for it.

use std::collections::BTreeSet;
use std::path::Path;

use crate::helpers::rust_source::{collect, lex, paths};

#[test]
fn test_files_import_only_from_helpers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/api");
    let found = imports_of_test_files(&root);
    assert!(
        found.is_empty(),
        "a test file imports another test file; move what they share into tests/api/helpers/:\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn a_test_file_importing_another_or_a_sibling_is_found() {
    let root = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let file = root.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    write("main.rs", "mod helpers;\nmod mcp;\nmod web;\n");
    write("helpers/mod.rs", "pub mod app;\nuse crate::web::pages::Nothing;\n");
    write("helpers/app.rs", "use super::mod_item;\n");
    write("mcp/mod.rs", "mod flow;\nmod consent;\n");
    write(
        "mcp/flow.rs",
        "use crate::helpers::spawn_app;\nuse crate::on_both_backends;\nfn f() { super::consent::g(); }\n",
    );
    write("mcp/consent.rs", "// use crate::web::pages::x;\nfn g() { let _ = \"crate::web\"; }\n");
    write("web/mod.rs", "mod pages;\n");
    write("web/pages.rs", "use crate::{helpers::TestApp, mcp::flow::f};\n");

    let found = imports_of_test_files(root.path());

    assert_eq!(
        found,
        [
            "helpers/mod.rs imports crate::web::pages::Nothing",
            "mcp/flow.rs imports super::consent::g",
            "web/pages.rs imports crate::mcp::flow::f",
        ]
    );
}

/// Every path in a file under `root` that reaches a test file other than its own: `crate::X…`
/// where `main.rs` declares `mod X` and X is not `helpers` (from any file, helpers included),
/// and, outside `helpers/`, `super::X…` where X is a file beside it.
fn imports_of_test_files(root: &Path) -> Vec<String> {
    let test_modules = declared(&root.join("main.rs"));
    let mut files = Vec::new();
    collect(root, &mut files);
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        let beside = if relative.starts_with("helpers/") { BTreeSet::new() } else { siblings(root, &file) };
        let code = lex(&std::fs::read_to_string(&file).unwrap());
        for path in paths(&code) {
            let mut segments = path.split("::");
            let reaches_another = match (segments.next(), segments.next()) {
                (Some("crate"), Some(module)) => module != "helpers" && test_modules.contains(module),
                (Some("super"), Some(module)) => beside.contains(module),
                _ => false,
            };
            if reaches_another {
                found.push(format!("{relative} imports {path}"));
            }
        }
    }
    found.sort();
    found
}

/// The modules `super::` names from `file`: those declared beside its own module (by its
/// folder's `mod.rs`, or for a `mod.rs` by the folder above; `main.rs` at the top).
fn siblings(root: &Path, file: &Path) -> BTreeSet<String> {
    let Some(dir) = file.parent() else { return BTreeSet::new() };
    let dir = if file.ends_with("mod.rs") { dir.parent().unwrap_or(dir) } else { dir };
    declared(&if dir == root { root.join("main.rs") } else { dir.join("mod.rs") })
}

/// The modules a `main.rs` or `mod.rs` declares (`mod name;`).
fn declared(file: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    lex(&text)
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = line.strip_prefix("pub ").unwrap_or(line);
            line.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned)
        })
        .collect()
}
