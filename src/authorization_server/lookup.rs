//! Finding the client a `client_id` names: a client ID metadata document when it is an https
//! URL ([`super::client_metadata_document`]), else a client registered through RFC 7591.

use super::client::Client;
use super::client_metadata_document::{DocumentCache, DocumentError, is_document_client_id};
use crate::state::AppState;
use crate::store::StoreError;

#[derive(Debug)]
pub enum LookupError {
    /// No such registered client.
    Unknown,
    /// A metadata-document client whose document could not be used.
    Document(DocumentError),
    Store(StoreError),
}

/// The client named by `client_id`: a metadata document if it is an https URL, else a
/// registered client.
pub async fn find(state: &AppState, documents: &DocumentCache, client_id: &str) -> Result<Client, LookupError> {
    if is_document_client_id(client_id) {
        return documents.resolve(state, client_id).await.map_err(LookupError::Document);
    }
    Client::registered(state, client_id).await.map_err(LookupError::Store)?.ok_or(LookupError::Unknown)
}
