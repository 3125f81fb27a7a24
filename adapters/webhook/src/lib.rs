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

/// Whether deliveries may not reach `ip`: every block of the IANA special-purpose registries that
/// is not globally reachable, multicast, and IPv6 outside global unicast (decision 175).
pub fn forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

/// The IPv4 blocks deliveries may not reach, as (network, prefix length).
const FORBIDDEN_V4: [(Ipv4Addr, u32); 15] = [
    // "This network" (and so 0.0.0.0).
    (Ipv4Addr::new(0, 0, 0, 0), 8),
    // Private use.
    (Ipv4Addr::new(10, 0, 0, 0), 8),
    // Shared address space (carrier-grade NAT).
    (Ipv4Addr::new(100, 64, 0, 0), 10),
    (Ipv4Addr::new(127, 0, 0, 0), 8),
    // Link-local, and so the cloud metadata address 169.254.169.254.
    (Ipv4Addr::new(169, 254, 0, 0), 16),
    (Ipv4Addr::new(172, 16, 0, 0), 12),
    // IETF protocol assignments, whole: its two global anycast addresses are no receiver.
    (Ipv4Addr::new(192, 0, 0, 0), 24),
    // Documentation (TEST-NET-1).
    (Ipv4Addr::new(192, 0, 2, 0), 24),
    // The deprecated 6to4 relay anycast.
    (Ipv4Addr::new(192, 88, 99, 0), 24),
    (Ipv4Addr::new(192, 168, 0, 0), 16),
    // Benchmarking.
    (Ipv4Addr::new(198, 18, 0, 0), 15),
    // Documentation (TEST-NET-2, TEST-NET-3).
    (Ipv4Addr::new(198, 51, 100, 0), 24),
    (Ipv4Addr::new(203, 0, 113, 0), 24),
    // Multicast.
    (Ipv4Addr::new(224, 0, 0, 0), 4),
    // Reserved, and the limited broadcast 255.255.255.255.
    (Ipv4Addr::new(240, 0, 0, 0), 4),
];

fn forbidden_v4(ip: Ipv4Addr) -> bool {
    let ip = u32::from(ip);
    FORBIDDEN_V4
        .iter()
        .any(|(network, length)| ip >> (32 - length) == u32::from(*network) >> (32 - length))
}

/// The IPv4 address in bits 32..64 of `ip` (6to4's, after `2002::/16`) or in its last 32 bits.
fn embedded_v4(high: u16, low: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(high) << 16) | u32::from(low))
}

fn forbidden_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    // The NAT64 well-known prefix 64:ff9b::/96 reaches the IPv4 address it embeds.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return forbidden_v4(embedded_v4(s[6], s[7]));
    }
    // Only 2000::/3 is global unicast. Outside it: the unspecified and loopback addresses, the
    // IPv4-mapped, -compatible and -translated forms, 64:ff9b:1::/48, the discard block 100::/64,
    // SRv6 SIDs 5f00::/16, unique-local fc00::/7, link-local fe80::/10, site-local fec0::/10 and
    // multicast ff00::/8: none is a public host.
    if s[0] & 0xe000 != 0x2000 {
        return true;
    }
    match s {
        // IETF protocol assignments 2001::/23, whole: Teredo, benchmarking, ORCHID, and anycast
        // services that are no receiver.
        [0x2001, b, ..] if b < 0x200 => true,
        // Documentation.
        [0x2001, 0xdb8, ..] => true,
        [0x3fff, b, ..] if b < 0x1000 => true,
        // 6to4 reaches the IPv4 address it embeds.
        [0x2002, high, low, ..] => forbidden_v4(embedded_v4(high, low)),
        _ => false,
    }
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
