//! The value parsers of [`super`]'s settings: each checks a value when clap reads it, so that
//! a wrong one stops start-up naming its variable, before anything is opened.

use std::time::Duration;
use tracing_subscriber::EnvFilter;

/// A duration in seconds: finite and not negative, fractions allowed.
pub fn parse_seconds(value: &str) -> Result<Duration, String> {
    let seconds: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("`{value}` is not a number of seconds"))?;
    Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("`{value}` must be a finite number of seconds >= 0"))
}

/// A duration of the HTTP server's (`SWATH_HTTP_*_SECONDS`, `SWATH_IMPORT_BODY_TIMEOUT_SECONDS`),
/// in seconds: at least a millisecond and at most a day.
pub fn parse_http_seconds(value: &str) -> Result<Duration, String> {
    let seconds: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("{value:?} is not a number of seconds"))?;
    if !seconds.is_finite() || !(0.001..=86_400.0).contains(&seconds) {
        return Err(format!("{value} is not between 0.001 and 86400 seconds"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A duration in seconds, more than zero.
pub fn parse_positive_seconds(value: &str) -> Result<Duration, String> {
    match parse_seconds(value) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!("`{value}` must be a finite number of seconds > 0")),
    }
}

/// A listening address: `host:port`, the host an IP address or a name that resolves (checked now,
/// so that a typo is named at start-up).
pub fn parse_http_addr(value: &str) -> Result<String, String> {
    use std::net::ToSocketAddrs;
    let expected = "expected host:port, for example 127.0.0.1:8080, localhost:8080 or [::1]:8080";
    match value
        .to_socket_addrs()
        .map(|mut addrs| addrs.next().is_some())
    {
        Ok(true) => Ok(value.to_owned()),
        Ok(false) => Err(format!("`{value}` resolves to no address; {expected}")),
        Err(e) => Err(format!("`{value}`: {e}; {expected}")),
    }
}

/// Hours of history: more than zero, at most a year.
pub fn parse_hours(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(h) if h > 0.0 && h <= 24.0 * 366.0 => Ok(h),
        _ => Err(format!(
            "`{value}` must be a number of hours > 0 and <= 8784"
        )),
    }
}

/// A PostgreSQL URL: checked for its scheme now, so that a typo is named at start-up rather than
/// as a failed connection.
pub fn parse_database_url(value: &str) -> Result<String, String> {
    if value.starts_with("postgres://") || value.starts_with("postgresql://") {
        Ok(value.to_owned())
    } else {
        Err("expected a URL of the form postgres://user[:password]@host[:port]/database".to_owned())
    }
}

/// A NATS server address: `nats://host:port` (or `tls://`, `ws://`, `wss://`), or `host:port`.
pub fn parse_nats_url(value: &str) -> Result<String, String> {
    let expected = "expected nats://host:port (or tls://, ws://, wss://), or host:port; several \
                    servers of a cluster comma-separated";
    for server in value.split(',').map(str::trim) {
        let rest = match server.split_once("://") {
            Some((scheme, rest)) if ["nats", "tls", "ws", "wss"].contains(&scheme) => rest,
            Some(_) => return Err(expected.to_owned()),
            None => server,
        };
        // Credentials may come first (user:password@host:port).
        let host = rest.rsplit('@').next().unwrap_or(rest);
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(expected.to_owned());
        }
    }
    swath_nats::servers(value).map_err(|e| format!("{e}; {expected}"))?;
    Ok(value.to_owned())
}

/// A tile URL template: empty, or `http(s)://` with `{z}`, `{x}` and `{y}`.
pub fn parse_tile_url(value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(String::new());
    }
    let web = value.starts_with("https://") || value.starts_with("http://");
    let placeholders = ["{z}", "{x}", "{y}"].iter().all(|p| value.contains(p));
    if !web || !placeholders || value.contains(['"', '\'', '(', ')', '\\', '<', '>', ' ']) {
        return Err("expected an http(s):// URL template with {z}, {x} and {y} \
             (https://tile.openstreetmap.org/{z}/{x}/{y}.png), or empty for no tiles"
            .to_owned());
    }
    Ok(value.to_owned())
}

/// A file that exists, checked now so that a wrong path is named at start-up.
pub fn parse_file(value: &str) -> Result<std::path::PathBuf, String> {
    let path = std::path::PathBuf::from(value);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{value} is not a file"))
    }
}

/// A tracing filter, checked now so that a typo stops start-up instead of silencing the logs.
pub fn parse_log_filter(value: &str) -> Result<String, String> {
    EnvFilter::try_new(value)
        .map(|_| value.to_owned())
        .map_err(|e| format!("not a tracing filter: {e}"))
}

/// A bearer token: printable ASCII without spaces, so that it fits an `Authorization` header.
pub fn parse_token(value: &str) -> Result<String, String> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("a token must be non-empty printable ASCII without spaces".to_owned());
    }
    Ok(value.to_owned())
}

/// A session secret: at least [`swath_api::live_pages::session::MIN_SECRET_BYTES`] bytes.
pub fn parse_session_secret(value: &str) -> Result<String, String> {
    let least = swath_api::live_pages::session::MIN_SECRET_BYTES;
    if value.len() < least {
        return Err(format!(
            "the secret has {} bytes; it needs at least {least} (for example `openssl rand -hex 32`)",
            value.len()
        ));
    }
    Ok(value.to_owned())
}
