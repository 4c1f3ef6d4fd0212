pub mod api_limits {
    pub use crate::store::token_api::UNLOCKED_FRESH;
}
pub mod consents {
    pub use crate::store::authorizations::{AllowOutcome, ConnectCompleted};
    pub use crate::store::grants::{ConsentRow, NewConsent};
}
pub mod console {
    pub use crate::store::audit::HourCount;
}
pub mod console_lists {
    pub use crate::store::audit::AuditFilter;
}
pub mod gateway_consents {
    pub use crate::store::authorizations::PairOutcome;
    pub use crate::store::gateway::NewGatewayConsent;
}
pub mod gateway_lists {
    pub use crate::store::gateway::{ListKind, ListSummary, StoredList};
}
pub mod gateway_servers {
    pub use crate::store::gateway::{GatewayAuth, GatewayServerRow, secret_seal_context};
}
pub mod keys {
    pub use crate::store::sealing::SigningKeyRow;
}
pub mod oauth_clients {
    pub use crate::store::authorization_server::OAuthClientRow;
}
pub mod oauth_codes {
    pub use crate::store::authorization_server::{NewOAuthCode, NewOAuthGrant, OAuthGrantFields};
}
pub mod request_budget {
    pub use crate::store::token_api::{Budget, most_unused};
}
pub mod sealed {
    pub use crate::store::sealing::SealedColumn;
}
pub mod services {
    pub use crate::store::token_api::{CLIENT_ID_PREFIX, NewService, ServiceRow};
}
pub mod webhook_events {
    pub use crate::store::webhooks::{AttemptOutcome, DeliveryRow, DeliveryStatus, EventType, NewEvent};
}
pub mod grant_events {}
