use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::*;
use crate::mcp::prompts::image::MAX_IMAGE_BYTES;

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

const FULL: &str = r#"
name = "weekly_summary"
title = "Weekly summary"
description = "Summarise a week"

[[arguments]]
name = "week"
title = "Week"
description = "ISO week"
required = true

[[arguments]]
name = "tone"

[[messages]]
role = "user"
content = { type = "text", text = "Summarise {{week}} in a {{ tone }} tone." }

[[messages]]
role = "assistant"
content = { type = "resource", uri = "https://intranet.example/style", mimeType = "text/markdown", text = "Style for {{week}}" }
"#;

#[test]
fn a_toml_prompt_parses_with_metadata_arguments_and_messages() {
    let d = dir();
    let p = parse_toml(FULL, "ignored", d.path()).unwrap();
    assert_eq!(p.name(), "weekly_summary");
    assert_eq!(p.prompt.title.as_deref(), Some("Weekly summary"));
    assert_eq!(p.arguments().len(), 2);
    assert_eq!(p.arguments()[0].required, Some(true));
    assert_eq!(p.arguments()[1].required, Some(false));
    let values = [("week".to_string(), "W14".to_string())].into();
    let rendered = p.render(&values);
    assert_eq!(rendered.description.as_deref(), Some("Summarise a week"));
    assert_eq!(rendered.messages[0].content.as_text().unwrap().text, "Summarise W14 in a  tone.");
    assert_eq!(rendered.messages[1].role, Role::Assistant);
    let ContentBlock::Resource(resource) = &rendered.messages[1].content else { panic!("resource") };
    assert_eq!(resource.get_text(), "Style for W14");
}

#[test]
fn a_markdown_prompt_is_front_matter_and_one_user_message() {
    let d = dir();
    let text = "+++\r\ntitle = \"Standup\"\n[[arguments]]\nname = \"team\"\nrequired = true\n+++\n\nStandup notes for {{team}}.\n";
    let p = parse_markdown(text, "standup", d.path()).unwrap();
    assert_eq!(p.name(), "standup", "the name defaults to the file stem");
    assert_eq!(p.messages.len(), 1);
    assert_eq!(p.messages[0].role, Role::User);
    let rendered = p.render(&[("team".to_string(), "core".to_string())].into());
    assert_eq!(rendered.messages[0].content.as_text().unwrap().text, "Standup notes for core.");
}

#[test]
fn broken_files_say_what_is_wrong() {
    let d = dir();
    let cases = [
        ("name = \"bad name\"\n[[messages]]\nrole = \"user\"\ncontent = { type = \"text\", text = \"x\" }", "name"),
        ("[[messages]]\nrole = \"system\"\ncontent = { type = \"text\", text = \"x\" }", "system"),
        ("[[messages]]\nrole = \"user\"\ncontent = { type = \"text\", text = \"{{nope}}\" }", "{{nope}}"),
        ("[[messages]]\nrole = \"user\"\ncontent = { type = \"video\", text = \"x\" }", "video"),
        ("[[messages]]\nrole = \"user\"\ncontent = { type = \"text\", text = \"x\", extra = 1 }", "extra"),
        ("surprise = 1\n[[messages]]\nrole = \"user\"\ncontent = { type = \"text\", text = \"x\" }", "surprise"),
        ("name = \"x\"", "no messages"),
        (
            "[[arguments]]\nname = \"a\"\n[[arguments]]\nname = \"a\"\n[[messages]]\nrole = \"user\"\ncontent = { type = \"text\", text = \"x\" }",
            "twice",
        ),
        (
            "[[messages]]\nrole = \"user\"\ncontent = { type = \"resource\", uri = \"not a uri\", text = \"x\" }",
            "not a valid URI",
        ),
        ("name = ", "TOML"),
    ];
    for (text, expected) in cases {
        let error = parse_toml(text, "stem", d.path()).unwrap_err().to_string();
        assert!(error.contains(expected), "{text:?}: {error}");
    }
    for (text, expected) in [
        ("no front matter", "front matter"),
        ("+++\ntitle = \"x\"\n", "closing"),
        ("+++\n+++\n   \n", "empty"),
        ("+++\n[[messages]]\nrole = \"user\"\n+++\nbody", "messages"),
    ] {
        let error = parse_markdown(text, "stem", d.path()).unwrap_err().to_string();
        assert!(error.contains(expected), "{text:?}: {error}");
    }
}

fn image_prompt(path: &str, mime: Option<&str>) -> String {
    let mime = mime.map(|m| format!(", mimeType = \"{m}\"")).unwrap_or_default();
    format!("[[messages]]\nrole = \"user\"\ncontent = {{ type = \"image\", path = \"{path}\"{mime} }}\n")
}

#[test]
fn images_are_read_inside_the_directory_and_base64_encoded() {
    let d = dir();
    std::fs::create_dir(d.path().join("img")).unwrap();
    std::fs::write(d.path().join("img/dot.png"), b"\x89PNG fake").unwrap();
    let p = parse_toml(&image_prompt("img/dot.png", None), "pic", d.path()).unwrap();
    let rendered = p.render(&BTreeMap::new());
    let ContentBlock::Image(image) = &rendered.messages[0].content else { panic!("image") };
    assert_eq!(image.mime_type, "image/png");
    assert_eq!(STANDARD.decode(&image.data).unwrap(), b"\x89PNG fake");
    let given = parse_toml(&image_prompt("img/dot.png", Some("image/x-custom")), "pic", d.path()).unwrap();
    let ContentTemplate::Image { mime_type, .. } = &given.messages[0].content else { panic!("image") };
    assert_eq!(mime_type, "image/x-custom");
}

#[test]
fn images_that_are_missing_outside_too_big_or_untyped_are_refused() {
    let root = dir();
    let d = root.path().join("prompts");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(root.path().join("secret.png"), b"x").unwrap();
    std::fs::write(d.join("big.png"), vec![0u8; MAX_IMAGE_BYTES as usize]).unwrap();
    std::fs::write(d.join("blob.dat"), b"x").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(root.path().join("secret.png"), d.join("link.png")).unwrap();
    let mut cases = vec![
        ("missing.png", None, "missing.png"),
        ("../secret.png", None, ".."),
        ("/etc/passwd", Some("image/png"), "relative"),
        ("big.png", None, "under 1 MiB"),
        ("blob.dat", None, "mimeType"),
        ("blob.dat", Some("text/plain"), "image/*"),
    ];
    if cfg!(unix) {
        cases.push(("link.png", None, "outside"));
    }
    for (path, mime, expected) in cases {
        let error = parse_toml(&image_prompt(path, mime), "pic", &d).unwrap_err().to_string();
        assert!(error.contains(expected), "{path}: {error}");
    }
}

#[test]
fn load_reads_by_extension_and_refuses_huge_files() {
    let d = dir();
    let md = d.path().join("hello.MD");
    std::fs::write(&md, "+++\ndescription = \"hi\"\n+++\nHello").unwrap();
    assert_eq!(load(&md, d.path()).unwrap().name(), "hello");
    let huge = d.path().join("huge.toml");
    std::fs::write(&huge, vec![b'#'; MAX_FILE_BYTES as usize + 1]).unwrap();
    assert!(matches!(load(&huge, d.path()), Err(FileError::TooLarge)));
    let other = d.path().join("notes.txt");
    std::fs::write(&other, "x").unwrap();
    assert!(matches!(load(&other, d.path()), Err(FileError::UnsupportedType)));
}

#[test]
fn names_follow_the_mcp_rules() {
    for good in ["a", "A_b-c.d", &"x".repeat(128)] {
        assert!(is_valid_name(good), "{good}");
    }
    for bad in ["", "a b", "é", "a/b", "{x}", &"x".repeat(129)] {
        assert!(!is_valid_name(bad), "{bad}");
    }
}
