//! The admin nav: each section's page, and which one a page belongs to, so the nav marks where
//! the admin is (WAI-ARIA `aria-current`): `page` on the section's own page, `true` on a page
//! inside it (one user's page is inside Users).

/// (path, words) of each section, in the nav's order.
pub const SECTIONS: &[(&str, &str)] = &[
    ("/admin", "Dashboard"),
    ("/admin/orgs", "Organizations"),
    ("/admin/users", "Users"),
    ("/admin/grants", "Grants"),
    ("/admin/authorizations", "Authorizations"),
    ("/admin/consents", "Consents"),
    ("/admin/clients", "MCP clients"),
    ("/admin/services", "Services"),
    ("/admin/webhooks", "Webhooks"),
    ("/admin/servers", "Servers"),
    ("/admin/providers", "Providers"),
    ("/admin/audit", "Audit log"),
];

/// One link of the nav.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NavLink {
    pub href: &'static str,
    pub words: &'static str,
    /// The `aria-current` value, on the section the page is or is in.
    pub current: Option<&'static str>,
}

/// The nav as the page at `path` shows it.
pub fn links(path: &str) -> Vec<NavLink> {
    SECTIONS
        .iter()
        .map(|&(href, words)| {
            let current = if path == href {
                Some("page")
            } else if href != "/admin" && path.strip_prefix(href).is_some_and(|rest| rest.starts_with('/')) {
                Some("true")
            } else {
                None
            };
            NavLink { href, words, current }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(path: &str) -> Vec<(&'static str, &'static str)> {
        links(path).into_iter().filter_map(|l| l.current.map(|c| (l.href, c))).collect()
    }

    #[test]
    fn the_nav_marks_the_page_or_the_section_it_is_in_and_nothing_else() {
        assert_eq!(marked("/admin"), [("/admin", "page")]);
        assert_eq!(marked("/admin/users"), [("/admin/users", "page")]);
        assert_eq!(marked("/admin/users/u-1"), [("/admin/users", "true")]);
        assert_eq!(marked("/admin/services/svc_x"), [("/admin/services", "true")]);
        assert_eq!(marked("/admin/usersx"), []);
    }
}
