//! Images in operator prompts: a path relative to the prompts directory, read at load time,
//! refused when it leaves the directory (also through a symlink), is not a file, or is 1 MiB
//! or more. The mime type is the one given (`image/*`) or follows from the extension.

use std::path::{Component, Path};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// Images must be smaller than this (bytes).
pub const MAX_IMAGE_BYTES: u64 = 1024 * 1024;

/// Reads an image inside `dir`: (base64 data, mime type).
pub fn load(dir: &Path, relative: &str, mime_type: Option<String>) -> Result<(String, String), String> {
    let relative_path = Path::new(relative);
    let plain = !relative.is_empty()
        && relative_path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !plain {
        return Err(format!("image path {relative:?} must be relative to the prompts directory, without '..'"));
    }
    let mime_type = match mime_type {
        Some(m) if m.starts_with("image/") => m,
        Some(m) => return Err(format!("image mimeType {m:?} is not an image/* type")),
        None => mime_from_extension(relative_path)
            .ok_or_else(|| format!("cannot tell the image type of {relative:?} from its extension; give mimeType"))?
            .to_owned(),
    };
    let full = dir.join(relative_path);
    let resolved = full.canonicalize().map_err(|e| format!("image {relative:?}: {e}"))?;
    // Symlinks may point anywhere; only files that really live under the directory are read.
    let root = dir.canonicalize().map_err(|e| format!("prompts directory: {e}"))?;
    if !resolved.starts_with(&root) {
        return Err(format!("image {relative:?} resolves outside the prompts directory"));
    }
    let meta = std::fs::metadata(&resolved).map_err(|e| format!("image {relative:?}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("image {relative:?} is not a file"));
    }
    if meta.len() >= MAX_IMAGE_BYTES {
        return Err(format!("image {relative:?} is {} bytes; images must be under 1 MiB", meta.len()));
    }
    let bytes = std::fs::read(&resolved).map_err(|e| format!("image {relative:?}: {e}"))?;
    Ok((STANDARD.encode(bytes), mime_type))
}

fn mime_from_extension(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "bmp" => "image/bmp",
        "avif" => "image/avif",
        _ => return None,
    })
}
