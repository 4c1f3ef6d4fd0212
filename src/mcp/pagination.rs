//! Cursor pagination for the list methods (MCP 2025-11-25 server/utilities/pagination).
//!
//! A cursor is opaque to clients: here the base64url of `v1:<kind>:<offset>`. A cursor that
//! does not decode, names another list, or points past the end is an invalid-params error
//! (-32602), as the spec asks — except past the end of a list read anew for each page
//! ([`page_of_changing`]: `resources/list`), which may have shrunk since: there it is the end.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::model::ErrorData;

/// One page of `items` and the cursor of the next page, if any.
pub fn page<T: Clone>(
    items: &[T],
    cursor: Option<&str>,
    page_size: usize,
    kind: &str,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let offset = match cursor {
        None => 0,
        Some(cursor) => decode(cursor, kind).ok_or_else(|| ErrorData::invalid_params("invalid cursor", None))?,
    };
    if offset > items.len() || (offset == items.len() && offset != 0) {
        return Err(ErrorData::invalid_params("invalid cursor", None));
    }
    let size = page_size.max(1);
    let end = (offset + size).min(items.len());
    let next = (end < items.len()).then(|| encode(end, kind));
    Ok((items[offset..end].to_vec(), next))
}

/// [`page`] of a list read anew for each page whose length may change between pages (the
/// resources list, of which servers' parts are read per request): a well-formed cursor past
/// its end is the end of the list, not an invalid cursor.
pub fn page_of_changing<T: Clone>(
    items: &[T],
    cursor: Option<&str>,
    page_size: usize,
    kind: &str,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    match cursor.and_then(|cursor| decode(cursor, kind)) {
        Some(offset) if offset >= items.len() => Ok((Vec::new(), None)),
        _ => page(items, cursor, page_size, kind),
    }
}

fn encode(offset: usize, kind: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("v1:{kind}:{offset}"))
}

fn decode(cursor: &str, kind: &str) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let rest = text.strip_prefix("v1:")?.strip_prefix(kind)?.strip_prefix(':')?;
    rest.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_walk_the_whole_list_and_stop() {
        let items: Vec<u32> = (0..5).collect();
        let (first, next) = page(&items, None, 2, "prompts").unwrap();
        assert_eq!(first, vec![0, 1]);
        let (second, next) = page(&items, next.as_deref(), 2, "prompts").unwrap();
        assert_eq!(second, vec![2, 3]);
        let (third, next) = page(&items, next.as_deref(), 2, "prompts").unwrap();
        assert_eq!((third, next), (vec![4], None));
    }

    #[test]
    fn an_empty_list_has_one_empty_page() {
        let (items, next) = page::<u32>(&[], None, 2, "prompts").unwrap();
        assert!(items.is_empty() && next.is_none());
    }

    #[test]
    fn invalid_cursors_are_refused() {
        let items: Vec<u32> = (0..5).collect();
        for bad in ["", "nope", &encode(99, "prompts"), &encode(2, "resources"), &encode(5, "prompts")] {
            assert!(page(&items, Some(bad), 2, "prompts").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_changing_list_that_shrank_past_the_cursor_ends_and_bad_cursors_are_still_refused() {
        let items: Vec<u32> = (0..3).collect();
        let (last, next) = page_of_changing(&items, Some(&encode(5, "resources")), 2, "resources").unwrap();
        assert!(last.is_empty() && next.is_none(), "the end of the list");
        let (page2, next) = page_of_changing(&items, Some(&encode(2, "resources")), 2, "resources").unwrap();
        assert_eq!((page2, next), (vec![2], None));
        for bad in ["", "nope", &encode(1, "prompts")] {
            assert!(page_of_changing(&items, Some(bad), 2, "resources").is_err(), "{bad:?}");
        }
    }
}
