//! What every admin table shares: the `q` (search) and `page` parameters, checked once and
//! handed to the store (which searches, counts and pages in SQL: `store::paging`), and the page
//! that shows rows as cards (a phone is 390 px wide; a wide table is not).

use askama::Template;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::http::StatusCode;

use crate::store::paging::{Search, Window};
use crate::web::error::PageError;
use crate::web::pages::SignedIn;

/// Rows per page.
pub const PAGE_SIZE: usize = 20;
/// Longer searches are refused: nobody types more, and matching stays cheap.
pub const MAX_SEARCH_LEN: usize = 100;

#[derive(Debug, Default, serde::Deserialize)]
pub struct RawListQuery {
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    page: Option<String>,
    /// A short code an action left (see [`notice_text`]); never free text from the URL.
    #[serde(default)]
    notice: Option<String>,
}

/// A checked search and page number.
#[derive(Debug, Clone)]
pub struct ListQuery {
    /// Trimmed; empty means everything.
    pub q: String,
    /// From 1.
    pub page: usize,
    pub notice: Option<&'static str>,
}

impl ListQuery {
    pub fn parse(raw: Result<Query<RawListQuery>, QueryRejection>) -> Result<Self, PageError> {
        let Ok(Query(raw)) = raw else { return Err(bad("This address's search parameters are not valid.")) };
        let q = raw.q.unwrap_or_default().trim().to_owned();
        if q.chars().count() > MAX_SEARCH_LEN {
            return Err(bad(format!("A search is at most {MAX_SEARCH_LEN} characters; yours was longer.")));
        }
        let page = match raw.page.as_deref().map(str::trim) {
            None | Some("") => 1,
            Some(text) => match text.parse::<usize>() {
                Ok(n) if (1..=1_000_000).contains(&n) => n,
                _ => return Err(bad("A page number is a whole number from 1.")),
            },
        };
        Ok(ListQuery { q, page, notice: raw.notice.as_deref().and_then(notice_text) })
    }

    /// The search as the store runs it.
    pub fn search(&self) -> Search {
        Search::new(&self.q)
    }

    /// Which rows this page shows.
    pub fn window(&self) -> Window {
        Window::page(self.page, PAGE_SIZE)
    }
}

fn bad(message: impl Into<String>) -> PageError {
    PageError::page(
        StatusCode::BAD_REQUEST,
        "Not a valid request",
        message,
        "Go back to the list and try again; nothing was changed.",
    )
}

/// The sentences actions report after their redirect, by code.
pub fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "revoked" => "The grant was revoked at the provider and deleted.",
        "revocation_not_offered" => {
            "The grant was deleted. The provider offers no revocation, so its tokens lapse on their own."
        }
        "revocation_failed" => {
            "The grant was deleted, but the provider did not accept the revocation (or could not be reached): its tokens may work until they expire."
        }
        "token_unreadable" => {
            "The grant was deleted. Its stored token could not be opened, so nothing was sent to the provider."
        }
        "withdrawn" => "The consent was withdrawn; that client will ask again.",
        "expired" => "The authorization was expired; its link no longer works.",
        "disabled" => "The user was disabled and signed out everywhere; their tokens stop working.",
        "enabled" => "The user was enabled.",
        _ => return None,
    })
}

/// One row, shown as a card: a title, labelled values, and buttons.
#[derive(Debug, Clone)]
pub struct Card {
    pub title: String,
    pub fields: Vec<(String, String)>,
    pub actions: Vec<CardAction>,
}

/// A CSRF-protected POST button on a card.
#[derive(Debug, Clone)]
pub struct CardAction {
    pub path: String,
    pub label: String,
    /// Hidden fields besides `csrf_token`.
    pub fields: Vec<(String, String)>,
}

/// An admin list page.
#[derive(Template)]
#[template(path = "admin/table.html")]
pub struct TablePage {
    pub nav: SignedIn,
    pub title: String,
    /// The list's own path, for the search form and page links.
    pub path: String,
    pub intro: String,
    pub q: String,
    pub page: usize,
    pub pages: usize,
    pub total: usize,
    pub cards: Vec<Card>,
    pub notice: Option<&'static str>,
}

impl TablePage {
    /// Page `query.page` of a list whose matching rows the store counted (`total`) and read
    /// (`cards`, already this page's); a page past the end is refused.
    pub fn build(
        nav: SignedIn,
        title: &str,
        path: &str,
        intro: &str,
        query: &ListQuery,
        cards: Vec<Card>,
        total: i64,
    ) -> Result<Self, PageError> {
        let total = usize::try_from(total).unwrap_or(0);
        let pages = total.div_ceil(PAGE_SIZE).max(1);
        if query.page > pages {
            return Err(PageError::page(
                StatusCode::NOT_FOUND,
                "No such page",
                format!("There is no page {} of this list: it has {pages}.", query.page),
                "Go back to the list's first page.",
            ));
        }
        Ok(TablePage {
            nav,
            title: title.into(),
            path: path.into(),
            intro: intro.into(),
            q: query.q.clone(),
            page: query.page,
            pages,
            total,
            cards,
            notice: query.notice,
        })
    }

    /// `path?q=…&page=n`.
    pub fn link(&self, page: usize) -> String {
        if self.q.is_empty() {
            format!("{}?page={page}", self.path)
        } else {
            let q: String = url::form_urlencoded::byte_serialize(self.q.as_bytes()).collect();
            format!("{}?q={q}&page={page}", self.path)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(q: Option<&str>, page: Option<&str>) -> Result<ListQuery, PageError> {
        ListQuery::parse(Ok(Query(RawListQuery {
            q: q.map(str::to_owned),
            page: page.map(str::to_owned),
            notice: None,
        })))
    }

    #[test]
    fn page_numbers_are_whole_numbers_from_one_and_searches_are_bounded() {
        assert_eq!(query(None, None).unwrap().page, 1);
        assert_eq!(query(None, Some("3")).unwrap().page, 3);
        for bad in ["0", "-1", "x", "1.5", "99999999999999999999"] {
            assert!(query(None, Some(bad)).is_err(), "{bad}");
        }
        assert!(query(Some(&"a".repeat(MAX_SEARCH_LEN)), None).is_ok());
        assert!(query(Some(&"a".repeat(MAX_SEARCH_LEN + 1)), None).is_err());
        assert_eq!(query(Some(" ALI "), None).unwrap().search().pattern(), "%ali%");
        assert_eq!(
            query(None, Some("2")).unwrap().window(),
            Window { limit: PAGE_SIZE as i64, offset: PAGE_SIZE as i64 }
        );
    }

    #[test]
    fn only_known_notice_codes_show_text() {
        assert!(notice_text("revoked").is_some());
        assert!(notice_text("<script>").is_none());
    }
}
