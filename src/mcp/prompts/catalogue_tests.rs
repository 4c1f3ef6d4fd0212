use super::*;
use crate::config::SettingsArgs;

struct Ext(Vec<&'static str>);

impl Extension for Ext {
    fn prompts(&self) -> Vec<Prompt> {
        self.0.iter().map(|n| Prompt::new(*n, Some("from an extension"), None)).collect()
    }
}

fn catalogue(files: &[(&str, &str)], extensions: Vec<Arc<dyn Extension>>) -> (PromptCatalogue, tempfile::TempDir) {
    let data = tempfile::tempdir().unwrap();
    let args = SettingsArgs { data_dir: Some(data.path().to_path_buf()), ..Default::default() };
    let config = Config::from_toml(&args, "page_size = 2\n").unwrap();
    std::fs::create_dir_all(&config.prompts_dir).unwrap();
    for (file, text) in files {
        std::fs::write(config.prompts_dir.join(file), text).unwrap();
    }
    (PromptCatalogue::new(&config, Extensions(Arc::new(extensions)), Events::new()), data)
}

fn md(name: &str) -> (String, String) {
    (format!("{name}.md"), format!("+++\ndescription = \"{name}\"\n+++\nBody of {name}"))
}

fn names(catalogue: &PromptCatalogue) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = catalogue.list(cursor.as_deref()).unwrap();
        assert!(page.prompts.len() <= 2);
        out.extend(page.prompts.into_iter().map(|p| p.name));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return out,
        }
    }
}

#[test]
fn the_list_is_builtins_then_files_then_extensions_across_pages() {
    let (a, b) = (md("alpha"), md("beta"));
    let ext: Arc<dyn Extension> = Arc::new(Ext(vec!["from_ext", "connect_provider", "alpha"]));
    let (catalogue, _dir) = catalogue(&[(&b.0, &b.1), (&a.0, &a.1)], vec![ext]);
    assert_eq!(
        names(&catalogue),
        ["connect_provider", "review_connections", "use_provider_api", "alpha", "beta", "from_ext"],
        "duplicates from the extension are skipped"
    );
    assert!(matches!(catalogue.find("alpha").unwrap().origin, Origin::Operator(_)));
    assert!(matches!(catalogue.find("from_ext").unwrap().origin, Origin::Extension(_)));
    assert!(matches!(catalogue.find("connect_provider").unwrap().origin, Origin::Builtin));
    assert!(catalogue.find("nope").is_none());
}

#[test]
fn an_invalid_cursor_is_invalid_params() {
    let (catalogue, _dir) = catalogue(&[], vec![]);
    for cursor in ["garbage", "djE6cmVzb3VyY2VzOjI"] {
        let error = catalogue.list(Some(cursor)).unwrap_err();
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    }
}

#[test]
fn the_empty_catalogue_has_the_builtins() {
    let catalogue = PromptCatalogue::empty();
    assert_eq!(catalogue.list(None).unwrap().prompts.len(), builtin::NAMES.len());
    catalogue.start_watching(CancellationToken::new());
}

#[test]
fn replacing_with_an_identical_catalogue_is_no_change() {
    let a = md("alpha");
    let (catalogue, dir) = catalogue(&[(&a.0, &a.1)], vec![]);
    let again = load::load_dir(&dir.path().join("prompts"), &builtin::NAMES);
    assert!(!catalogue.shared.replace(again));
    assert!(catalogue.shared.replace(Vec::new()));
}

#[test]
fn unknown_prompt_names_are_escaped_and_shortened() {
    let error = unknown_prompt(&format!("evil\n{}", "x".repeat(500)));
    assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    assert!(error.message.contains("evil\\n") && error.message.len() < 200, "{}", error.message);
}
