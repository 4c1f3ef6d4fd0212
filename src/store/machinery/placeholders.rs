//! Numbering a statement's parameters as both backends read them (`$1`, `$2`, …): the values
//! of an `IN (…)` list, and the named `{…}` parameters of the admin lists' statements
//! ([`super::paging`]). Values are always bound, never written into the SQL.

/// `$1, $2, …, $count`: the values of an `IN (…)` list.
pub(crate) fn numbered_values(count: usize) -> String {
    (1..=count).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// `sql` with each `{name}` replaced by `$n` (numbered by first appearance), and the names
/// in that order. Other braces are left alone.
pub(crate) fn numbered(sql: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(sql.len());
    let mut names: Vec<String> = Vec::new();
    let mut rest = sql;
    while let Some(open) = rest.find('{') {
        let after_open = &rest[open + 1..];
        let close = after_open.find('}');
        let name = close.map(|c| &after_open[..c]);
        match name {
            Some(name)
                if !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') =>
            {
                out.push_str(&rest[..open]);
                let n = match names.iter().position(|known| known == name) {
                    Some(i) => i + 1,
                    None => {
                        names.push(name.to_owned());
                        names.len()
                    }
                };
                out.push_str(&format!("${n}"));
                rest = &after_open[name.len() + 1..];
            }
            _ => {
                out.push_str(&rest[..=open]);
                rest = after_open;
            }
        }
    }
    out.push_str(rest);
    (out, names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_list_numbers_each_value_once_from_one() {
        assert_eq!(numbered_values(1), "$1");
        assert_eq!(numbered_values(3), "$1, $2, $3");
        assert_eq!(numbered_values(0), "");
    }

    #[test]
    fn named_parameters_are_numbered_by_first_appearance() {
        let (sql, names) = numbered("a = {q} OR b = {q} AND (c, d) < ({k}, {i}) LIMIT {limit} {} {Not}");
        assert_eq!(sql, "a = $1 OR b = $1 AND (c, d) < ($2, $3) LIMIT $4 {} {Not}");
        assert_eq!(names, vec!["q", "k", "i", "limit"]);
    }
}
