//! The live pages' sessions (decision 143, which supersedes 46): what the sign-in cookie holds.
//!
//! The cookie names its token by the token's hash (how the token store finds it, so that every
//! poll asks whether the token still lives) and says until when it is good, and both are signed
//! with HMAC-SHA256 under the server's key (`SWATH_SESSION_SECRET`, the same on every replica;
//! random per process when unset). A value read from the token table is therefore worth nothing
//! without the key, a changed byte or an expired session is refused, and a revoked token ends its
//! sessions at their next poll. No table of sessions: any replica with the key checks a cookie.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::Arc;
use swath_application::ports::TokenHash;

/// How long a session lasts, in seconds (the cookie's `Max-Age` too): 12 hours.
pub const SESSION_SECONDS: i64 = 12 * 3600;

/// The shortest `SWATH_SESSION_SECRET` accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 32;

/// The version of the cookie's format, its first field.
const VERSION: &str = "v1";

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

    fn mac(&self, hash: &str, expires: i64) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC accepts any key");
        mac.update(PURPOSE);
        mac.update(VERSION.as_bytes());
        mac.update(b".");
        mac.update(hash.as_bytes());
        mac.update(b".");
        mac.update(expires.to_string().as_bytes());
        mac
    }

    /// A session of the token whose hash is `token`, from `now` for [`SESSION_SECONDS`]:
    /// `v1.<hash>.<expiry, Unix seconds>.<signature, base64url>`.
    pub fn issue(&self, token: &TokenHash, now: DateTime<Utc>) -> String {
        let expires = now.timestamp() + SESSION_SECONDS;
        let tag = self.mac(&token.0, expires).finalize().into_bytes();
        format!(
            "{VERSION}.{}.{expires}.{}",
            token.0,
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// The token hash of a session this key signed and that has not expired at `now`; `None`
    /// for anything else. The signature is compared in constant time.
    pub fn verify(&self, value: &str, now: DateTime<Utc>) -> Option<TokenHash> {
        let mut fields = value.split('.');
        let (Some(VERSION), Some(hash), Some(expires), Some(tag), None) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            return None;
        };
        let is_hash = hash.len() == 64
            && hash
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !is_hash {
            return None;
        }
        let expires: i64 = expires.parse().ok()?;
        if now.timestamp() >= expires {
            return None;
        }
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        self.mac(hash, expires).verify_slice(&tag).ok()?;
        Some(TokenHash(hash.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use swath_application::ports::hash_token;

    fn now() -> DateTime<Utc> {
        "2026-06-01T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_session_is_good_until_it_expires_and_only_under_its_key() {
        let key = SessionKey::from_secret(&[7; 32]);
        let token = hash_token("swath_token");
        let session = key.issue(&token, now());
        assert_eq!(key.verify(&session, now()), Some(token.clone()));
        let later = now() + chrono::Duration::seconds(SESSION_SECONDS - 1);
        assert_eq!(key.verify(&session, later), Some(token.clone()));
        let expired = now() + chrono::Duration::seconds(SESSION_SECONDS);
        assert_eq!(key.verify(&session, expired), None);
        assert_eq!(SessionKey::random().verify(&session, now()), None);
        // The token hash alone, as the cookie held it before, is no session.
        assert_eq!(key.verify(&token.0, now()), None);
    }

    #[test]
    fn a_changed_field_breaks_the_signature() {
        let key = SessionKey::from_secret(b"a secret of at least thirty-two bytes");
        let session = key.issue(&hash_token("swath_token"), now());
        let fields: Vec<&str> = session.split('.').collect();
        let other = hash_token("swath_other");
        let longer = (now().timestamp() + 10 * SESSION_SECONDS).to_string();
        for forged in [
            [fields[0], &other.0, fields[2], fields[3]].join("."),
            [fields[0], fields[1], &longer, fields[3]].join("."),
            ["v2", fields[1], fields[2], fields[3]].join("."),
            format!("{session}."),
            session[..session.len() - 1].to_owned(),
        ] {
            assert_eq!(key.verify(&forged, now()), None, "{forged}");
        }
    }

    #[test]
    fn a_field_written_otherwise_breaks_the_signature() {
        let key = SessionKey::from_secret(&[7; 32]);
        let session = key.issue(&hash_token("swath_token"), now());
        assert!(key.verify(&session, now()).is_some());
        let (payload, tag) = session.rsplit_once('.').unwrap();
        let (head, expires) = payload.rsplit_once('.').unwrap();
        for expires in [format!("+{expires}"), format!("0{expires}")] {
            let forged = format!("{head}.{expires}.{tag}");
            assert_eq!(key.verify(&forged, now()), None, "{forged}");
        }
    }
}
