//! The live pages' sessions (decisions 143 and 189): what the sign-in cookie holds.
//!
//! The cookie names its token by the token's id (what token lists show; never the token's hash,
//! the token table's key), so that every poll asks whether the token still lives, and says until
//! when it is good. Its payload, `v2.<token id>.<expiry>`, is signed byte for byte with
//! HMAC-SHA256 under the server's key (`SWATH_SESSION_SECRET`, the same on every replica; random
//! per process when unset), and verified over the same bytes before anything is parsed: a cookie
//! that differs in any byte, even one writing the same number otherwise, is refused, as is an
//! expired one, and a revoked token ends its sessions at their next poll. No table of sessions:
//! any replica with the key checks a cookie.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::Arc;
use swath_application::ports::TokenId;
use uuid::Uuid;

/// How long a session lasts, in seconds (the cookie's `Max-Age` too): 12 hours.
pub const SESSION_SECONDS: i64 = 12 * 3600;

/// The shortest `SWATH_SESSION_SECRET` accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 32;

/// The version of the cookie's format, its first field.
const VERSION: &str = "v2";

/// What the signature covers besides the fields: a key used for something else one day signs
/// nothing a session would accept.
const PURPOSE: &[u8] = b"swath live-page session\0";

/// The key sessions are signed with.
#[derive(Clone)]
pub struct SessionKey(Arc<[u8]>);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

impl SessionKey {
    /// A key of this process alone: 32 random bytes.
    pub fn random() -> Self {
        use rand::RngCore;
        let mut key = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut key);
        Self(Arc::from(key.as_slice()))
    }

    /// The key of `SWATH_SESSION_SECRET` (checked for its length by the settings).
    pub fn from_secret(secret: &[u8]) -> Self {
        Self(Arc::from(secret))
    }

    /// The MAC of a cookie's payload: the exact bytes before its last `.`.
    fn mac(&self, payload: &[u8]) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC accepts any key");
        mac.update(PURPOSE);
        mac.update(payload);
        mac
    }

    /// A session of the token `token`, from `now` for [`SESSION_SECONDS`]:
    /// `v2.<token id>.<expiry, Unix seconds>.<signature of all before it, base64url>`.
    pub fn issue(&self, token: TokenId, now: DateTime<Utc>) -> String {
        let expires = now.timestamp() + SESSION_SECONDS;
        let payload = format!("{VERSION}.{}.{expires}", token.0.hyphenated());
        let tag = self.mac(payload.as_bytes()).finalize().into_bytes();
        format!("{payload}.{}", URL_SAFE_NO_PAD.encode(tag))
    }

    /// The token id of a session this key signed and that has not expired at `now`; `None` for
    /// anything else. The signature is checked first, in constant time, over the payload's
    /// bytes as they came: only then are its fields read.
    pub fn verify(&self, value: &str, now: DateTime<Utc>) -> Option<TokenId> {
        let (payload, tag) = value.rsplit_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        self.mac(payload.as_bytes()).verify_slice(&tag).ok()?;
        let mut fields = payload.split('.');
        let (Some(VERSION), Some(id), Some(expires), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return None;
        };
        let id = Uuid::try_parse(id).ok()?;
        let expires: i64 = expires.parse().ok()?;
        if now.timestamp() >= expires {
            return None;
        }
        Some(TokenId(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use swath_application::ports::hash_token;

    fn token() -> TokenId {
        TokenId(Uuid::from_u128(0x0190_abcd_ef00_7000_8000_0000_0000_0001))
    }

    fn now() -> DateTime<Utc> {
        "2026-06-01T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_session_is_good_until_it_expires_and_only_under_its_key() {
        let key = SessionKey::from_secret(&[7; 32]);
        let token = token();
        let session = key.issue(token, now());
        assert_eq!(key.verify(&session, now()), Some(token));
        let later = now() + chrono::Duration::seconds(SESSION_SECONDS - 1);
        assert_eq!(key.verify(&session, later), Some(token));
        let expired = now() + chrono::Duration::seconds(SESSION_SECONDS);
        assert_eq!(key.verify(&session, expired), None);
        assert_eq!(SessionKey::random().verify(&session, now()), None);
        // The token hash alone, as the cookie held it once, is no session.
        assert_eq!(key.verify(&hash_token("swath_token").0, now()), None);
    }

    #[test]
    fn a_changed_field_breaks_the_signature() {
        let key = SessionKey::from_secret(b"a secret of at least thirty-two bytes");
        let session = key.issue(token(), now());
        let fields: Vec<&str> = session.split('.').collect();
        let other = TokenId(Uuid::from_u128(2)).0.to_string();
        let longer = (now().timestamp() + 10 * SESSION_SECONDS).to_string();
        for forged in [
            [fields[0], &other, fields[2], fields[3]].join("."),
            [fields[0], fields[1], &longer, fields[3]].join("."),
            ["v1", fields[1], fields[2], fields[3]].join("."),
            format!("{session}."),
            session[..session.len() - 1].to_owned(),
        ] {
            assert_eq!(key.verify(&forged, now()), None, "{forged}");
        }
    }

    #[test]
    fn a_field_written_otherwise_breaks_the_signature() {
        let key = SessionKey::from_secret(&[7; 32]);
        let session = key.issue(token(), now());
        assert_eq!(key.verify(&session, now()), Some(token()));
        let (payload, tag) = session.rsplit_once('.').unwrap();
        let (head, expires) = payload.rsplit_once('.').unwrap();
        // The id in capitals parses to the same id: still another cookie.
        let upper = format!("{VERSION}.{}", token().0.to_string().to_uppercase());
        for (head, expires) in [
            (head, format!("+{expires}")),
            (head, format!("0{expires}")),
            (upper.as_str(), expires.to_owned()),
        ] {
            let forged = format!("{head}.{expires}.{tag}");
            assert_eq!(key.verify(&forged, now()), None, "{forged}");
        }
    }
}
