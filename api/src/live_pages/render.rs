//! The content of the fleet dashboard, the site wall and the health wall, and what the map page
//! shares with them: the escaping, the overflow notices, a mower's status (colour, icon and
//! word), its battery gauge and when it was last seen.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use std::collections::HashMap;
use std::fmt::Write;
use swath_application::ports::{AlertCard, MowerCard, SiteCard};
use swath_application::projections::{
    FleetSnapshot, HealthMower, HealthSite, HealthSnapshot, HealthStatus, LiveMower, WallSite,
    WallSnapshot, Window,
};
use swath_domain::watch::Severity;
use swath_domain::{Assignment, SiteId};

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The overflow notice of a cut list: rendered from the flag, never from a count.
pub(super) fn notice<T>(out: &mut String, window: &Window<T>, what: &str, of: Option<&str>) {
    if !window.truncated {
        return;
    }
    let of = of.map(|o| format!(" of {}", escape(o))).unwrap_or_default();
    let _ = write!(
        out,
        "<p role=\"status\">Showing the first {limit} {what}{of}. Additional \
         {what} are not shown.</p>",
        limit = window.limit
    );
}

/// A site's time zone; UTC when the stored name is not one (it is checked when a site is
/// written, so only a manual edit gets here).
pub(super) fn zone(site: &SiteCard) -> Tz {
    site.time_zone.parse().unwrap_or(Tz::UTC)
}

/// What a page renders times against: the clock's now, and the time zone of each site.
pub(super) struct Times {
    pub now: DateTime<Utc>,
    pub zones: HashMap<SiteId, (String, Tz)>,
}

impl Times {
    pub fn new(now: DateTime<Utc>, sites: &[&SiteCard]) -> Self {
        Self {
            now,
            zones: sites
                .iter()
                .map(|s| (s.id, (s.name.clone(), zone(s))))
                .collect(),
        }
    }

    fn zone(&self, site: SiteId) -> Tz {
        self.zones.get(&site).map(|(_, tz)| *tz).unwrap_or(Tz::UTC)
    }

    fn site_name(&self, site: SiteId) -> Option<&str> {
        self.zones.get(&site).map(|(name, _)| name.as_str())
    }

    /// "Last seen 2 min ago", the instant in `datetime` and the site's local time in `title`.
    pub fn last_seen(&self, out: &mut String, site: SiteId, at: Option<DateTime<Utc>>) {
        match at {
            None => out.push_str("<p class=\"seen\">Never seen.</p>"),
            Some(at) => {
                let _ = write!(
                    out,
                    "<p class=\"seen\">Last seen <time datetime=\"{iso}\" title=\"{local}\">{ago}\
                     </time>.</p>",
                    iso = at.format("%Y-%m-%dT%H:%M:%SZ"),
                    local = escape(&local_time(at, self.zone(site))),
                    ago = ago(self.now, at),
                );
            }
        }
    }
}

/// An instant as a site's local time, with the zone's abbreviation and name.
pub fn local_time(at: DateTime<Utc>, tz: Tz) -> String {
    let local = at.with_timezone(&tz);
    format!("{} ({})", local.format("%Y-%m-%d %H:%M:%S %Z"), tz.name())
}

/// How long ago `at` was, from `now`: seconds, minutes, hours, then days, rounded down.
pub fn ago(now: DateTime<Utc>, at: DateTime<Utc>) -> String {
    let seconds = (now - at).num_seconds();
    match seconds {
        ..=4 => "just now".to_owned(),
        5..=59 => format!("{seconds} s ago"),
        60..=3599 => format!("{} min ago", seconds / 60),
        3600..=172_799 => format!("{} h ago", seconds / 3600),
        _ => format!("{} days ago", seconds / 86_400),
    }
}

/// How a mower is, as a page shows it: offline first, else the most severe open alert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Status {
    Unknown,
    Offline,
    Health(HealthStatus),
}

impl Status {
    pub fn of(mower: &MowerCard, health: HealthStatus) -> Self {
        if mower.offline {
            Status::Offline
        } else if mower.activity.is_none() {
            Status::Unknown
        } else {
            Status::Health(health)
        }
    }

    /// The CSS class suffix (`status-…`).
    pub fn class(self) -> &'static str {
        match self {
            Status::Unknown => "unknown",
            Status::Offline => "offline",
            Status::Health(h) => h.as_str(),
        }
    }

    /// The word next to the icon.
    pub fn word(self) -> &'static str {
        match self {
            Status::Unknown => "Never reported",
            Status::Offline => "Offline",
            Status::Health(HealthStatus::Ok) => "OK",
            Status::Health(HealthStatus::Low) => "Low alert",
            Status::Health(HealthStatus::Normal) => "Alert",
            Status::Health(HealthStatus::High) => "High alert",
            Status::Health(HealthStatus::Critical) => "Critical alert",
        }
    }

    /// A 16×16 icon whose shape differs by status (circle with a tick, diamond, triangles,
    /// octagon, hollow circle), drawn in the status colour; hidden from assistive technology,
    /// which reads the word.
    pub fn icon(self) -> &'static str {
        match self {
            Status::Health(HealthStatus::Ok) => {
                "<circle cx=\"8\" cy=\"8\" r=\"7.5\" fill=\"currentColor\"/>\
                 <path d=\"M4.5 8.2l2.3 2.3 4.7-4.9\" fill=\"none\" stroke=\"#fff\" stroke-width=\"2\"/>"
            }
            Status::Health(HealthStatus::Low) => {
                "<path d=\"M8 .5l7.5 7.5-7.5 7.5L.5 8z\" fill=\"currentColor\"/>"
            }
            Status::Health(HealthStatus::Normal | HealthStatus::High) => {
                "<path d=\"M8 .8l7.4 14H.6z\" fill=\"currentColor\"/>\
                 <path d=\"M8 5.5v4.5M8 11.5v1.5\" stroke=\"#fff\" stroke-width=\"1.8\"/>"
            }
            Status::Health(HealthStatus::Critical) => {
                "<path d=\"M5 .5h6l4.5 4.5v6L11 15.5H5L.5 11V5z\" fill=\"currentColor\"/>\
                 <path d=\"M5.3 5.3l5.4 5.4M10.7 5.3l-5.4 5.4\" stroke=\"#fff\" stroke-width=\"1.8\"/>"
            }
            Status::Offline => {
                "<circle cx=\"8\" cy=\"8\" r=\"6.5\" fill=\"none\" stroke=\"currentColor\" stroke-width=\"2\"/>\
                 <path d=\"M3.5 12.5l9-9\" stroke=\"currentColor\" stroke-width=\"2\"/>"
            }
            Status::Unknown => {
                "<circle cx=\"8\" cy=\"8\" r=\"6.5\" fill=\"none\" stroke=\"currentColor\" \
                 stroke-width=\"2\" stroke-dasharray=\"3 2\"/>"
            }
        }
    }

    /// The status as an icon and a word, in the status colour.
    pub fn badge(self) -> String {
        format!(
            "<span class=\"status status-{class}\"><svg viewBox=\"0 0 16 16\" aria-hidden=\"true\" \
             focusable=\"false\">{icon}</svg>{word}</span>",
            class = self.class(),
            icon = self.icon(),
            word = self.word(),
        )
    }
}

/// The status of a mower of the fleet dashboard or the site wall: its alerts are ordered most
/// severe first, so the first one decides even when the window is cut.
fn live_status(m: &LiveMower) -> Status {
    let health = match m.alerts.items.first().map(|a| a.severity) {
        Some(Severity::Critical) => HealthStatus::Critical,
        Some(Severity::High) => HealthStatus::High,
        Some(Severity::Normal) => HealthStatus::Normal,
        Some(Severity::Low) => HealthStatus::Low,
        None => HealthStatus::Ok,
    };
    Status::of(&m.mower, health)
}

/// The battery as a gauge and as text.
pub(super) fn battery(percent: Option<u8>) -> String {
    match percent {
        None => "<span class=\"battery\">not reported</span>".to_owned(),
        Some(b) => format!(
            "<span class=\"battery\"><meter min=\"0\" max=\"100\" low=\"20\" high=\"50\" \
             optimum=\"100\" value=\"{b}\" aria-hidden=\"true\">{b} %</meter>{b} %</span>"
        ),
    }
}

pub(super) fn fleet(out: &mut String, s: &FleetSnapshot, times: &Times) {
    notice(out, &s.mowers, "mowers", None);
    if s.mowers.items.is_empty() {
        out.push_str("<p>No mowers are visible to this token.</p>");
        return;
    }
    out.push_str("<ul class=\"cards\" aria-labelledby=\"title\">");
    for m in &s.mowers.items {
        live_mower(out, m, "h2", times, true);
    }
    out.push_str("</ul>");
}

pub(super) fn wall(out: &mut String, s: &WallSnapshot, times: &Times) {
    site_sections(out, &s.sites, |out, id, mowers| {
        let _ = write!(out, "<ul class=\"cards\" aria-labelledby=\"site-{id}\">");
        for m in mowers {
            live_mower(out, m, "h3", times, false);
        }
        out.push_str("</ul>");
    });
}

pub(super) fn health(out: &mut String, s: &HealthSnapshot, times: &Times) {
    site_sections(out, &s.sites, |out, id, mowers| {
        let _ = write!(
            out,
            "<table aria-labelledby=\"site-{id}\"><thead><tr><th scope=\"col\">Mower</th>\
             <th scope=\"col\">Status</th><th scope=\"col\">Open alerts</th>\
             <th scope=\"col\">Activity</th><th scope=\"col\">Battery</th>\
             <th scope=\"col\">Last seen</th><th scope=\"col\">Blade</th>\
             <th scope=\"col\">Operator on duty</th></tr></thead><tbody>"
        );
        for m in mowers {
            let h = &m.health;
            let blade = if h.blade_threshold_ms > 0 {
                format!(
                    "{:.0} % of its life",
                    100.0 * h.blade_since_reset_ms as f64 / h.blade_threshold_ms as f64
                )
            } else {
                "—".to_owned()
            };
            let mut seen = String::new();
            times.last_seen(&mut seen, m.mower.site_id, m.mower.last_seen_at);
            let _ = write!(
                out,
                "<tr><th scope=\"row\">{name}</th><td>{status}</td>\
                 <td>{c} critical, {hi} high, {n} normal, {l} low</td><td>{activity}</td>\
                 <td>{battery}</td><td>{seen}</td><td>{blade}</td><td>{operator}</td></tr>",
                name = escape(&m.mower.name),
                status = Status::of(&m.mower, m.status).badge(),
                c = h.critical,
                hi = h.high,
                n = h.normal,
                l = h.low,
                activity = activity_text(&m.mower),
                battery = battery(m.mower.battery_percent),
                operator = operator_text(&m.operator),
            );
        }
        out.push_str("</tbody></table>");
    });
}

/// The sites of the wall and the health page, which differ only in how a site's mowers are
/// listed: the sites' overflow notice (or a line when no site is visible), then per site a
/// section labelled by its heading, its mowers' notice, and a line when it has none, else what
/// `list` writes (given the site's id, which labels the list).
fn site_sections<S: SiteOf>(
    out: &mut String,
    sites: &Window<S>,
    mut list: impl FnMut(&mut String, SiteId, &[S::Mower]),
) {
    notice(out, sites, "sites", None);
    if sites.items.is_empty() {
        out.push_str("<p>No sites are visible to this token.</p>");
        return;
    }
    for w in &sites.items {
        let (site, window) = w.parts();
        let id = site.id;
        let _ = write!(
            out,
            "<section class=\"site\" aria-labelledby=\"site-{id}\">\
             <h2 id=\"site-{id}\">{}</h2>",
            escape(&site.name)
        );
        notice(out, window, S::MOWERS, Some(&site.name));
        if window.items.is_empty() {
            out.push_str(S::NONE);
        } else {
            list(out, id, &window.items);
        }
        out.push_str("</section>");
    }
}

/// A site of a page's snapshot: its card, its window of mowers, and how the page names them.
pub(super) trait SiteOf {
    type Mower;
    /// The mowers, in the overflow notice.
    const MOWERS: &'static str;
    /// The line of a site without mowers.
    const NONE: &'static str;
    fn parts(&self) -> (&SiteCard, &Window<Self::Mower>);
}

/// `SiteOf` for a snapshot's site type (fields `site` and `mowers`): its mowers' type and how
/// the page names them.
macro_rules! site_of {
    ($site:ty, $mower:ty, $mowers:literal, $none:literal) => {
        impl SiteOf for $site {
            type Mower = $mower;
            const MOWERS: &'static str = $mowers;
            const NONE: &'static str = $none;
            fn parts(&self) -> (&SiteCard, &Window<$mower>) {
                (&self.site, &self.mowers)
            }
        }
    };
}

site_of!(
    WallSite,
    LiveMower,
    "mowers in the field",
    "<p>No mower is in the field.</p>"
);
site_of!(HealthSite, HealthMower, "mowers", "<p>No mowers.</p>");

pub(super) fn activity_text(m: &MowerCard) -> String {
    let activity = m.activity.map(|a| a.as_str()).unwrap_or("never reported");
    if m.offline {
        format!("offline (last: {activity})")
    } else {
        activity.to_owned()
    }
}

fn operator_text(a: &Option<Assignment>) -> String {
    match a {
        Some(a) => format!("{} ({})", escape(&a.operator), a.priority.as_str()),
        None => "none".to_owned(),
    }
}

/// A mower's card: name, status, site (on the fleet dashboard, where mowers of several sites
/// meet), activity, battery, error, operator, when it was last seen, and its open alerts.
fn live_mower(out: &mut String, m: &LiveMower, heading: &str, times: &Times, with_site: bool) {
    let id = m.mower.id;
    let status = live_status(m);
    let _ = write!(
        out,
        "<li><article class=\"status-{class}\" aria-labelledby=\"mower-{id}\">\
         <{heading} id=\"mower-{id}\">{name}</{heading}>{badge}<dl>",
        class = status.class(),
        name = escape(&m.mower.name),
        badge = status.badge(),
    );
    if with_site {
        let site = times.site_name(m.mower.site_id).unwrap_or("—");
        let _ = write!(out, "<dt>Site</dt><dd>{}</dd>", escape(site));
    }
    let error = match &m.mower.error_code {
        Some(code) => format!("<dd class=\"error\">{}</dd>", escape(code)),
        None => "<dd>none</dd>".to_owned(),
    };
    let _ = write!(
        out,
        "<dt>Activity</dt><dd>{activity}</dd><dt>Battery</dt><dd>{battery}</dd>\
         <dt>Error</dt>{error}<dt>Operator on duty</dt><dd>{operator}</dd></dl>",
        activity = activity_text(&m.mower),
        battery = battery(m.mower.battery_percent),
        operator = operator_text(&m.operator),
    );
    times.last_seen(out, m.mower.site_id, m.mower.last_seen_at);
    notice(out, &m.alerts, "open alerts", Some(&m.mower.name));
    if m.alerts.items.is_empty() {
        out.push_str("<p>No open alerts.</p>");
    } else {
        let _ = write!(
            out,
            "<ul class=\"alerts\" aria-label=\"Open alerts of {}\">",
            escape(&m.mower.name)
        );
        for a in &m.alerts.items {
            alert(out, a);
        }
        out.push_str("</ul>");
    }
    out.push_str("</article></li>");
}

fn alert(out: &mut String, a: &AlertCard) {
    let code = a
        .code
        .as_deref()
        .map(|c| format!(" ({})", escape(c)))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<li class=\"severity-{severity}\">{severity}: {kind}{code}, since {at}</li>",
        severity = a.severity.as_str(),
        kind = a.kind.as_str().replace('_', " "),
        at = a.raised_at.format("%Y-%m-%d %H:%M UTC"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn notices_come_from_the_flag() {
        let mut out = String::new();
        let cut: Window<u8> = Window::cut(vec![1, 2, 3], 2);
        notice(&mut out, &cut, "mowers", None);
        assert_eq!(
            out,
            "<p role=\"status\">Showing the first 2 mowers. Additional mowers \
             are not shown.</p>"
        );
        let mut none = String::new();
        notice(&mut none, &Window::cut(vec![1, 2], 2), "mowers", None);
        assert!(none.is_empty());
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn times_are_relative_and_local() {
        let now = Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap();
        let ago_by = |s: i64| ago(now, now - chrono::Duration::seconds(s));
        assert_eq!(ago_by(0), "just now");
        assert_eq!(ago_by(42), "42 s ago");
        assert_eq!(ago_by(150), "2 min ago");
        assert_eq!(ago_by(3 * 3600 + 59), "3 h ago");
        assert_eq!(ago_by(5 * 86_400), "5 days ago");
        assert_eq!(
            local_time(now, chrono_tz::Europe::Berlin),
            "2026-06-01 14:00:00 CEST (Europe/Berlin)"
        );
        assert_eq!(local_time(now, Tz::UTC), "2026-06-01 12:00:00 UTC (UTC)");
    }

    #[test]
    fn the_battery_is_a_gauge_with_text() {
        assert!(battery(Some(37)).contains("<meter min=\"0\" max=\"100\" low=\"20\""));
        assert!(battery(Some(37)).contains("value=\"37\""));
        assert!(battery(Some(37)).ends_with("37 %</span>"));
        assert!(battery(None).contains("not reported"));
    }
}
