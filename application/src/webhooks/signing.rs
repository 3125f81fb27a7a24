//! Standard Webhooks 1.0 signatures, made by the specification's own Rust library
//! (`standardwebhooks`): `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, one per secret
//! that signs, separated by spaces, so that a receiver holding either secret during a rotation
//! verifies.

use chrono::{DateTime, Utc};
use swath_domain::webhook::Secret;

/// Why a delivery could not be signed: a stored secret that is not `whsec_<base64>` (never
/// made by Swath). The secret itself is never said.
#[derive(Debug, thiserror::Error)]
#[error("a webhook secret is not a valid signing key")]
pub struct SigningError;

/// The three Standard Webhooks headers of a delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedHeaders {
    pub id: String,
    pub timestamp: String,
    pub signature: String,
}

impl SignedHeaders {
    /// As header pairs, named as the specification names them.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("webhook-id", self.id.clone()),
            ("webhook-timestamp", self.timestamp.clone()),
            ("webhook-signature", self.signature.clone()),
        ]
    }
}

/// Signs `body` as message `id` at `at` with every secret given.
pub fn sign(
    id: &str,
    at: DateTime<Utc>,
    body: &[u8],
    secrets: &[&Secret],
) -> Result<SignedHeaders, SigningError> {
    let timestamp = at.timestamp();
    let mut signatures = Vec::with_capacity(secrets.len());
    for secret in secrets {
        let hook = standardwebhooks::Webhook::new(&secret.value).map_err(|_| SigningError)?;
        signatures.push(hook.sign(id, timestamp, body).map_err(|_| SigningError)?);
    }
    Ok(SignedHeaders {
        id: id.to_owned(),
        timestamp: timestamp.to_string(),
        signature: signatures.join(" "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's library verifies what we sign, with either secret of a rotation, and
    /// refuses a changed body.
    #[test]
    fn the_library_verifies_what_is_signed() {
        let a = Secret {
            value: crate::webhooks::generate_secret(),
            expires_at: None,
        };
        let b = Secret {
            value: crate::webhooks::generate_secret(),
            expires_at: None,
        };
        let now = Utc::now();
        let body = br#"{"type":"error_raised"}"#;
        let signed = sign("msg_1", now, body, &[&a, &b]).unwrap();
        assert!(signed.signature.starts_with("v1,"));
        let mut headers = http::HeaderMap::new();
        for (name, value) in signed.pairs() {
            headers.insert(name, value.parse().unwrap());
        }
        for secret in [&a, &b] {
            let hook = standardwebhooks::Webhook::new(&secret.value).unwrap();
            hook.verify(body, &headers).unwrap();
            assert!(hook.verify(b"{}", &headers).is_err());
        }
    }
}
