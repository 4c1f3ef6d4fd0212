//! One delivery attempt: sign, POST, and record what the receiver said.

use super::deliveries::Deliveries;
use super::endpoint;
use super::signing::{WebhookSecret, signature_header};
use crate::store::audit::{Actor, AuditEvent, Outcome};
use crate::store::webhooks::WebhookRow;
use crate::store::webhooks::{AttemptOutcome, DeliveryRow};

/// The first retry waits this long; each next one twice as long, up to [`RETRY_MAX_SECONDS`].
pub const RETRY_BASE_SECONDS: i64 = 5;
pub const RETRY_MAX_SECONDS: i64 = 3600;

/// Seconds before the next attempt after the `attempts`-th failed one (1 for the first), with
/// `jitter` in [0, 1): up to half as long again, so receivers that come back are not hit by
/// every instance's retries at once.
pub fn retry_delay(attempts: i64, jitter: f64) -> i64 {
    let exponent = u32::try_from(attempts.saturating_sub(1).clamp(0, 20)).unwrap_or(20);
    let base = RETRY_BASE_SECONDS.saturating_mul(1_i64 << exponent).min(RETRY_MAX_SECONDS);
    let spread = (base as f64 * 0.5 * jitter.clamp(0.0, 1.0)) as i64;
    (base + spread).min(RETRY_MAX_SECONDS)
}

/// What one attempt met.
enum Answer {
    Delivered,
    Gone,
    Failed(String),
}

pub(super) async fn attempt(deliveries: &Deliveries, row: DeliveryRow, version: i64) {
    let store = &deliveries.store;
    let webhook = match store.webhooks().by_service(&row.service_id).await {
        Ok(webhook) => webhook,
        Err(error) => {
            tracing::warn!(%error, "could not read a webhook; the attempt waits for its lease to lapse");
            return;
        }
    };
    let answer = match &webhook {
        None => Answer::Failed("the service has no webhook any more".into()),
        Some(webhook) if webhook.disabled_at.is_some() => Answer::Failed("the webhook is disabled".into()),
        Some(webhook) => post(deliveries, webhook, &row).await,
    };
    let now = deliveries.clock.now();
    let outcome = match answer {
        Answer::Delivered => AttemptOutcome::Delivered,
        Answer::Gone => {
            disable(deliveries, &row.service_id, now).await;
            AttemptOutcome::Dead { error: "the receiver answered 410 Gone".into() }
        }
        Answer::Failed(error) => {
            let window = i64::try_from(deliveries.settings.retry_window.as_secs()).unwrap_or(i64::MAX / 4);
            let deadline = row.created_at.saturating_add(window);
            if now >= deadline || webhook.as_ref().is_none_or(|w| w.disabled_at.is_some()) {
                AttemptOutcome::Dead { error }
            } else {
                let at = (now + retry_delay(row.attempts + 1, rand::random::<f64>())).min(deadline);
                AttemptOutcome::Retry { at, error }
            }
        }
    };
    if let AttemptOutcome::Dead { error } = &outcome {
        tracing::warn!(event = %row.event_id, service = %row.service_id, %error, "webhook event dead-lettered");
    }
    if let Err(error) = store.webhook_events().finish(row.seq, version, &deliveries.holder, &outcome, now).await {
        // The lease lapses and the attempt is made again: at least once.
        tracing::warn!(%error, event = %row.event_id, "could not record a webhook attempt");
    }
}

async fn post(deliveries: &Deliveries, webhook: &WebhookRow, row: &DeliveryRow) -> Answer {
    let url = match endpoint::check(&webhook.url, &deliveries.settings) {
        Ok(url) => url,
        Err(error) => return Answer::Failed(error.to_string()),
    };
    let now = deliveries.clock.now();
    let mut secrets = Vec::new();
    match WebhookSecret::open(&deliveries.sealer, &webhook.secret_sealed, &webhook.service_id) {
        Ok(secret) => secrets.push(secret),
        Err(error) => return Answer::Failed(format!("the signing secret could not be opened: {error}")),
    }
    if let (Some(sealed), Some(until)) = (&webhook.previous_secret_sealed, webhook.previous_until)
        && now < until
        && let Ok(previous) = WebhookSecret::open(&deliveries.sealer, sealed, &webhook.service_id)
    {
        secrets.push(previous);
    }
    let Some(signature) = signature_header(&secrets, &row.event_id, now, &row.payload) else {
        return Answer::Failed("the signing secret is malformed".into());
    };
    let sent = deliveries
        .http
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", &row.event_id)
        .header("webhook-timestamp", now.to_string())
        .header("webhook-signature", signature)
        .body(row.payload.clone())
        .send()
        .await;
    match sent {
        Ok(response) if response.status().is_success() => Answer::Delivered,
        Ok(response) if response.status() == reqwest::StatusCode::GONE => Answer::Gone,
        Ok(response) => Answer::Failed(format!("the receiver answered {}", response.status().as_u16())),
        Err(error) if error.is_timeout() => Answer::Failed("the receiver did not answer in time".into()),
        Err(error) if error.is_connect() => Answer::Failed("could not connect to the receiver".into()),
        Err(_) => Answer::Failed("the request to the receiver failed".into()),
    }
}

async fn disable(deliveries: &Deliveries, service_id: &str, now: i64) {
    match deliveries.store.webhooks().disable(service_id, now).await {
        Ok(true) => {
            tracing::warn!(service = service_id, "the webhook receiver answered 410 Gone; the webhook is disabled");
            let detail = format!("service={service_id} reason=receiver_answered_410");
            let event = AuditEvent::new(Actor::Broker, "webhook.disabled", None)
                .detail(Some(&detail))
                .outcome(Outcome::Failure);
            if let Err(error) = deliveries.store.audit().record(now, event).await {
                tracing::warn!(%error, "could not audit a disabled webhook");
            }
        }
        Ok(false) => {}
        Err(error) => tracing::warn!(%error, "could not disable a webhook that answered 410"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_from_five_seconds_with_jitter_up_to_an_hour() {
        assert_eq!([1, 2, 3, 4].map(|n| retry_delay(n, 0.0)), [5, 10, 20, 40]);
        assert_eq!(retry_delay(2, 0.99), 14, "up to half again");
        assert_eq!(retry_delay(30, 0.0), 3600);
        assert_eq!(retry_delay(i64::MAX, 0.99), 3600, "no overflow");
    }
}
