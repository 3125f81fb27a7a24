//! Swath's webhook sender (issue 31): [`HttpSender`] implements the `WebhookSender` port over
//! reqwest with rustls (no OpenSSL).
//!
//! Server-side request forgery: a tenant chooses the URL, so the server's request must not reach
//! inside its network. Unless private addresses are allowed (`SWATH_WEBHOOK_ALLOW_PRIVATE`), the
//! URL must be `https`; an IP-literal host is checked before anything is sent; a name is resolved
//! by [`CheckedResolver`], reqwest's resolver for this client, at every connection, and refused
//! when **any** of its addresses is not public ([`forbidden`]); the connection goes to the
//! addresses it checked (reqwest connects to what the resolver answers: there is no second
//! resolution). Redirects are never followed, so a public endpoint cannot bounce the request to
//! a private one. Proxy variables (`HTTPS_PROXY`, `ALL_PROXY`, `HTTP_PROXY`, …) are ignored: a
//! proxy resolves the name itself, out of the checking resolver's sight.

use async_trait::async_trait;
use futures::StreamExt;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use swath_application::ports::{SendResult, WebhookSender};

/// How much of an answer's body is read (and discarded): enough to keep the connection healthy,
/// never enough to hold memory for a hostile endpoint.
pub const BODY_CAP_BYTES: usize = 16 * 1024;

/// The sender's bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SenderSettings {
    /// Time to establish the connection (TCP and TLS).
    pub connect_timeout: Duration,
    /// Time for the whole attempt, the answer's head and capped body included.
    pub total_timeout: Duration,
    /// Plain `http` and private, loopback and link-local addresses are allowed (an on-premise
    /// deployment, the tests' loopback receiver).
    pub allow_private: bool,
}

impl Default for SenderSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            total_timeout: Duration::from_secs(15),
            allow_private: false,
        }
    }
}

/// Whether deliveries may not reach `ip`: loopback, private, shared (CGNAT), link-local (and so
/// the cloud metadata address 169.254.169.254), unique-local (and so `fd00:ec2::254`),
/// multicast, broadcast, unspecified, reserved, or an IPv6 form of such an IPv4 address.
pub fn forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_unspecified()
        || ip.is_documentation()
        || a == 0
        // Shared address space (RFC 6598).
        || (a == 100 && (64..128).contains(&b))
        // IETF protocol assignments (RFC 6890).
        || (a == 192 && b == 0 && c == 0)
        // Reserved (240/4).
        || a >= 240
}

fn forbidden_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return forbidden_v4(v4);
    }
    let segments = ip.segments();
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // Unique-local fc00::/7.
        || (segments[0] & 0xfe00) == 0xfc00
        // Link-local fe80::/10 and the deprecated site-local fec0::/10.
        || (segments[0] & 0xffc0) == 0xfe80
        || (segments[0] & 0xffc0) == 0xfec0
        // IPv4-compatible (deprecated) and NAT64 (64:ff9b::/96) forms of an IPv4 address.
        || (segments[..6] == [0, 0, 0, 0, 0, 0])
        || (segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
            && forbidden_v4(Ipv4Addr::new(
                (segments[6] >> 8) as u8,
                segments[6] as u8,
                (segments[7] >> 8) as u8,
                segments[7] as u8,
            )))
}

/// Why a name was refused: said in the delivery's log line, never an address of the caller's.
#[derive(Debug)]
struct Refusal(String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// Resolves with the system resolver and refuses a name any of whose addresses is
/// [`forbidden`]; answers the addresses it checked, which are the ones reqwest connects to.
#[derive(Clone, Copy, Debug, Default)]
pub struct CheckedResolver;

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if addrs.is_empty() {
                return Err(Box::new(Refusal(format!("{host} resolves to no address"))) as _);
            }
            if addrs.iter().any(|a| forbidden(a.ip())) {
                return Err(Box::new(Refusal(format!(
                    "{host} resolves to an address deliveries may not reach"
                ))) as _);
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The webhook sender over reqwest.
#[derive(Clone)]
pub struct HttpSender {
    client: reqwest::Client,
    settings: SenderSettings,
}

impl HttpSender {
    pub fn new(settings: SenderSettings) -> Result<Self, reqwest::Error> {
        let mut builder = reqwest::Client::builder()
            // Through a proxy, the proxy would resolve the name and connect: the guard would see
            // only the proxy's address.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(settings.connect_timeout)
            .timeout(settings.total_timeout)
            .user_agent(concat!("Swath-Webhooks/", env!("CARGO_PKG_VERSION")))
            .pool_max_idle_per_host(1);
        if !settings.allow_private {
            builder = builder
                .https_only(true)
                .dns_resolver(Arc::new(CheckedResolver));
        }
        Ok(Self {
            client: builder.build()?,
            settings,
        })
    }

    /// Refuses what can be refused before any connection: a scheme other than `https`, an
    /// IP-literal host that is [`forbidden`] (reqwest resolves no literal, so the resolver
    /// never sees it).
    fn precheck(&self, url: &str) -> Result<(), String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
        if self.settings.allow_private {
            return Ok(());
        }
        if parsed.scheme() != "https" {
            return Err("not an https URL".to_owned());
        }
        let literal = match parsed.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            Some(url::Host::Domain(_)) => None,
            None => return Err("no host".to_owned()),
        };
        if literal.is_some_and(forbidden) {
            return Err("the host is an address deliveries may not reach".to_owned());
        }
        Ok(())
    }
}

/// Whether `error` (or one of its causes) is the resolver's refusal.
fn refusal(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(r) = e.downcast_ref::<Refusal>() {
            return Some(r.0.clone());
        }
        next = e.source();
    }
    None
}

#[async_trait]
impl WebhookSender for HttpSender {
    async fn send(
        &self,
        url: &str,
        headers: Vec<(&'static str, String)>,
        body: String,
    ) -> SendResult {
        if let Err(why) = self.precheck(url) {
            return SendResult::Refused(why);
        }
        let mut request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let answer = match request.send().await {
            Ok(answer) => answer,
            Err(e) => {
                return match refusal(&e) {
                    Some(why) => SendResult::Refused(why),
                    None if e.is_timeout() => SendResult::Failed("timed out".to_owned()),
                    // The error's text names the URL, never a header.
                    None => SendResult::Failed(error_chain(&e)),
                };
            }
        };
        let status = answer.status().as_u16();
        // Read up to the cap, within the total time-out, and discard.
        let mut stream = answer.bytes_stream();
        let mut read = 0usize;
        while read < BODY_CAP_BYTES {
            match stream.next().await {
                Some(Ok(chunk)) => read += chunk.len(),
                Some(Err(_)) | None => break,
            }
        }
        SendResult::Answered(status)
    }
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests;
