//! The form controls above a list that filter it or change its order, each mapped
//! to an indexed predicate in the store: the audit log by outcome, newest or oldest first
//! (`store::audit::lists`); authorizations by status as shown (`store::authorizations::list`). A filter combines with the
//! search (`q`): the search narrows by its index, the filter keeps the rows it admits.

use crate::store::audit::Outcome;
use crate::store::{audit::AuditFilter, authorizations::AUTHORIZATION_STATUSES};

/// A checked filter choice, from the list's query parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    pub outcome: Option<Outcome>,
    pub oldest_first: bool,
    /// An authorization status, as the list shows it.
    pub status: Option<&'static str>,
}

impl Filters {
    /// The parameters as the address gives them; `Err` names the one that is not valid.
    pub fn parse(outcome: Option<&str>, order: Option<&str>, status: Option<&str>) -> Result<Self, &'static str> {
        let outcome = match outcome.unwrap_or("") {
            "" => None,
            "success" => Some(Outcome::Success),
            "failure" => Some(Outcome::Failure),
            "refused" => Some(Outcome::Refused),
            _ => return Err("outcome"),
        };
        let oldest_first = match order.unwrap_or("") {
            "" | "newest" => false,
            "oldest" => true,
            _ => return Err("order"),
        };
        let status = match status.unwrap_or("") {
            "" => None,
            s => Some(*AUTHORIZATION_STATUSES.iter().find(|known| **known == s).ok_or("status")?),
        };
        Ok(Filters { outcome, oldest_first, status })
    }

    pub fn is_set(&self) -> bool {
        *self != Filters::default()
    }

    /// The audit log's part, as the store takes it.
    pub fn audit(&self) -> AuditFilter {
        AuditFilter { outcome: self.outcome, oldest_first: self.oldest_first }
    }

    /// The parameters that carry these filters to the next page.
    pub fn pairs(&self) -> Vec<(&'static str, &'static str)> {
        let mut pairs = Vec::new();
        if let Some(outcome) = self.outcome {
            pairs.push(("outcome", outcome.as_str()));
        }
        if self.oldest_first {
            pairs.push(("order", "oldest"));
        }
        if let Some(status) = self.status {
            pairs.push(("status", status));
        }
        pairs
    }
}

/// One `<select>`: its parameter, label and (value, words, selected) options.
#[derive(Debug, Clone)]
pub struct Control {
    pub name: &'static str,
    pub label: &'static str,
    pub options: Vec<(&'static str, &'static str, bool)>,
}

/// The controls the list at `path` offers, showing `chosen`.
pub fn controls(path: &str, chosen: &Filters) -> Vec<Control> {
    match path {
        "/admin/audit" => vec![
            Control {
                name: "outcome",
                label: "Outcome",
                options: [("", "any"), ("success", "success"), ("failure", "failure"), ("refused", "refused")]
                    .into_iter()
                    .map(|(v, w)| (v, w, chosen.outcome.map_or("", Outcome::as_str) == v))
                    .collect(),
            },
            Control {
                name: "order",
                label: "Order",
                options: vec![
                    ("newest", "newest first", !chosen.oldest_first),
                    ("oldest", "oldest first", chosen.oldest_first),
                ],
            },
        ],
        "/admin/authorizations" => vec![Control {
            name: "status",
            label: "Status",
            options: std::iter::once(("", "any", chosen.status.is_none()))
                .chain(AUTHORIZATION_STATUSES.iter().map(|s| (*s, *s, chosen.status == Some(*s))))
                .collect(),
        }],
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_choices_are_accepted_and_carried_to_the_next_page() {
        let f = Filters::parse(Some("refused"), Some("oldest"), None).unwrap();
        assert_eq!(f.pairs(), [("outcome", "refused"), ("order", "oldest")]);
        assert!(!Filters::parse(None, Some("newest"), Some("")).unwrap().is_set());
        assert_eq!(Filters::parse(Some("x"), None, None), Err("outcome"));
        assert_eq!(Filters::parse(None, Some("random"), None), Err("order"));
        assert_eq!(Filters::parse(None, None, Some("completed'--")), Err("status"));
        let c = controls("/admin/authorizations", &Filters::parse(None, None, Some("failed")).unwrap());
        assert!(c[0].options.iter().any(|(v, _, selected)| *v == "failed" && *selected));
        assert!(controls("/admin/users", &Filters::default()).is_empty());
    }
}
