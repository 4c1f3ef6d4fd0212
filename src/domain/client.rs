//! Who a client is: the identity consents are recorded under, and how a registered client
//! authenticates. Plain values: the store keeps them, identity and the authorization server
//! establish them, the faces show them.

use crate::display::ClientName;

/// A registered tool server's client id is this prefix and its name (`admin services add`).
pub const SERVICE_CLIENT_ID_PREFIX: &str = "svc_";

/// Which MCP client a bearer token was issued to, as the token itself says (never the
/// self-reported `clientInfo`, which any client can fill in). MCP security best practices
/// §Confused deputy: consent to use a user's connection is recorded per client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientIdentity {
    /// An OAuth client: registered with the broker's authorization server (the token's
    /// `client_id`), or known to the OIDC issuer (`client_id`, `azp`, `cid` or `appid`).
    OAuthClient(String),
    /// A token an operator issued with `oauth-broker admin tokens issue`, with its `--client`
    /// label if one was given; every unlabelled token of a user counts as one client.
    IssuedToken(Option<String>),
    /// An OIDC access token that names no client: all such tokens of a user count as one client.
    Unidentified,
    /// A registered tool server using the token API (`admin services add`), by its client id
    /// `svc_<name>` ([`SERVICE_CLIENT_ID_PREFIX`]).
    Service(String),
}

impl ClientIdentity {
    /// The key consents are stored under. The prefixes keep the kinds apart, so a client id
    /// can never pass for an operator's label.
    pub fn key(&self) -> String {
        match self {
            ClientIdentity::OAuthClient(id) => format!("client:{id}"),
            ClientIdentity::IssuedToken(label) => format!("token:{}", label.as_deref().unwrap_or("")),
            ClientIdentity::Unidentified => "unidentified".into(),
            ClientIdentity::Service(id) => format!("service:{id}"),
        }
    }

    /// The identity a [`ClientIdentity::key`] was made from.
    pub fn from_key(key: &str) -> Self {
        if let Some(id) = key.strip_prefix("client:") {
            ClientIdentity::OAuthClient(id.to_owned())
        } else if let Some(label) = key.strip_prefix("token:") {
            ClientIdentity::IssuedToken(Some(label.to_owned()).filter(|l| !l.is_empty()))
        } else if let Some(id) = key.strip_prefix("service:") {
            ClientIdentity::Service(id.to_owned())
        } else {
            ClientIdentity::Unidentified
        }
    }

    /// How pages name it when nothing better is known (the consent decision,
    /// `src/broker/consent.rs`, has the name an OAuth client registered): one [`ClientName`]
    /// shape for every kind, so a person reads "who" first and "what kind of name" second.
    pub fn name(&self) -> ClientName {
        match self {
            ClientIdentity::OAuthClient(id) => ClientName::new("Unnamed app", format!("client id {id}")),
            ClientIdentity::IssuedToken(Some(label)) => {
                ClientName::new(label, "a program an operator issued you a token for")
            }
            ClientIdentity::IssuedToken(None) => {
                ClientName::new("Unnamed program", "an operator issued you a token without naming the program")
            }
            ClientIdentity::Unidentified => {
                ClientName::new("Unnamed app", "your identity provider did not say which app")
            }
            ClientIdentity::Service(id) => ClientName::new(
                id.strip_prefix(SERVICE_CLIENT_ID_PREFIX).unwrap_or(id),
                "a tool server an operator registered",
            ),
        }
    }
}

/// RFC 7591 §2 `token_endpoint_auth_method`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// A public client: identified by `client_id` alone; PKCE protects its codes.
    None,
    ClientSecretBasic,
    ClientSecretPost,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::ClientSecretBasic => "client_secret_basic",
            Self::ClientSecretPost => "client_secret_post",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "none" => Self::None,
            "client_secret_basic" => Self::ClientSecretBasic,
            "client_secret_post" => Self::ClientSecretPost,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::ClientIdentity;

    #[test]
    fn client_keys_round_trip_and_keep_kinds_apart() {
        for client in [
            ClientIdentity::OAuthClient("abc".into()),
            ClientIdentity::OAuthClient("https://app.example/client.json".into()),
            ClientIdentity::IssuedToken(None),
            ClientIdentity::IssuedToken(Some("ci".into())),
            ClientIdentity::Unidentified,
            ClientIdentity::Service("svc_notes".into()),
        ] {
            assert_eq!(ClientIdentity::from_key(&client.key()), client);
        }
        assert_eq!(ClientIdentity::Service("svc_notes".into()).key(), "service:svc_notes");
        // A client id that looks like a service stays a client id.
        assert_ne!(
            ClientIdentity::OAuthClient("service:svc_notes".into()).key(),
            ClientIdentity::Service("svc_notes".into()).key()
        );
        // A client id that looks like a token label stays a client id.
        assert_ne!(
            ClientIdentity::OAuthClient("token:ci".into()).key(),
            ClientIdentity::IssuedToken(Some("ci".into())).key()
        );
    }

    #[test]
    fn every_kind_of_client_is_named_the_same_way() {
        assert_eq!(
            ClientIdentity::Service("svc_notes".into()).name().to_string(),
            "notes (a tool server an operator registered)"
        );
        assert_eq!(
            ClientIdentity::IssuedToken(Some("demo_client".into())).name().to_string(),
            "demo_client (a program an operator issued you a token for)"
        );
        assert_eq!(ClientIdentity::OAuthClient("c1".into()).name().to_string(), "Unnamed app (client id c1)");
        // A label is someone's choice too: shown, never obeyed.
        assert_eq!(ClientIdentity::IssuedToken(Some("a\u{202E}b".into())).name().name, "a[U+202E]b");
    }
}
