//! The URL rule of an endpoint (decision 174): what is refused, and the normal form that is stored.

/// The longest URL accepted, before and after normalisation.
pub const MAX_URL_CHARS: usize = 2048;

/// The URL an endpoint stores, in the `url` crate's serialisation, or why `url` is refused.
///
/// Refused: a whitespace or control character anywhere (the parser would silently drop a
/// leading space or a line break, so what is stored would not be what was sent), a scheme other
/// than `https` (or `http` when `allow_http`), no host, a user name or password, a fragment
/// (never sent), more than [`MAX_URL_CHARS`]. Normalised: scheme and host lower-cased, an IDN host
/// in punycode, IPv4 hosts in dotted decimal (`0x7f.1` is `127.0.0.1`), the default port
/// dropped, dot segments resolved, an empty path `/`, characters outside the URL grammar
/// percent-encoded. Whether the host is a public address is decided at every delivery (a name
/// may resolve elsewhere later).
pub fn check_url(url: &str, allow_http: bool) -> Result<String, String> {
    if url.chars().count() > MAX_URL_CHARS {
        return Err(format!("`/url` has more than {MAX_URL_CHARS} characters."));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(
            "`/url` must not contain spaces, line breaks or other control characters \
             (percent-encode them)."
                .to_owned(),
        );
    }
    let parsed = url::Url::parse(url).map_err(|e| format!("`/url` is not a URL: {e}."))?;
    match parsed.scheme() {
        "https" => {}
        "http" if allow_http => {}
        _ => {
            return Err("`/url` must be an `https` URL (plain `http` only with \
                 SWATH_WEBHOOK_ALLOW_PRIVATE=true)."
                .to_owned())
        }
    }
    if parsed.host().is_none() {
        return Err("`/url` has no host.".to_owned());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("`/url` must not carry a user name or password.".to_owned());
    }
    if parsed.fragment().is_some() {
        return Err("`/url` must not have a fragment (`#…`): it is never sent.".to_owned());
    }
    let normal = String::from(parsed);
    if normal.chars().count() > MAX_URL_CHARS {
        return Err(format!(
            "`/url` has more than {MAX_URL_CHARS} characters once normalised."
        ));
    }
    Ok(normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_stored_in_their_normal_form() {
        for (given, stored) in [
            (
                "https://hooks.example.com/swath",
                "https://hooks.example.com/swath",
            ),
            ("HTTPS://Hooks.Example.COM", "https://hooks.example.com/"),
            (
                "https://hooks.example.com:443/a/./b/../c",
                "https://hooks.example.com/a/c",
            ),
            (
                "https://bücher.example/ä",
                "https://xn--bcher-kva.example/%C3%A4",
            ),
            ("https://0x7f.1/hook", "https://127.0.0.1/hook"),
            ("https://[::FFFF:7F00:1]/", "https://[::ffff:7f00:1]/"),
            (
                "https://hooks.example.com/?a=1&b=%20",
                "https://hooks.example.com/?a=1&b=%20",
            ),
        ] {
            assert_eq!(check_url(given, false).as_deref(), Ok(stored), "{given}");
        }
    }

    #[test]
    fn whitespace_controls_userinfo_and_fragments_are_refused() {
        for url in [
            " https://hooks.example.com/",
            "https://hooks.example.com/ ",
            "https://hooks.example.com/\r\nx-injected: 1",
            "https://hooks.example.com/a\tb",
            "https://hooks.example.com/a b",
            "https://hooks.example.com/\u{0}",
            "https://hooks.example.com/\u{85}",
            "https://hooks.example.com/\u{a0}",
            "https://user@hooks.example.com/",
            "https://:secret@hooks.example.com/",
            "https://hooks.example.com/#section",
            "https://hooks.example.com/#",
            "http://hooks.example.com/",
            "ftp://hooks.example.com/",
            "https:///",
            "not a url",
        ] {
            assert!(check_url(url, false).is_err(), "{url:?} must be refused");
        }
        assert_eq!(
            check_url("http://127.0.0.1:9/hook", true).as_deref(),
            Ok("http://127.0.0.1:9/hook")
        );
    }

    #[test]
    fn the_length_limit_holds_before_and_after_normalisation() {
        let path = "a".repeat(MAX_URL_CHARS - "https://h.example/".len());
        assert!(check_url(&format!("https://h.example/{path}"), false).is_ok());
        assert!(check_url(&format!("https://h.example/{path}a"), false).is_err());
        // Each `ä` is one character given and six (`%C3%A4`) stored.
        let grows = format!("https://h.example/{}", "ä".repeat(400));
        assert!(grows.chars().count() < MAX_URL_CHARS);
        assert!(check_url(&grows, false).is_err());
    }
}
