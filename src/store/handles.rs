//! Which handle answers for which tables: every table is read and written through its room's
//! handle, borrowed from the store (`store.grants().for_user(…)`), so `Store` itself holds only
//! the machinery and these accessors. A handle is where a query that must be scoped (to an
//! organization, say) takes what scopes it, once for the whole table.

use crate::domain::OrganizationId;
use crate::store::audit::console::Console;
use crate::store::audit::log::Audit;
use crate::store::authorization_server::clients::OAuthClients;
use crate::store::authorization_server::grants::OAuthGrants;
use crate::store::authorizations::row::Authorizations;
use crate::store::demo::tokens::Demo;
use crate::store::gateway::consents::GatewayConsents;
use crate::store::gateway::lists::GatewayLists;
use crate::store::gateway::servers::GatewayServers;
use crate::store::grants::consents::Consents;
use crate::store::grants::row::Grants;
use crate::store::machinery::store::Store;
use crate::store::organizations::orgs::{InOrg, Organizations};
use crate::store::request_states::RequestStates;
use crate::store::sealing::inventory::Sealed;
use crate::store::sealing::signing_keys::SigningKeys;
use crate::store::signals::Signals;
use crate::store::throttle::Throttle;
use crate::store::token_api::audit_queue::AuditQueue;
use crate::store::token_api::budget::RequestBudgets;
use crate::store::token_api::limits::ApiLimits;
use crate::store::token_api::services::Services;
use crate::store::users::accounts::Users;
use crate::store::users::sessions::BrowserSessions;
use crate::store::webhooks::endpoints::Webhooks;
use crate::store::webhooks::outbox::WebhookEvents;

impl Store {
    pub fn organizations(&self) -> Organizations<'_> {
        Organizations { store: self }
    }

    /// One organization's rooms: what is reached through it reads and writes that
    /// organization's rows only.
    pub fn in_org<'s>(&'s self, org: &'s OrganizationId) -> InOrg<'s> {
        InOrg { store: self, org }
    }

    pub fn users(&self) -> Users<'_> {
        Users { store: self }
    }

    pub fn browser_sessions(&self) -> BrowserSessions<'_> {
        BrowserSessions { store: self }
    }

    pub fn grants(&self) -> Grants<'_> {
        Grants { store: self }
    }

    pub fn consents(&self) -> Consents<'_> {
        Consents { store: self }
    }

    pub fn authorizations(&self) -> Authorizations<'_> {
        Authorizations { store: self }
    }

    pub fn oauth_clients(&self) -> OAuthClients<'_> {
        OAuthClients { store: self }
    }

    pub fn oauth_grants(&self) -> OAuthGrants<'_> {
        OAuthGrants { store: self }
    }

    pub fn services(&self) -> Services<'_> {
        Services { store: self }
    }

    pub fn api_limits(&self) -> ApiLimits<'_> {
        ApiLimits { store: self }
    }

    pub fn request_budgets(&self) -> RequestBudgets<'_> {
        RequestBudgets { store: self }
    }

    pub fn audit_queue(&self) -> AuditQueue<'_> {
        AuditQueue { store: self }
    }

    pub fn webhooks(&self) -> Webhooks<'_> {
        Webhooks { store: self }
    }

    pub fn webhook_events(&self) -> WebhookEvents<'_> {
        WebhookEvents { store: self }
    }

    pub fn gateway_servers(&self) -> GatewayServers<'_> {
        GatewayServers { store: self }
    }

    pub fn gateway_lists(&self) -> GatewayLists<'_> {
        GatewayLists { store: self }
    }

    pub fn gateway_consents(&self) -> GatewayConsents<'_> {
        GatewayConsents { store: self }
    }

    pub fn audit(&self) -> Audit<'_> {
        Audit { store: self }
    }

    pub fn console(&self) -> Console<'_> {
        Console { store: self }
    }

    pub fn signing_keys(&self) -> SigningKeys<'_> {
        SigningKeys { store: self }
    }

    pub fn sealed(&self) -> Sealed<'_> {
        Sealed { store: self }
    }

    pub fn demo(&self) -> Demo<'_> {
        Demo { store: self }
    }

    pub fn signals(&self) -> Signals<'_> {
        Signals { store: self }
    }

    pub fn request_states(&self) -> RequestStates<'_> {
        RequestStates { store: self }
    }

    pub fn throttle(&self) -> Throttle<'_> {
        Throttle { store: self }
    }
}
