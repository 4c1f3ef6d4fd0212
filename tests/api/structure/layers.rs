//! The module graph points one way: a test that fails when a `use` makes a module reach one on
//! its own layer or above it, or when files import each other in a circle; and beside it a test
//! that prints the structure's figures.
//!
//! The graph is read from the sources, as text: every `crate::`, `super::` and `self::` path,
//! and every path that starts at a module's own child (`use child::…`, `child::f()`), in `use`
//! trees and inline, names the file of the longest module prefix it resolves to. A child's use of what its parent declares
//! (`super::X` from the folder's `mod.rs`) is an arrow like any other: a parent declares and
//! imports its children, so a child that reaches back up into it closes a circle. What the
//! children share belongs in a sibling file they all import; a `mod.rs` holds its map, its `mod`
//! declarations, `pub use` re-exports and, where the room has routes, its `router()`.
//! Comments, strings, visibility restrictions (`pub(in path)` imports nothing) and `#[cfg(test)]`
//! modules are left out: tests may reach anywhere.
//!
//! [`LAYERS`] is the order, lowest first. A top-level module may import only modules on a
//! lower layer: the modules on one layer are peers, and the faces ([`FACES`]) stand side by
//! side on one, so no face imports another. Inside one top-level module, files may import each
//! other as long as no circle forms. A new top-level module must be given its place here before
//! anything compiles in.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::helpers::rust_source::{collect, lex, paths};

/// The faces over the core, peers on one layer: what two of them share sits below them.
const FACES: &[&str] = &["web", "api", "authorization_server", "demo_provider", "mcp"];

/// The crate's top-level modules by layer, lowest first: each may import only those on the
/// layers before its own.
const LAYERS: &[&[&str]] = &[
    // Leaves: time and background loops, safe display of names others chose, sealing, PKCE,
    // identifiers.
    &["clock"],
    &["every"],
    &["error_chain"],
    &["display"],
    &["crypto"],
    &["pkce"],
    &["domain"],
    // Addresses, counters, the providers' own settings, then the settings that name them:
    // handed their labels and values, none of them imports a feature.
    &["net"],
    &["telemetry"],
    &["providers"],
    &["config"],
    // The database, then what sits directly on it.
    &["store"],
    &["events"],
    &["token_endpoint"],
    &["identity"],
    // The core and the state the faces share.
    &["broker"],
    &["state"],
    &["keyring"],
    &["health"],
    // What several faces share, side by side: the HTML pages' rendering, message and error
    // pages, CSRF and security headers; the words of a service's refusals.
    &["html", "problem"],
    FACES,
    // Assembly and the operator's commands.
    &["startup"],
    &["app"],
    &["admin"],
];

#[test]
fn every_import_points_to_a_lower_layer_and_no_files_import_each_other_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let problems = problems(&Graph::read(&src));
    assert!(problems.is_empty(), "the module graph must point one way:\n  {}", problems.join("\n  "));
}

#[test]
fn a_face_importing_a_face_and_a_child_using_its_parents_items_both_fail() {
    // Arrange: a face (`api`) that imports another (`web`), whose child uses an item of the
    // `mod.rs` that imports the child.
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "pub mod api; pub mod web;");
    write("web/mod.rs", "mod form; pub use form::Form; pub fn field() {}");
    write("web/form.rs", "use super::field; pub struct Form;");
    write("api/mod.rs", "use crate::web::Form;");

    // Act
    let problems = problems(&Graph::read(dir.path()));

    // Assert
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].starts_with("api/mod.rs imports web/mod.rs: the faces `api` and `web`")
            && problems[0].contains("move the part both need below the faces"),
        "{problems:#?}"
    );
    assert!(problems[1].ends_with("in a circle (a child's use of its parent's items counts): web/form.rs, web/mod.rs"));
}

/// What breaks the rules: an import of a module that is not on a lower layer (a face's of a
/// face said as such), and every circle.
fn problems(graph: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    for (from, targets) in &graph.arrows {
        let from_top = top_level(from);
        if from_top == "lib" || from_top == "main" {
            continue;
        }
        for to in targets {
            let to_top = top_level(to);
            if to_top == from_top {
                continue;
            }
            match (layer(&from_top), layer(&to_top)) {
                (Some(a), Some(b)) if b < a => {}
                (Some(a), Some(b)) if a == b && is_face(&from_top) && is_face(&to_top) => problems.push(format!(
                    "{from} imports {to}: the faces `{from_top}` and `{to_top}` stand side by side and \
                     neither imports the other; move the part both need below the faces"
                )),
                (Some(a), Some(b)) if a == b => problems.push(format!(
                    "{from} imports {to}: `{from_top}` and `{to_top}` are peers on one layer in \
                     tests/api/structure/layers.rs LAYERS; move the part both need below them"
                )),
                (Some(_), Some(_)) => problems.push(format!(
                    "{from} imports {to}: `{to_top}` is not below `{from_top}` in tests/api/structure/layers.rs LAYERS; \
                     move what both need down, or hand it in from above"
                )),
                _ => problems.push(format!(
                    "{from} -> {to}: `{from_top}` or `{to_top}` has no place in tests/api/structure/layers.rs LAYERS"
                )),
            }
        }
    }
    for circle in graph.circles() {
        problems.push(format!(
            "these files import each other in a circle (a child's use of its parent's items counts): {}",
            circle.join(", ")
        ));
    }
    problems
}

/// The structure's figures, printed with `--nocapture`: of this crate's `src/`, or of the
/// directory named by `LAYERS_SRC`, so another checkout is measured the same way
/// (`LAYERS_SRC=/other/checkout/src cargo test --test api figures -- --nocapture`).
#[test]
fn the_structure_figures_are_printed_for_this_checkout_or_the_one_in_layers_src() {
    let src = std::env::var_os("LAYERS_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let graph = Graph::read(&src);
    let figures = Figures::of(&src, &graph);
    println!("{}", figures.report(&src));
    assert!(figures.files_per_room.values().sum::<usize>() > 0, "no Rust files under {}", src.display());
}

#[test]
fn the_reader_sees_the_paths_rust_sees_and_nothing_else() {
    let code = r##"
        use crate::a::{b, c::{d, e}};
        // use crate::comment::x;
        /* crate::block::y /* nested */ */
        let s = "crate::string::z"; let r = r#"crate::raw"#; let c = '"'; let l: &'static str = "";
        fn f<'a>() { crate::inline::g(); super::up::h(); }
        pub(in crate::visibility) fn v() {}
        #[cfg(test)]
        mod tests { use crate::test_only::t; }
    "##;
    let mut found = paths(&strip_visibility(&strip_tests(&lex(code))));
    found.sort();
    assert_eq!(found, ["crate::a::b", "crate::a::c::d", "crate::a::c::e", "crate::inline::g", "super::up::h"]);
    assert_eq!(
        paths("use std::sync::Arc; pub use child::{self, Item as Other};"),
        ["std::sync::Arc", "child", "child::Item"]
    );
    // A child module named inline (`follow::Before` in the module that declares `mod follow;`)
    // is a path like any other; a method's turbofish is not one.
    assert_eq!(paths("fn f() { follow::Before::read(); x.collect::<Vec<u8>>(); }"), ["follow::Before::read"]);
}

fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn is_face(module: &str) -> bool {
    FACES.contains(&module)
}

/// `config.rs` → `config`, `mcp/session/mod.rs` → `mcp`.
fn top_level(file: &str) -> String {
    let first = file.split('/').next().unwrap_or(file);
    first.strip_suffix(".rs").unwrap_or(first).to_owned()
}

struct Graph {
    /// File (relative to `src/`, with `/`) → the files it imports.
    arrows: BTreeMap<String, BTreeSet<String>>,
    /// The arrows of those from a child to a parent it stands in (`identity/bearer.rs` →
    /// `identity/mod.rs`), counted apart for the figures.
    up: BTreeSet<(String, String)>,
}

impl Graph {
    fn read(src: &Path) -> Self {
        let mut files = Vec::new();
        collect(src, &mut files);
        let test_only = test_only_files(src, &files);
        let mut arrows: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut up = BTreeSet::new();
        for file in &files {
            if test_only.contains(file) {
                continue;
            }
            let text = std::fs::read_to_string(file).unwrap();
            let here = module_path(src, file);
            let name = relative(src, file);
            let entry = arrows.entry(name.clone()).or_default();
            for path in paths(&strip_visibility(&strip_tests(&lex(&text)))) {
                // `use child::Item` names a module of this one without `self::` (2018 paths).
                let path = match path.split("::").next() {
                    Some(first) if !matches!(first, "crate" | "super" | "self") => {
                        let mut child = here.clone();
                        child.push(first.to_owned());
                        if file_of(src, &child).is_some_and(|f| module_path(src, &f) == child) {
                            format!("self::{path}")
                        } else {
                            continue;
                        }
                    }
                    _ => path,
                };
                let Some(absolute) = absolute(&here, &path) else { continue };
                if let Some(target) = file_of(src, &absolute) {
                    let target_module = module_path(src, &target);
                    let to_parent = target_module.len() < here.len() && here.starts_with(&target_module);
                    let target = relative(src, &target);
                    if target != name && !test_only.contains(&src.join(&target)) {
                        if to_parent {
                            up.insert((name.clone(), target.clone()));
                        }
                        entry.insert(target);
                    }
                }
            }
        }
        Self { arrows, up }
    }

    /// Strongly connected components of more than one file (Tarjan).
    fn circles(&self) -> Vec<Vec<String>> {
        struct Walk<'g> {
            graph: &'g Graph,
            index: BTreeMap<&'g str, usize>,
            low: BTreeMap<&'g str, usize>,
            stack: Vec<&'g str>,
            on_stack: BTreeSet<&'g str>,
            found: Vec<Vec<String>>,
        }
        impl<'g> Walk<'g> {
            fn visit(&mut self, v: &'g str) {
                let i = self.index.len();
                self.index.insert(v, i);
                self.low.insert(v, i);
                self.stack.push(v);
                self.on_stack.insert(v);
                for w in self.graph.arrows.get(v).into_iter().flatten() {
                    let w = w.as_str();
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let low = self.low[v].min(self.low[w]);
                        self.low.insert(v, low);
                    } else if self.on_stack.contains(w) {
                        let low = self.low[v].min(self.index[w]);
                        self.low.insert(v, low);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack.remove(w);
                        component.push(w.to_owned());
                        if w == v {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        component.sort();
                        self.found.push(component);
                    }
                }
            }
        }
        let mut walk = Walk {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            found: Vec::new(),
        };
        for v in self.arrows.keys() {
            if !walk.index.contains_key(v.as_str()) {
                walk.visit(v);
            }
        }
        walk.found
    }
}

/// What the figures test prints.
struct Figures {
    /// `from face → to face` → how many file-to-file arrows.
    face_to_face: BTreeMap<(String, String), usize>,
    /// Top-level room → its arrows from a child to a parent.
    child_to_parent: BTreeMap<String, usize>,
    /// Every circle, its files sorted.
    circles: Vec<Vec<String>>,
    /// Top-level room → its `.rs` files (tests included).
    files_per_room: BTreeMap<String, usize>,
    /// Top-level room → its `#[allow(clippy::too_many_arguments)]` (outside comments and strings).
    too_many_arguments: BTreeMap<String, usize>,
}

impl Figures {
    fn of(src: &Path, graph: &Graph) -> Self {
        let mut face_to_face = BTreeMap::new();
        for (from, targets) in &graph.arrows {
            for to in targets {
                let (from_top, to_top) = (top_level(from), top_level(to));
                if from_top != to_top && is_face(&from_top) && is_face(&to_top) {
                    *face_to_face.entry((from_top, to_top)).or_default() += 1;
                }
            }
        }
        let mut child_to_parent = BTreeMap::new();
        for (from, _) in &graph.up {
            *child_to_parent.entry(top_level(from)).or_default() += 1;
        }
        let mut files = Vec::new();
        collect(src, &mut files);
        let mut files_per_room = BTreeMap::new();
        let mut too_many_arguments = BTreeMap::new();
        for file in &files {
            let room = top_level(&relative(src, file));
            *files_per_room.entry(room.clone()).or_default() += 1;
            let code = lex(&std::fs::read_to_string(file).unwrap());
            let allows = code.matches("#[allow(clippy::too_many_arguments)]").count();
            if allows > 0 {
                *too_many_arguments.entry(room).or_default() += allows;
            }
        }
        Self { face_to_face, child_to_parent, circles: graph.circles(), files_per_room, too_many_arguments }
    }

    fn report(&self, src: &Path) -> String {
        let total = |counts: &BTreeMap<String, usize>| counts.values().sum::<usize>();
        let list = |counts: &BTreeMap<String, usize>| {
            counts.iter().map(|(room, n)| format!("{room} {n}")).collect::<Vec<_>>().join(", ")
        };
        let mut out = format!("structure of {}\n", src.display());
        let face_total: usize = self.face_to_face.values().sum();
        out += &format!("face -> face imports (file arrows): {face_total}\n");
        for ((from, to), n) in &self.face_to_face {
            out += &format!("  {from} -> {to}: {n}\n");
        }
        out += &format!("child -> parent arrows: {} ({})\n", total(&self.child_to_parent), list(&self.child_to_parent));
        let mut circles_per_room: BTreeMap<String, usize> = BTreeMap::new();
        for circle in &self.circles {
            let rooms: BTreeSet<String> = circle.iter().map(|f| top_level(f)).collect();
            let room = rooms.into_iter().collect::<Vec<_>>().join("+");
            *circles_per_room.entry(room).or_default() += 1;
        }
        out += &format!(
            "circles: {} ({}), files in them: {}\n",
            self.circles.len(),
            list(&circles_per_room),
            self.circles.iter().map(Vec::len).sum::<usize>()
        );
        for circle in &self.circles {
            out += &format!("  {}\n", circle.join(", "));
        }
        out += &format!("files: {} ({})\n", total(&self.files_per_room), list(&self.files_per_room));
        out += &format!(
            "#[allow(clippy::too_many_arguments)]: {} ({})\n",
            total(&self.too_many_arguments),
            list(&self.too_many_arguments)
        );
        out
    }
}

fn relative(src: &Path, file: &Path) -> String {
    file.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/")
}

/// `src/mcp/server.rs` → `["mcp", "server"]`; `mod.rs`, `lib.rs` and `main.rs` name their folder.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = relative(src, file);
    let mut parts: Vec<String> = relative.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

/// Files declared only for tests (`#[cfg(test)] mod name;`, or `#[cfg(test)] #[path =
/// "name_tests.rs"] mod tests;`, whose file is beside the declaring one).
fn test_only_files(src: &Path, files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut test_only = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("#[cfg(test)]") {
            rest = rest[at + "#[cfg(test)]".len()..].trim_start();
            if let Some(path) = rest.strip_prefix("#[path = \"").and_then(|p| p.split('"').next())
                && let Some(dir) = file.parent()
            {
                test_only.insert(dir.join(path));
            }
        }
        let code = lex(&text);
        let here = module_path(src, file);
        let mut rest = code.as_str();
        while let Some(at) = rest.find("#[cfg(test)]") {
            rest = &rest[at + "#[cfg(test)]".len()..];
            let words: Vec<&str> = rest.split_whitespace().take(3).collect();
            let name = match words.as_slice() {
                ["mod", name, ..] => name,
                [vis, "mod", name] if vis.starts_with("pub") => name,
                _ => continue,
            };
            if let Some(name) = name.strip_suffix(';') {
                let mut segments = here.clone();
                segments.push(name.to_owned());
                if let Some(target) = file_of(src, &segments) {
                    test_only.insert(target);
                }
            }
        }
    }
    test_only
}

/// Resolves `crate::…`, `super::…` and `self::…` against the module `here`.
fn absolute(here: &[String], path: &str) -> Option<Vec<String>> {
    let mut segments = path.split("::").filter(|s| !s.is_empty());
    let mut base: Vec<String> = match segments.next()? {
        "crate" => Vec::new(),
        "self" => here.to_vec(),
        "super" => here[..here.len().checked_sub(1)?].to_vec(),
        _ => return None,
    };
    for segment in segments {
        if segment == "super" {
            base.pop()?;
        } else {
            base.push(segment.to_owned());
        }
    }
    Some(base)
}

/// The file of the longest prefix of `segments` that is a module.
fn file_of(src: &Path, segments: &[String]) -> Option<PathBuf> {
    let mut found = None;
    let mut dir = src.to_path_buf();
    for segment in segments {
        let file = dir.join(format!("{segment}.rs"));
        let module = dir.join(segment).join("mod.rs");
        if file.is_file() {
            found = Some(file);
        } else if module.is_file() {
            found = Some(module);
        } else {
            break;
        }
        dir = dir.join(segment);
    }
    found
}

/// The code with `pub(in path)` read as `pub`: a visibility restriction names a module, but
/// imports nothing from it.
fn strip_visibility(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("pub(in ") {
        out.push_str(&rest[..at]);
        out.push_str("pub");
        let after = &rest[at..];
        rest = after.find(')').map_or("", |close| &after[close + 1..]);
    }
    out.push_str(rest);
    out
}

/// The code without `#[cfg(test)] mod name { … }` blocks.
fn strip_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let Some(open) = after.find(['{', ';']) else {
            rest = after;
            break;
        };
        let head = after[..open].trim();
        let is_module = head.starts_with("mod ") || (head.starts_with("pub") && head.contains(" mod "));
        if !is_module || after.as_bytes()[open] == b';' {
            rest = after;
            continue;
        }
        let mut depth = 0;
        let mut end = after.len();
        for (i, ch) in after[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}
