//! `/live/map`: a site's mowers at their latest positions and their tracks of the site's day, as
//! an inline SVG rendered here (no script, no external asset needed to draw it).
//!
//! - **Projection.** Web Mercator, the projection of the usual map tiles: the view is centred on
//!   the bounding box of every drawn point, at the largest zoom (at most [`MAX_ZOOM`]) at which
//!   the box fits [`WIDTH`] × [`HEIGHT`] less a margin.
//! - **Tiles.** With a tile URL (`SWATH_MAP_TILE_URL`), the tiles covering the view at that zoom
//!   are CSS backgrounds of boxes behind the SVG, on a plain background, fetched by the browser;
//!   the page's script places them (the pages' security policy refuses `style` attributes), so
//!   without script the map has no tiles. A tile that does not load draws nothing: the markers
//!   and tracks stay on the plain background.
//! - **Bounded.** At most [`MAP_SITES`](swath_application::projections::MAP_SITES) sites to pick
//!   from, [`MAP_MOWERS_PER_SITE`](swath_application::projections::MAP_MOWERS_PER_SITE) mowers,
//!   and [`TRACK_POSITIONS`] positions of each mower's track since the site's local midnight,
//!   oldest first (one bounded read per mower, with a sentinel). Each cut list has its notice.
//! - **Accessible.** The SVG is an image named by its title; the table below it says the same in
//!   text: each mower's status, position, track length and when it was last seen.

use super::render::{self, escape, notice, Status, Times};
use crate::error::ApiError;
use crate::routes::projections::views;
use crate::state::AppState;
use chrono::{DateTime, TimeZone, Utc};
use std::fmt::Write;
use swath_application::ports::{LatLon, TimeWindow, WindowRows};
use swath_application::projections::{MapMower, MapSnapshot, Window};
use swath_domain::rows::PositionRow;
use swath_domain::{Principal, SiteId};

/// The most positions of a mower's track drawn on the map (its oldest of the day first).
pub const TRACK_POSITIONS: usize = 1000;
/// The map's size in SVG units (CSS pixels at full size).
pub const WIDTH: f64 = 960.0;
pub const HEIGHT: f64 = 540.0;
/// Room left around the drawn points, in SVG units.
const MARGIN: f64 = 48.0;
/// The closest zoom (OpenStreetMap's tiles go to 19).
pub const MAX_ZOOM: u8 = 18;
/// Tile size in pixels.
const TILE: f64 = 256.0;
/// The tracks' colours, one per mower in turn.
const TRACK_COLOURS: [&str; 6] = [
    "#0969da", "#8250df", "#bf3989", "#1a7f37", "#bc4c00", "#1b7c83",
];

/// A point at zoom 0 in Web Mercator pixels (0..256 on both axes; y grows southwards).
pub fn world(p: LatLon) -> (f64, f64) {
    let lat = p.lat.clamp(-85.051_128_78, 85.051_128_78).to_radians();
    let x = (p.lon + 180.0) / 360.0 * TILE;
    let y = (1.0 - (lat.tan() + 1.0 / lat.cos()).ln() / std::f64::consts::PI) / 2.0 * TILE;
    (x, y)
}

/// What the map shows: a zoom, and the world pixel (at that zoom) of its top left corner.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct View {
    pub zoom: u8,
    pub origin: (f64, f64),
}

impl View {
    /// The view that fits every point, centred on their bounding box; `None` without points.
    pub fn fit(points: impl IntoIterator<Item = LatLon>) -> Option<View> {
        let mut points = points.into_iter().map(world);
        let first = points.next()?;
        let (mut min, mut max) = (first, first);
        for (x, y) in points {
            min = (min.0.min(x), min.1.min(y));
            max = (max.0.max(x), max.1.max(y));
        }
        let span = (max.0 - min.0, max.1 - min.1);
        let room = ((WIDTH - 2.0 * MARGIN) / span.0).min((HEIGHT - 2.0 * MARGIN) / span.1);
        let zoom = if room.is_finite() {
            room.log2().floor().clamp(0.0, f64::from(MAX_ZOOM)) as u8
        } else {
            MAX_ZOOM
        };
        let scale = f64::from(1u32 << zoom);
        let centre = ((min.0 + max.0) / 2.0 * scale, (min.1 + max.1) / 2.0 * scale);
        Some(View {
            zoom,
            origin: (centre.0 - WIDTH / 2.0, centre.1 - HEIGHT / 2.0),
        })
    }

    /// Where a point is drawn, in SVG units.
    pub fn project(&self, p: LatLon) -> (f64, f64) {
        let (x, y) = world(p);
        let scale = f64::from(1u32 << self.zoom);
        (x * scale - self.origin.0, y * scale - self.origin.1)
    }

    /// The tiles covering the view: `(x, y)` tile numbers and where each is drawn.
    pub fn tiles(&self) -> Vec<(u32, u32, f64, f64)> {
        let n = 1i64 << self.zoom;
        let range = |from: f64, length: f64| {
            let first = ((from / TILE).floor() as i64).max(0);
            let last = (((from + length) / TILE).ceil() as i64 - 1).min(n - 1);
            first..=last
        };
        let mut out = Vec::new();
        for ty in range(self.origin.1, HEIGHT) {
            for tx in range(self.origin.0, WIDTH) {
                out.push((
                    tx as u32,
                    ty as u32,
                    tx as f64 * TILE - self.origin.0,
                    ty as f64 * TILE - self.origin.1,
                ));
            }
        }
        out
    }
}

/// A tile's URL from the template.
pub fn tile_url(template: &str, zoom: u8, x: u32, y: u32) -> String {
    template
        .replace("{z}", &zoom.to_string())
        .replace("{x}", &x.to_string())
        .replace("{y}", &y.to_string())
        .replace("{s}", "a")
}

/// The map page's content: the site picker, then the chosen site's map and its table.
pub(super) async fn content(
    out: &mut String,
    state: &AppState,
    principal: &Principal,
    site: Option<SiteId>,
) -> Result<(), ApiError> {
    let live = views(state)?;
    let snapshot: MapSnapshot = live.map(principal, site).await?;
    let now = state.clock.now();
    notice(out, &snapshot.sites, "sites", None);
    if snapshot.sites.items.is_empty() {
        out.push_str("<p>No sites are visible to this token.</p>");
        return Ok(());
    }
    let shown = snapshot.site.as_ref().map(|s| s.site.id);
    out.push_str("<nav aria-label=\"Sites\"><ul class=\"sites\">");
    for s in &snapshot.sites.items {
        let current = if Some(s.id) == shown {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(
            out,
            "<li><a href=\"/live/map?site={id}\"{current}>{name}</a></li>",
            id = s.id,
            name = escape(&s.name)
        );
    }
    out.push_str("</ul></nav>");
    let Some(map) = snapshot.site else {
        out.push_str("<p>No such site is visible to this token.</p>");
        return Ok(());
    };
    let tz = render::zone(&map.site);
    // The site's day: from its local midnight (the earliest, if the clocks went back at it).
    let midnight = tz
        .from_local_datetime(
            &now.with_timezone(&tz)
                .date_naive()
                .and_hms_opt(0, 0, 0)
                .unwrap_or_default(),
        )
        .earliest()
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or(now - chrono::Duration::hours(24));
    let window = TimeWindow {
        from: Some(midnight),
        to: None,
        after: None,
        limit: TRACK_POSITIONS + 1,
    };
    let tracks: Vec<WindowRows<PositionRow>> =
        futures::future::try_join_all(map.mowers.items.iter().map(|m| {
            let window = window.clone();
            async move {
                let track = state.mower_reads.track(principal, m.mower.id, &window);
                track.await
            }
        }))
        .await?;
    let tracks: Vec<(Window<PositionRow>, Option<DateTime<Utc>>)> = tracks
        .into_iter()
        .map(|t| (Window::cut(t.rows, TRACK_POSITIONS), t.oldest_kept))
        .collect();
    let times = Times::new(now, &[&map.site]);
    let site_id = map.site.id;
    let _ = write!(
        out,
        "<section aria-labelledby=\"site-{site_id}\"><h2 id=\"site-{site_id}\">{name}</h2>",
        name = escape(&map.site.name)
    );
    notice(out, &map.mowers, "mowers", Some(&map.site.name));
    for (m, (track, oldest_kept)) in map.mowers.items.iter().zip(&tracks) {
        if track.truncated {
            let _ = write!(
                out,
                "<p role=\"status\">Showing the first {TRACK_POSITIONS} positions of today's \
                 track of {name}. Later positions are not shown.</p>",
                name = escape(&m.mower.name)
            );
        }
        if let Some(kept) = oldest_kept.filter(|k| *k > midnight) {
            let _ = write!(
                out,
                "<p role=\"status\">Today's track of {name} begins at {at}: older positions \
                 are no longer kept.</p>",
                name = escape(&m.mower.name),
                at = kept.with_timezone(&tz).format("%H:%M"),
            );
        }
    }
    if map.mowers.items.is_empty() {
        out.push_str("<p>No mowers.</p></section>");
        return Ok(());
    }
    svg(
        out,
        state,
        &map.site.name,
        &map.mowers.items,
        &tracks,
        &times,
    );
    table(out, &map.mowers.items, &tracks, &times);
    out.push_str("</section>");
    Ok(())
}

fn point(p: &PositionRow) -> LatLon {
    LatLon {
        lat: p.lat,
        lon: p.lon,
    }
}

fn svg(
    out: &mut String,
    state: &AppState,
    site: &str,
    mowers: &[MapMower],
    tracks: &[(Window<PositionRow>, Option<DateTime<Utc>>)],
    times: &Times,
) {
    let points = mowers
        .iter()
        .filter_map(|m| m.mower.position)
        .chain(tracks.iter().flat_map(|(t, _)| t.items.iter().map(point)));
    let Some(view) = View::fit(points) else {
        out.push_str("<p>No mower of this site has reported a position.</p>");
        return;
    };
    let placed = mowers.iter().filter(|m| m.mower.position.is_some()).count();
    // The tiles are CSS backgrounds of boxes behind the SVG, in percentages of the frame so that
    // they scale with it: a background that does not load draws nothing (an SVG `<image>` would
    // draw a broken-image icon), leaving the frame's plain background.
    out.push_str("<div class=\"map-frame\">");
    let template = state.map_tile_url.as_ref();
    let tiles = !template.is_empty() && !template.contains(['"', '\'', '(', ')', '\\', ' ']);
    if tiles {
        for (x, y, px, py) in view.tiles() {
            // Placed by the page's script: the security policy refuses `style` attributes.
            let _ = write!(
                out,
                "<div class=\"tile\" data-box=\"{l:.4} {t:.4} {w:.4} {h:.4}\" \
                 data-src=\"{url}\"></div>",
                l = px / WIDTH * 100.0,
                t = py / HEIGHT * 100.0,
                w = TILE / WIDTH * 100.0,
                h = TILE / HEIGHT * 100.0,
                url = escape(&tile_url(template, view.zoom, x, y)),
            );
        }
    }
    let _ = write!(
        out,
        "<svg viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-labelledby=\"map-title\" \
         data-zoom=\"{zoom}\" xmlns=\"http://www.w3.org/2000/svg\"><title id=\"map-title\">Map \
         of {site}: {placed} mowers at their latest positions and today's tracks</title>",
        zoom = view.zoom,
        site = escape(site),
    );
    out.push_str("<g class=\"tracks\">");
    for (i, (track, _)) in tracks.iter().enumerate() {
        if track.items.len() < 2 {
            continue;
        }
        let _ = write!(
            out,
            "<polyline class=\"track\" stroke=\"{}\" points=\"",
            TRACK_COLOURS[i % TRACK_COLOURS.len()]
        );
        for (j, p) in track.items.iter().enumerate() {
            let (x, y) = view.project(point(p));
            let _ = write!(out, "{}{x:.1},{y:.1}", if j == 0 { "" } else { " " });
        }
        out.push_str("\"/>");
    }
    out.push_str("</g><g class=\"markers\">");
    for m in mowers {
        let Some(p) = m.mower.position else { continue };
        let (x, y) = view.project(p);
        let status = Status::of(&m.mower, m.status);
        let seen = m
            .mower
            .last_seen_at
            .map(|t| format!(", last seen {}", render::ago(times.now, t)))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<g class=\"marker status-{class}\" data-mower=\"{id}\"><circle cx=\"{x:.1}\" \
             cy=\"{y:.1}\" r=\"8\" fill=\"currentColor\"/><text x=\"{tx:.1}\" y=\"{ty:.1}\">\
             {name}</text><title>{name}: {word}{seen}</title></g>",
            class = status.class(),
            id = m.mower.id,
            tx = x + 11.0,
            ty = y + 4.5,
            name = escape(&m.mower.name),
            word = status.word(),
        );
    }
    out.push_str("</g>");
    if tiles {
        let credit = if template.contains("openstreetmap.org") {
            "Map tiles © OpenStreetMap contributors".to_owned()
        } else {
            let host = template.split('/').nth(2).unwrap_or(template);
            format!("Map tiles: {}", escape(host))
        };
        let _ = write!(
            out,
            "<text class=\"attribution\" x=\"{x}\" y=\"{y}\" text-anchor=\"end\">{credit}</text>",
            x = WIDTH - 6.0,
            y = HEIGHT - 6.0,
        );
    }
    out.push_str("</svg></div>");
}

/// The map in words: one row per mower.
fn table(
    out: &mut String,
    mowers: &[MapMower],
    tracks: &[(Window<PositionRow>, Option<DateTime<Utc>>)],
    times: &Times,
) {
    out.push_str(
        "<table aria-label=\"Mowers on the map\"><thead><tr><th scope=\"col\">Mower</th>\
         <th scope=\"col\">Status</th><th scope=\"col\">Track colour</th>\
         <th scope=\"col\">Position</th><th scope=\"col\">Today's track</th>\
         <th scope=\"col\">Activity</th><th scope=\"col\">Battery</th>\
         <th scope=\"col\">Last seen</th></tr></thead><tbody>",
    );
    for (i, (m, (track, _))) in mowers.iter().zip(tracks).enumerate() {
        let position = m
            .mower
            .position
            .map(|p| format!("{:.5}, {:.5}", p.lat, p.lon))
            .unwrap_or_else(|| "not reported".to_owned());
        let colour = TRACK_COLOURS[i % TRACK_COLOURS.len()];
        let mut seen = String::new();
        times.last_seen(&mut seen, m.mower.site_id, m.mower.last_seen_at);
        let _ = write!(
            out,
            "<tr><th scope=\"row\">{name}</th><td>{status}</td><td><svg width=\"24\" \
             height=\"8\" aria-hidden=\"true\"><rect width=\"24\" height=\"8\" fill=\"{colour}\"/>\
             </svg></td><td>{position}</td><td>{n} position{plural}</td><td>{activity}</td>\
             <td>{battery}</td><td>{seen}</td></tr>",
            name = escape(&m.mower.name),
            status = Status::of(&m.mower, m.status).badge(),
            n = track.items.len(),
            plural = if track.items.len() == 1 { "" } else { "s" },
            activity = render::activity_text(&m.mower),
            battery = render::battery(m.mower.battery_percent),
        );
    }
    out.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(lat: f64, lon: f64) -> LatLon {
        LatLon { lat, lon }
    }

    #[test]
    fn web_mercator_matches_the_tile_scheme() {
        assert_eq!(world(at(0.0, 0.0)), (128.0, 128.0));
        let (x, y) = world(at(85.051_128_78, -180.0));
        assert!(x.abs() < 1e-9 && y.abs() < 1e-6, "{x} {y}");
        // Berlin's Brandenburg Gate is in tile 16/35203/21493 of the slippy-map scheme.
        let (x, y) = world(at(52.516_275, 13.377_704));
        let scale = f64::from(1u32 << 16);
        assert_eq!(
            ((x * scale / TILE) as u32, (y * scale / TILE) as u32),
            (35203, 21493)
        );
    }

    #[test]
    fn a_view_centres_and_fits_its_points() {
        let one = View::fit([at(52.5, 13.4)]).unwrap();
        assert_eq!(one.zoom, MAX_ZOOM);
        let (x, y) = one.project(at(52.5, 13.4));
        assert!((x - WIDTH / 2.0).abs() < 1e-6 && (y - HEIGHT / 2.0).abs() < 1e-6);
        let a = at(52.500, 13.400);
        let b = at(52.502, 13.404);
        let view = View::fit([a, b]).unwrap();
        let (ax, ay) = view.project(a);
        let (bx, by) = view.project(b);
        // b lies north-east of a: right of it and above it; both inside the margin.
        assert!(bx > ax && by < ay);
        for (x, y) in [(ax, ay), (bx, by)] {
            assert!((MARGIN - 1e-6..=WIDTH - MARGIN + 1e-6).contains(&x), "{x}");
            assert!((MARGIN - 1e-6..=HEIGHT - MARGIN + 1e-6).contains(&y), "{y}");
        }
        // Centred, and one zoom closer would not fit.
        assert!(((ax + bx) / 2.0 - WIDTH / 2.0).abs() < 1e-6);
        let span = (bx - ax).max((ay - by) * (WIDTH - 2.0 * MARGIN) / (HEIGHT - 2.0 * MARGIN));
        assert!(span * 2.0 > WIDTH - 2.0 * MARGIN, "{span}");
        assert!(View::fit([]).is_none());
    }

    #[test]
    fn tiles_cover_the_view_and_stay_in_the_world() {
        let view = View::fit([at(52.5, 13.4), at(52.51, 13.42)]).unwrap();
        let tiles = view.tiles();
        assert!(!tiles.is_empty() && tiles.len() <= 5 * 4, "{}", tiles.len());
        let (left, top) = tiles
            .iter()
            .fold((f64::MAX, f64::MAX), |(l, t), &(_, _, x, y)| {
                (l.min(x), t.min(y))
            });
        let (right, bottom) = tiles
            .iter()
            .fold((f64::MIN, f64::MIN), |(r, b), &(_, _, x, y)| {
                (r.max(x + TILE), b.max(y + TILE))
            });
        assert!(left <= 0.0 && top <= 0.0 && right >= WIDTH && bottom >= HEIGHT);
        let world = View {
            zoom: 0,
            origin: (-352.0, -142.0),
        };
        assert_eq!(world.tiles(), vec![(0, 0, 352.0, 142.0)]);
        assert_eq!(
            tile_url("https://{s}.t.example/{z}/{x}/{y}.png", 3, 4, 5),
            "https://a.t.example/3/4/5.png"
        );
    }
}
