//! What every admin table shares: the `q` (search) and `after` (where the page starts)
//! parameters, checked once and handed to the store (which searches and pages in SQL by keyset:
//! `store::paging`), and the page that shows them: one `<table>` with a header row, which the
//! admin CSS lays out as cards below 900 px (a phone is 390 px wide; a wide table is not).

use askama::Template;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::http::StatusCode;

use super::filters::{Control, Filters};
use crate::html::{PageError, SignedIn};
use crate::store::paging::{Cursor, Search, Window};

/// Rows per page.
pub const PAGE_SIZE: usize = 20;
/// Longer searches are refused: nobody types more, and matching stays cheap.
pub const MAX_SEARCH_LEN: usize = 100;
/// Longer `after` values are refused (a cursor is a number and one or two ids).
const MAX_CURSOR_LEN: usize = 600;

#[derive(Debug, Default, serde::Deserialize)]
pub struct RawListQuery {
    #[serde(default)]
    q: Option<String>,
    /// Where the page starts, as the previous page's `Next` link gave it.
    #[serde(default)]
    after: Option<String>,
    /// A short code an action left (see [`notice_text`]); never free text from the URL.
    #[serde(default)]
    notice: Option<String>,
    /// Filters and order ([`super::filters`]), on the lists that offer them.
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    order: Option<String>,
    #[serde(default)]
    status: Option<String>,
}

/// A checked search and page start.
#[derive(Debug, Clone)]
pub struct ListQuery {
    /// Trimmed; empty means everything.
    pub q: String,
    /// `None` for the first page.
    pub after: Option<Cursor>,
    pub notice: Option<&'static str>,
    /// Filters chosen (with or without a search).
    pub filters: Filters,
}

impl ListQuery {
    pub fn parse(raw: Result<Query<RawListQuery>, QueryRejection>) -> Result<Self, PageError> {
        let Ok(Query(raw)) = raw else { return Err(bad("This address's search parameters are not valid.")) };
        let q = raw.q.unwrap_or_default().trim().to_owned();
        // A NUL ended SQLite's pattern early (`q=%00` matched every row); no one types a
        // control character into a search.
        if q.chars().any(char::is_control) {
            return Err(bad("A search cannot hold control characters (such as %00); nothing was searched."));
        }
        if q.chars().count() > MAX_SEARCH_LEN {
            return Err(bad(format!("A search is at most {MAX_SEARCH_LEN} characters; yours was longer.")));
        }
        let after = match raw.after.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => match Cursor::parse(text) {
                Some(cursor) if text.len() <= MAX_CURSOR_LEN => Some(cursor),
                _ => return Err(bad("This list position is not one the list's Next link gives.")),
            },
        };
        let filters = Filters::parse(raw.outcome.as_deref(), raw.order.as_deref(), raw.status.as_deref())
            .map_err(|name| bad(format!("This list offers no such {name}; pick one from the list's own choices.")))?;
        Ok(ListQuery { q, after, notice: raw.notice.as_deref().and_then(notice_text), filters })
    }

    /// The search as the store runs it.
    pub fn search(&self) -> Search {
        Search::new(&self.q)
    }

    /// Which rows this page shows.
    pub fn window(&self) -> Window {
        match &self.after {
            Some(cursor) => Window::after(PAGE_SIZE, cursor.clone()),
            None => Window::first(PAGE_SIZE),
        }
    }
}

fn bad(message: impl Into<String>) -> PageError {
    PageError::page(
        StatusCode::BAD_REQUEST,
        "Not a valid request",
        message,
        "Go back to the admin list and search again; nothing was changed.",
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
        "resent" => "The event was queued again; it is delivered with the same id.",
        _ => return None,
    })
}

/// One row: a title, labelled values, and buttons (a table row on a desktop, a card on a phone).
#[derive(Debug, Clone)]
pub struct Card {
    pub title: String,
    /// Where the title leads (the row's own page), when it has one.
    pub link: Option<String>,
    pub fields: Vec<Field>,
    pub actions: Vec<CardAction>,
}

/// One labelled value of a row (a cell on a desktop, a line of a card on a phone).
#[derive(Debug, Clone)]
pub struct Field {
    pub label: String,
    pub value: String,
    /// A secondary fact about the value, on a second line of the cell in smaller type: one
    /// column where the table would otherwise need two to fit 1280 px.
    pub note: Option<String>,
}

/// A CSRF-protected POST button on a card.
#[derive(Debug, Clone)]
pub struct CardAction {
    pub path: String,
    pub label: String,
    /// Hidden fields besides `csrf_token`.
    pub fields: Vec<(String, String)>,
}

/// Rows as the page draws them: the header row comes from the rows' labels (every row of a
/// list has the same ones).
#[derive(Debug, Clone)]
pub struct Rows {
    /// The element id (`rows` on the list pages).
    pub id: &'static str,
    /// The first column's header: what a row's title names.
    pub title_label: String,
    pub columns: Vec<String>,
    pub cards: Vec<Card>,
    pub has_actions: bool,
}

impl Rows {
    pub fn new(id: &'static str, title_label: &str, cards: Vec<Card>) -> Self {
        let columns = cards.first().map(|c| c.fields.iter().map(|f| f.label.clone()).collect()).unwrap_or_default();
        let has_actions = cards.iter().any(|c| !c.actions.is_empty());
        Rows { id, title_label: title_label.into(), columns, cards, has_actions }
    }
}

/// Whether a column holds identifiers (set in a monospace font, allowed to break anywhere).
pub fn is_id_column(label: &str) -> bool {
    label == "id" || label.ends_with(" id") || label == "client key"
}

/// An admin list page.
#[derive(Template)]
#[template(path = "admin/table.html")]
pub struct TablePage {
    pub nav: SignedIn,
    pub admin_nav: Vec<super::sections::NavLink>,
    pub title: String,
    /// The list's own path, for the search form and page links.
    pub path: String,
    pub intro: String,
    pub q: String,
    /// The search as the page's text shows it: control and bidi characters escaped, as stored
    /// names are ([`crate::display::safe_text`]); the search box keeps `q` itself.
    pub q_shown: String,
    /// Whether this is a later page (it links back to the first).
    pub later_page: bool,
    /// Where the next page starts, when more rows match.
    pub next: Option<String>,
    pub table: Rows,
    /// The filter and order controls this list offers (none on most).
    pub controls: Vec<Control>,
    filters: Filters,
    pub notice: Option<&'static str>,
}

/// What a list page says above its rows, and where it lives: the same for every page of it.
#[derive(Debug, Clone, Copy)]
pub struct ListHeader<'a> {
    pub title: &'a str,
    /// The list's own path, where its search form, filters and `Next` link point.
    pub path: &'a str,
    /// What the list shows, in a sentence or two.
    pub intro: &'a str,
    /// What each row's title names (the first column's header).
    pub title_label: &'a str,
}

impl TablePage {
    /// A page of a list whose rows the store read (`cards`, already this page's) and, when
    /// more match, where the next page starts.
    pub fn build(
        nav: SignedIn,
        header: ListHeader<'_>,
        query: &ListQuery,
        cards: Vec<Card>,
        next: Option<Cursor>,
    ) -> Self {
        let ListHeader { title, path, intro, title_label } = header;
        TablePage {
            nav,
            admin_nav: super::sections::links(path),
            title: title.into(),
            path: path.into(),
            intro: intro.into(),
            q: query.q.clone(),
            q_shown: crate::display::safe_text(&query.q),
            later_page: query.after.is_some(),
            next: next.map(|c| c.to_text()),
            table: Rows::new("rows", title_label, cards),
            controls: super::filters::controls(path, &query.filters),
            filters: query.filters.clone(),
            notice: query.notice,
        }
    }

    /// `path?q=…` (the first page), or with `&after=…` where `after` is given.
    pub fn link(&self, after: Option<&str>) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        if !self.q.is_empty() {
            query.append_pair("q", &self.q);
        }
        for (name, value) in self.filters.pairs() {
            query.append_pair(name, value);
        }
        if let Some(after) = after {
            query.append_pair("after", after);
        }
        let query = query.finish();
        if query.is_empty() { self.path.clone() } else { format!("{}?{query}", self.path) }
    }

    /// The filters chosen, as hidden fields of the search form (a new search keeps them).
    pub fn filter_fields(&self) -> Vec<(&'static str, &'static str)> {
        self.filters.pairs()
    }

    /// The first page's link.
    pub fn first_link(&self) -> String {
        self.link(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(q: Option<&str>, after: Option<&str>) -> Result<ListQuery, PageError> {
        ListQuery::parse(Ok(Query(RawListQuery {
            q: q.map(str::to_owned),
            after: after.map(str::to_owned),
            ..RawListQuery::default()
        })))
    }

    #[test]
    fn a_page_starts_where_a_next_link_said_and_searches_are_bounded() {
        assert_eq!(query(None, None).unwrap().window(), Window::first(PAGE_SIZE));
        assert_eq!(query(None, Some("17:u-1")).unwrap().window(), Window::after(PAGE_SIZE, Cursor::new(17, "u-1")));
        for bad in ["x", "1.5", "99999999999999999999", &format!("1:{}", "a".repeat(MAX_CURSOR_LEN))] {
            assert!(query(None, Some(bad)).is_err(), "{bad}");
        }
        assert!(query(Some(&"a".repeat(MAX_SEARCH_LEN)), None).is_ok());
        assert!(query(Some(&"a".repeat(MAX_SEARCH_LEN + 1)), None).is_err());
        assert_eq!(query(Some(" ALI "), None).unwrap().search().pattern(), Some("%ali%"));
    }

    #[test]
    fn only_known_notice_codes_show_text() {
        assert!(notice_text("revoked").is_some());
        assert!(notice_text("<script>").is_none());
    }
}
