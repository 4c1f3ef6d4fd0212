//! The broker's own questions: which scopes to request, which of several accounts to use, and
//! whether to really disconnect. Each is a small form built from [`super::schema`]; none asks
//! for anything secret (credentials only ever go through URL mode to our own pages).

use rmcp::model::CallToolResult;

use super::ask::AskError;
use super::content::Answers;
use super::field::{Choice, Field};
use crate::broker::connections::ConnectionStatus;
use crate::config::ProviderConfig;
use crate::domain::Scopes;
use crate::mcp::failure::tool_failed;
use crate::mcp::results::{Unfinished, error_result};
use crate::store::grants::GrantRow;

pub const ACCOUNT: &str = "account";
pub const SCOPES: &str = "scopes";
pub const CONFIRM: &str = "confirm";

/// The scopes a provider offers, with what each allows, for the scope question
/// ([`crate::providers::scopes::offered`]: its `available_scopes` and defaults). A provider whose
/// scopes are open offers no list to choose from.
pub fn available_scopes(provider: &ProviderConfig) -> Vec<Choice> {
    if provider.open_scopes {
        return Vec::new();
    }
    crate::providers::scopes::offered(provider)
        .into_iter()
        .map(|(value, description)| {
            let title = match description {
                Some(description) => format!("{value} — {}", lowercase_first(&description)),
                None => value.clone(),
            };
            Choice::titled(&value, &title)
        })
        .collect()
}

/// "See your notes" → "see your notes", to follow a dash.
fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Whether there is a choice to offer beyond the provider's default scopes.
pub fn offers_more_than_defaults(provider: &ProviderConfig) -> bool {
    available_scopes(provider).iter().any(|c| !provider.default_scopes.iter().any(|d| d == c.value))
}

/// A multi-select over what the provider offers, `preselected` ticked.
pub fn scopes_field(provider: &ProviderConfig, preselected: &Scopes) -> Field {
    let options = available_scopes(provider);
    let ticked: Vec<&str> =
        options.iter().map(|o| o.value.as_str()).filter(|v| preselected.iter().any(|p| p == *v)).collect();
    let mut field = Field::many_of(SCOPES, options.clone())
        .title("Access to request")
        .description(format!("What tools may do at {} on your behalf.", provider.display_name))
        .items(Some(1), None)
        .required();
    if !ticked.is_empty() {
        field = field.default(ticked);
    }
    field
}

/// A checkbox, ticked: accepting the form is the confirmation; unticking says no.
pub fn confirm_field() -> Field {
    Field::boolean(CONFIRM)
        .title("Yes, disconnect")
        .description("The broker revokes its access at the provider and forgets this account.")
        .default(true)
}

/// An account as the `account` argument names it: the provider's label, or "" when the
/// provider gave none.
pub fn account_name(grant: &GrantRow) -> &str {
    grant.account_label.as_deref().unwrap_or("")
}

/// An account as shown to people: “work”, or “(unnamed)”.
pub fn account_shown(grant: &GrantRow) -> String {
    match grant.account_label.as_deref() {
        Some(label) => format!("“{label}”"),
        None => "(unnamed)".to_owned(),
    }
}

/// “home”, “work” — for messages that ask the caller to name one.
pub fn list_accounts(grants: &[GrantRow]) -> String {
    grants.iter().map(account_shown).collect::<Vec<_>>().join(", ")
}

/// What an answer to the account question picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Picked {
    /// `grants[i]`.
    Existing(usize),
    /// Connect another account (offered by `connect_account` only).
    New,
}

/// The account question: a titled single-select over `grants` (plus "another account" when
/// `offer_new`), `default` pre-selected. Option values are the account names, made unique
/// against the two placeholders.
pub struct AccountQuestion {
    pub field: Field,
    values: Vec<(String, Picked)>,
}

impl AccountQuestion {
    pub fn new(grants: &[GrantRow], offer_new: bool, default: Option<usize>, provider: &ProviderConfig) -> Self {
        let mut values: Vec<(String, Picked)> = Vec::new();
        let mut options = Vec::new();
        let unique = |mut value: String, taken: &[(String, Picked)]| {
            while value.is_empty() || taken.iter().any(|(v, _)| *v == value) {
                value.push('+');
            }
            value
        };
        for (i, grant) in grants.iter().enumerate() {
            let value = unique(account_name(grant).to_owned(), &values);
            let mut title =
                format!("{} — {}", account_shown(grant), grant.scopes.iter().collect::<Vec<_>>().join(", "));
            if ConnectionStatus::of(Some(grant)) != ConnectionStatus::Connected {
                title.push_str(" (needs reconnecting)");
            }
            options.push(Choice::titled(value.clone(), title));
            values.push((value, Picked::Existing(i)));
        }
        if offer_new {
            let value = unique("+another".to_owned(), &values);
            options.push(Choice::titled(value.clone(), format!("Another {} account", provider.display_name)));
            values.push((value, Picked::New));
        }
        let mut field = Field::one_of(ACCOUNT, options).title("Account").required();
        if let Some((value, _)) = default.and_then(|i| values.get(i)) {
            field = field.default(value.clone());
        }
        Self { field, values }
    }

    /// The account picked in an accepted, validated answer.
    pub fn picked(&self, answers: &Answers) -> Option<Picked> {
        let chosen = answers.choice(ACCOUNT)?;
        self.values.iter().find(|(v, _)| v == chosen).map(|(_, p)| *p)
    }
}

/// The most recently updated grant: the default choice.
pub fn most_recent(grants: &[GrantRow]) -> Option<usize> {
    grants.iter().enumerate().max_by_key(|(_, g)| (g.updated_at, g.version)).map(|(i, _)| i)
}

/// The tool result when a question got no usable answer; `unchanged` says what did not happen.
pub fn no_answer(error: AskError, unchanged: &str) -> Result<CallToolResult, Unfinished> {
    match error {
        AskError::InputRequired(result) => Err(Unfinished::InputRequired(result)),
        AskError::Schema(e) => Err(tool_failed(e).into()),
        AskError::Invalid(e) => Ok(error_result(format!("Your answer could not be used: {e}. {unchanged}"))),
        AskError::TimedOut => Ok(error_result(format!("No answer to the question in time. {unchanged}"))),
        AskError::Failed(why) => {
            Ok(error_result(format!("Your client could not show the question ({why}). {unchanged}")))
        }
        AskError::Unsupported => Ok(error_result(format!("Your client cannot answer questions. {unchanged}"))),
        AskError::Stopping => Ok(error_result(format!(
            "The broker is restarting, so the question was withdrawn. {unchanged} Call again."
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ProviderId;
    use crate::mcp::forms::FormSchema;
    use crate::store::grants::GrantStatus;

    fn provider(id: &str) -> ProviderConfig {
        let url = |path: &str| url::Url::parse(&format!("https://provider.example{path}")).unwrap();
        ProviderConfig {
            id: ProviderId::parse(id).unwrap(),
            display_name: "Demo Provider".into(),
            authorization_url: url("/authorize"),
            token_url: url("/token"),
            client_id: "client".into(),
            client_secret: None,
            default_scopes: Scopes::parse(["profile", "notes:read"]).unwrap(),
            api_base_url: url("/api/"),
            revocation_url: None,
            userinfo_url: None,
            token_auth_method: Default::default(),
            extra_authorize_params: Default::default(),
            issuer: None,
            // Only the demo provider lists scopes beyond its defaults here.
            scope_descriptions: if id == "demo" {
                [
                    ("profile", "See your account name"),
                    ("notes:read", "Read your notes"),
                    ("notes:write", "Create notes"),
                ]
                .map(|(s, d)| (s.to_owned(), d.to_owned()))
                .into()
            } else {
                Default::default()
            },
            refresh_url: None,
            scope_separator: " ".into(),
            scope_param: "scope".into(),
            pkce_required: false,
            open_scopes: false,
            scope_aliases: Default::default(),
            scopes_not_returned: Scopes::default(),
            account_id_field: None,
            account_label_field: None,
            token_path: None,
            api_base_from_token: None,
            api_base_domains: Vec::new(),
            user_agent: None,
            api_headers: Vec::new(),
            refresh_margin: None,
            catalogue: None,
            api_key: None,
            shared_with_organizations: true,
            source: None,
        }
    }

    fn grant(label: Option<&str>, updated_at: i64) -> GrantRow {
        GrantRow {
            id: format!("g_{}", label.unwrap_or("none")),
            user_id: "u".into(),
            provider: "demo".into(),
            account_label: label.map(str::to_owned),
            scopes: Scopes::parse(["profile"]).unwrap(),
            access_token_sealed: Vec::new(),
            refresh_token_sealed: None,
            key_id: "k".into(),
            expires_at: None,
            issued_at: None,
            status: GrantStatus::Active,
            version: 1,
            refresh_lease_until: None,
            refresh_gate: Default::default(),
            created_at: 0,
            updated_at,
            organization: crate::domain::OrganizationId::default_organization(),
            app_id: None,
        }
    }

    #[test]
    fn the_brokers_questions_are_valid_forms() {
        let demo = provider("demo");
        let grants = [grant(Some("home"), 5), grant(Some("work"), 9), grant(None, 1)];
        let accounts = AccountQuestion::new(&grants, true, most_recent(&grants), &demo);
        let form =
            FormSchema::new([accounts.field.clone(), scopes_field(&demo, &demo.default_scopes), confirm_field()])
                .unwrap();
        let wire = serde_json::to_value(form.to_rmcp().unwrap()).unwrap();
        let options = &wire["properties"][ACCOUNT]["oneOf"];
        assert_eq!(options.as_array().unwrap().len(), 4, "three accounts and “another”: {options}");
        assert_eq!(wire["properties"][ACCOUNT]["default"], "work", "the most recent account is pre-selected");
        assert_eq!(wire["properties"][SCOPES]["default"], serde_json::json!(["notes:read", "profile"]));
        assert_eq!(wire["properties"][CONFIRM]["default"], true);
        // Every option value maps back, the unnamed account and "another" included.
        for (i, option) in options.as_array().unwrap().iter().enumerate() {
            let answers =
                form.validate(Some(&serde_json::json!({ACCOUNT: option["const"], SCOPES: ["profile"]}))).unwrap();
            let expected = if i < 3 { Picked::Existing(i) } else { Picked::New };
            assert_eq!(accounts.picked(&answers), Some(expected), "{option}");
        }
    }

    #[test]
    fn only_providers_with_a_scope_list_get_the_scope_question() {
        assert!(offers_more_than_defaults(&provider("demo")));
        assert!(!offers_more_than_defaults(&provider("github")));
    }
}
