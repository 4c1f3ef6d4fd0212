//! The admin users list, searched and paged ([`crate::store::machinery::paging`]), and the
//! users' names other lists match their rows by.

use crate::store::machinery::counts::Count;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::paging::{Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::search::{Indexed, TextIndex, Via};
use crate::store::users::accounts::USER_COLUMNS;
use crate::store::users::accounts::User;
use crate::store::users::accounts::Users;

/// A user's name: username, display name, subject (other lists match rows by it).
pub(in crate::store) const USER_NAMES: TextIndex = TextIndex {
    table: "users",
    text: "LOWER(COALESCE(username, '') || ' ' || COALESCE(display_name, '') || ' ' || subject)",
    fts: "users_search",
    column: "name",
    partial: None,
};

/// A row whose `user_id` names a user whose name holds the term matches.
pub(in crate::store) const BY_USER_NAME: Via = Via { index: USER_NAMES, column: "user_id", prefix: 'u' };

/// What the admin users list searches: names, ids, issuer, role, status, kind (see `paging`).
const USER_TEXT: TextIndex = TextIndex {
    table: "users",
    text: "LOWER(COALESCE(username, '') || ' ' || COALESCE(display_name, '') || ' ' || subject || ' ' || id || ' ' || issuer || ' ' || CASE WHEN is_admin <> 0 THEN 'admin' ELSE 'user' END || ' ' || CASE WHEN disabled_at IS NULL THEN 'enabled' ELSE 'disabled' END || ' ' || CASE WHEN username IS NULL THEN 'external (oidc)' ELSE 'local account' END)",
    fts: "users_search",
    column: "text",
    partial: None,
};

impl Users<'_> {
    /// Every user, for the dashboard (bounded: [`crate::store::machinery::counts`]).
    pub(in crate::store) async fn count(self) -> StoreResult<Count> {
        self.store.capped_count("users", None, 0).await
    }

    /// The admins (the `users_admins` index).
    pub(in crate::store) async fn count_admins(self) -> StoreResult<Count> {
        self.store.capped_count("users", Some("is_admin <> 0"), 0).await
    }

    /// The disabled users.
    pub(in crate::store) async fn count_disabled(self) -> StoreResult<Count> {
        self.store.capped_count("users", Some("disabled_at IS NOT NULL"), 0).await
    }

    /// One page of users matching `search`, oldest first (the admin pages).
    pub async fn page(self, search: &Search, window: Window) -> StoreResult<Paged<User>> {
        let sql = ListSql {
            columns: USER_COLUMNS,
            from: "users",
            filter: "",
            indexed: Some(Indexed { own: USER_TEXT, via: &[], extra: Vec::new() }),
            chosen: None,
            order: "created_at, id",
            after: "(created_at, id) > ({k}, {i})",
        };
        self.store.paged(sql, search, None, window, |u: &User| Cursor::new(u.created_at, u.id.clone())).await
    }
}
