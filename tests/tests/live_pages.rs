//! The operator-grade live pages on the memory adapters, at a set clock: each mower's status as a
//! colour class, an icon and a word, its battery gauge, site, error code and "last seen" with the
//! site's local time; the site map's markers, tracks, tiles and notices; and a real browser
//! (Debian's chromium, headless) rendering each page, whose screenshots are the ones in
//! `docs/screenshots/` when `SWATH_SCREENSHOTS` names that directory.

use axum::http::{header, Method, StatusCode};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{json, Value};
use std::sync::Arc;
use swath::wiring::Stores;
use swath_api::live_pages::map::{View, TRACK_POSITIONS};
use swath_api::router;
use swath_application::ports::{Clock, LatLon, ManualClock};
use swath_application::Watcher;
use swath_domain::{AccountId, Mower, MowerId, Scope, SiteId};
use swath_memory::{MemoryStore, MemoryStoreSettings};
use swath_tests::support::http::{self, add_token, run_chromium, wire_app};
use swath_tests::support::{add_account, add_mower, add_site, mower, site};

const TOKEN: &str = "swath_live_pages_test_token";
/// A token limited to the second site.
const HARBOUR_TOKEN: &str = "swath_live_pages_harbour_token";

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 10, 0, 0).unwrap()
}

/// Where Riverside's mowers are last seen (their tracks end there).
fn riverside_positions() -> [(&'static str, f64, f64); 5] {
    [
        ("Alpha", 52.5203, 13.4061),
        ("Bravo", 52.5196, 13.4042),
        ("Charlie", 52.5191, 13.4030),
        ("Delta", 52.5208, 13.4049),
        ("Echo", 52.5200, 13.4072),
    ]
}

struct Fleet {
    app: axum::Router,
    riverside: SiteId,
    harbour: SiteId,
    mowers: Vec<(String, MowerId)>,
}

impl Fleet {
    fn id(&self, name: &str) -> MowerId {
        self.mowers.iter().find(|(n, _)| n == name).unwrap().1
    }
}

/// One account, two sites (Riverside in Berlin, Harbour in London) and seven mowers: mowing with
/// a track, in error, charging, low on battery, offline, mowing with a track longer than the
/// map's ceiling, and never reported. States come through `POST /v1/states`; the watcher sees
/// them and the offline sweep runs, so the alerts are the ones `swath serve` would raise.
async fn fleet(tile_url: &str) -> Fleet {
    let store = MemoryStore::new(MemoryStoreSettings::default());
    let clock = Arc::new(ManualClock::new(now() - Duration::minutes(30)));
    let wired = wire_app(Stores::memory(store.clone()), clock.clone());
    let watcher = wired.watcher.clone();
    let app = router(wired.state.with_map_tile_url(tile_url));
    let account = AccountId::new();
    add_account(&store, account, "Parks").await;
    let riverside = SiteId::new();
    let harbour = SiteId::new();
    for (i, (id, name, tz)) in [
        (riverside, "Riverside", chrono_tz::Europe::Berlin),
        (harbour, "Harbour", chrono_tz::Europe::London),
    ]
    .into_iter()
    .enumerate()
    {
        add_site(&store, site(id, account, name, tz, i)).await;
    }
    let mut mowers = Vec::new();
    for (i, name) in [
        "Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf",
    ]
    .into_iter()
    .enumerate()
    {
        let id = MowerId::new();
        let site_id = if i < 5 { riverside } else { harbour };
        let display_order = i32::try_from(i).unwrap();
        let mower = Mower {
            display_order,
            ..mower(id, account, site_id, name, i)
        };
        add_mower(&store, mower).await;
        mowers.push((name.to_owned(), id));
    }
    for (token, sites) in [(TOKEN, None), (HARBOUR_TOKEN, Some(vec![harbour]))] {
        let scopes = vec![Scope::Read, Scope::Write];
        add_token(&store, token, account, scopes, sites).await;
    }
    let fleet = Fleet {
        app,
        riverside,
        harbour,
        mowers,
    };
    let report = |name: &str, at: DateTime<Utc>, activity: &str, battery: u8, pos: (f64, f64)| {
        json!({
            "mower_id": fleet.id(name),
            "account_id": account,
            "observed_at": at.to_rfc3339(),
            "activity": activity,
            "battery_percent": battery,
            "position": {"lat": pos.0, "lon": pos.1},
        })
    };
    let send = |reports: Vec<Value>| {
        let app = fleet.app.clone();
        let watcher = watcher.clone();
        async move { post_states(&app, &watcher, reports).await }
    };
    // Echo reports half an hour before now, then falls silent.
    let [alpha, bravo, charlie, delta, echo] = riverside_positions();
    send(vec![report(
        "Echo",
        clock.now(),
        "mowing",
        50,
        (echo.1, echo.2),
    )])
    .await;
    // Two minutes before now the others report; Alpha with its morning's track, which ends
    // where it is now.
    clock.advance(Duration::minutes(28));
    let t = clock.now();
    let mut reports: Vec<Value> = (0..60i64)
        .map(|i| {
            let at = t - Duration::minutes(2 * (60 - i));
            let lane = (i / 10) as f64 * 0.0002;
            // Back and forth, lane by lane.
            let step = if (i / 10) % 2 == 0 {
                i % 10
            } else {
                9 - i % 10
            };
            let along = step as f64 * 0.0003;
            report(
                "Alpha",
                at,
                "mowing",
                82,
                (alpha.1 - 0.001 + lane, alpha.2 - 0.0027 + along),
            )
        })
        .collect();
    reports.push(report("Alpha", t, "mowing", 82, (alpha.1, alpha.2)));
    let mut error = report("Bravo", t, "error", 64, (bravo.1, bravo.2));
    error["error_code"] = json!("E_BLADE_STUCK");
    reports.push(error);
    reports.push(report("Charlie", t, "charging", 35, (charlie.1, charlie.2)));
    reports.push(report("Delta", t, "mowing", 12, (delta.1, delta.2)));
    send(reports).await;
    // Foxtrot mowed since 02:00 London time, a position every 30 s: more than the map draws.
    let start = Utc.with_ymd_and_hms(2026, 6, 1, 1, 0, 0).unwrap();
    let track: Vec<Value> = (0..TRACK_POSITIONS as i64 + 20)
        .map(|i| {
            let lane = (i / 40) as f64 * 0.00005;
            let along = (i % 40) as f64 * 0.00004;
            report(
                "Foxtrot",
                start + Duration::seconds(30 * i),
                "mowing",
                90,
                (51.5050 + lane, -0.0900 + along),
            )
        })
        .collect();
    for chunk in track.chunks(1000) {
        send(chunk.to_vec()).await;
    }
    send(vec![report("Foxtrot", t, "mowing", 71, (51.5062, -0.0885))]).await;
    // Now: Echo has been silent for 30 minutes and goes offline.
    clock.advance(Duration::minutes(2));
    assert!(
        watcher.sweep_offline().await.unwrap() >= 1,
        "Echo went offline"
    );
    fleet
}

async fn post_states(app: &axum::Router, watcher: &Watcher, reports: Vec<Value>) {
    let body = Some(json!(reports));
    let answer = http::call(app, Method::POST, "/v1/states", TOKEN, body).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    let parsed: Vec<_> = reports
        .iter()
        .map(|r| watcher.parse(r.to_string().as_bytes()))
        .collect();
    watcher.on_states(&parsed).await.unwrap();
}

async fn page(app: &axum::Router, uri: &str) -> String {
    let answer = http::call(app, Method::GET, uri, TOKEN, None).await;
    let body = answer.text();
    assert_eq!(answer.status, StatusCode::OK, "{uri}: {body}");
    body
}

/// The card (fleet, wall) or table row (health, map) naming `name`.
fn part<'a>(page: &'a str, start: &str, end: &str, name: &str) -> &'a str {
    let needle = format!(">{name}<");
    let first = format!("{name}<");
    // The text before the first `start` is no part.
    page.split(start)
        .skip(1)
        .find(|p| p.contains(&needle) || p.starts_with(&first))
        .and_then(|p| p.split(end).next())
        .unwrap_or_else(|| panic!("no {start}… of {name} in {page}"))
}

#[tokio::test]
async fn the_fleet_page_shows_status_battery_site_error_and_last_seen() {
    let f = fleet("").await;
    let page = page(&f.app, "/live/fleet").await;
    let card = |name| part(&page, "<li><article", "</article>", name);
    // Status: a class for the colour, an icon and a word.
    for (name, class, word) in [
        ("Alpha", "ok", "OK"),
        ("Bravo", "high", "High alert"),
        ("Charlie", "ok", "OK"),
        ("Delta", "normal", "Alert"),
        ("Echo", "offline", "Offline"),
        ("Golf", "unknown", "Never reported"),
    ] {
        let card = card(name);
        assert!(
            card.starts_with(&format!(" class=\"status-{class}\"")),
            "{name}: {card}"
        );
        assert!(
            card.contains(&format!(
                "<span class=\"status status-{class}\"><svg viewBox=\"0 0 16 16\" \
                 aria-hidden=\"true\" focusable=\"false\">"
            )),
            "{name}: {card}"
        );
        assert!(
            card.contains(&format!("</svg>{word}</span>")),
            "{name}: {card}"
        );
    }
    // Battery: a gauge and the number as text.
    assert!(card("Alpha").contains(
        "<meter min=\"0\" max=\"100\" low=\"20\" high=\"50\" optimum=\"100\" value=\"82\" \
         aria-hidden=\"true\">82 %</meter>82 %"
    ));
    assert!(card("Delta").contains("value=\"12\""));
    assert!(card("Golf").contains("<span class=\"battery\">not reported</span>"));
    // Site, error code.
    assert!(card("Alpha").contains("<dt>Site</dt><dd>Riverside</dd>"));
    assert!(card("Foxtrot").contains("<dt>Site</dt><dd>Harbour</dd>"));
    assert!(card("Bravo").contains("<dt>Error</dt><dd class=\"error\">E_BLADE_STUCK</dd>"));
    assert!(card("Alpha").contains("<dt>Error</dt><dd>none</dd>"));
    // Last seen, relative to the clock, with the site's local time on hover.
    assert!(
        card("Alpha").contains(
            "Last seen <time datetime=\"2026-06-01T09:58:00Z\" \
             title=\"2026-06-01 11:58:00 CEST (Europe/Berlin)\">2 min ago</time>."
        ),
        "{}",
        card("Alpha")
    );
    assert!(card("Foxtrot").contains("title=\"2026-06-01 10:58:00 BST (Europe/London)\""));
    assert!(card("Echo").contains("\">30 min ago</time>"));
    assert!(card("Golf").contains("Never seen."));
    // The open alerts are still listed.
    assert!(card("Bravo").contains("high: error (E_BLADE_STUCK), since 2026-06-01 09:58 UTC"));
}

#[tokio::test]
async fn the_walls_show_statuses_gauges_and_last_seen() {
    let f = fleet("").await;
    let wall = page(&f.app, "/live/wall").await;
    // In the field only: Alpha, Bravo (in error), Delta; not Charlie (charging) nor Echo.
    for name in ["Alpha", "Bravo", "Delta", "Foxtrot"] {
        assert!(wall.contains(&format!(">{name}</h3>")), "{name}");
    }
    assert!(!wall.contains(">Charlie</h3>") && !wall.contains(">Echo</h3>"));
    let card = part(&wall, "<li><article", "</article>", "Bravo");
    assert!(card.contains("</svg>High alert</span>") && !card.contains("<dt>Site</dt>"));
    let health = page(&f.app, "/live/health").await;
    let row = |name| part(&health, "<tr><th scope=\"row\">", "</tr>", name);
    assert!(row("Echo").contains("status-offline") && row("Echo").contains("</svg>Offline</span>"));
    assert!(row("Bravo").contains("</svg>High alert</span>"));
    assert!(row("Charlie").contains("value=\"35\""));
    assert!(row("Golf").contains("Never seen."));
    assert!(row("Foxtrot").contains("BST (Europe/London)\">2 min ago</time>"));
}

#[tokio::test]
async fn the_map_draws_markers_at_their_positions_and_todays_tracks() {
    let f = fleet(swath_api::state::DEFAULT_MAP_TILE_URL).await;
    let page = page(&f.app, "/live/map").await;
    // The first site is shown; every site is a link.
    assert!(page.contains(&format!(
        "<a href=\"/live/map?site={}\" aria-current=\"page\">Riverside</a>",
        f.riverside
    )));
    assert!(page.contains(&format!(
        "<a href=\"/live/map?site={}\">Harbour</a>",
        f.harbour
    )));
    assert!(page.contains("<div class=\"map-frame\">"));
    assert!(page.contains("<svg viewBox=\"0 0 960 540\" role=\"img\""));
    assert!(page.contains("<title id=\"map-title\">Map of Riverside: 5 mowers"));
    // The markers where the projection puts the latest positions, and the view fits them all
    // with Alpha's track.
    let mut points: Vec<LatLon> = riverside_positions()
        .iter()
        .map(|(_, lat, lon)| LatLon {
            lat: *lat,
            lon: *lon,
        })
        .collect();
    let (_, alpha_lat, alpha_lon) = riverside_positions()[0];
    points.push(LatLon {
        lat: alpha_lat - 0.001,
        lon: alpha_lon - 0.0027,
    });
    points.push(LatLon {
        lat: alpha_lat - 0.001 + 0.001,
        lon: alpha_lon - 0.0027 + 0.0027,
    });
    let view = View::fit(points).unwrap();
    assert!(page.contains(&format!("data-zoom=\"{}\"", view.zoom)));
    let mut xs = Vec::new();
    for (name, lat, lon) in riverside_positions() {
        let (x, y) = view.project(LatLon { lat, lon });
        let marker = part(&page, "<g class=\"marker", "</g>", name);
        assert!(
            marker.contains(&format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"8\"")),
            "{name} at {x:.1},{y:.1}: {marker}"
        );
        assert!((0.0..=960.0).contains(&x) && (0.0..=540.0).contains(&y));
        xs.push((name, x, y));
    }
    // Independent of the projection's code: Echo is the easternmost, Delta the northernmost.
    let east = xs.iter().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap().0;
    let north = xs.iter().min_by(|a, b| a.2.total_cmp(&b.2)).unwrap().0;
    assert_eq!((east, north), ("Echo", "Delta"));
    // Statuses on the markers: Bravo is in error, Echo offline.
    assert!(part(&page, "<g class=\"marker", "</g>", "Bravo").starts_with(" status-high\""));
    assert!(part(&page, "<g class=\"marker", "</g>", "Echo").starts_with(" status-offline\""));
    // Alpha's track of today: 61 positions, one polyline.
    let track = page
        .split("<polyline class=\"track\"")
        .nth(1)
        .and_then(|p| p.split("points=\"").nth(1))
        .and_then(|p| p.split('"').next())
        .unwrap();
    assert_eq!(track.split(' ').count(), 61, "{track}");
    assert_eq!(page.matches("<polyline").count(), 1);
    // The tiles of the view at its zoom, and their credit.
    // Placed by the page's script (the security policy refuses `style` attributes).
    let tile = format!("data-src=\"https://tile.openstreetmap.org/{}/", view.zoom);
    assert_eq!(page.matches(&tile).count(), view.tiles().len());
    assert!(page.contains("Map tiles © OpenStreetMap contributors"));
    // The same in words.
    let row = part(&page, "<tr><th scope=\"row\">", "</tr>", "Alpha");
    assert!(row.contains("52.52030, 13.40610") && row.contains("61 positions"));
    assert!(row.contains("Europe/Berlin)\">2 min ago</time>"));
    // The page polls its own site.
    assert!(page.contains("data-fragment=\"/live/map?fragment=main\""));
    let chosen = self::page(&f.app, &format!("/live/map?site={}", f.riverside)).await;
    assert!(chosen.contains(&format!(
        "data-fragment=\"/live/map?site={}&amp;fragment=main\"",
        f.riverside
    )));
}

#[tokio::test]
async fn the_map_says_what_it_cut_and_keeps_its_ceilings() {
    let f = fleet("").await;
    let harbour = page(&f.app, &format!("/live/map?site={}", f.harbour)).await;
    assert!(harbour.contains(&format!(
        "<p role=\"status\">Showing the first {TRACK_POSITIONS} positions of today's track of \
         Foxtrot. Later positions are not shown.</p>"
    )));
    let row = part(&harbour, "<tr><th scope=\"row\">", "</tr>", "Foxtrot");
    assert!(
        row.contains(&format!("{TRACK_POSITIONS} positions")),
        "{row}"
    );
    let golf = part(&harbour, "<tr><th scope=\"row\">", "</tr>", "Golf");
    assert!(golf.contains("not reported") && golf.contains("0 positions"));
    // No tiles without a tile URL: the plain background only.
    assert!(!harbour.contains("class=\"tile\"") && !harbour.contains("Map tiles"));
    assert!(harbour.contains("<div class=\"map-frame\"><svg viewBox"));
    // An unknown site, and a site the token may not see, show no map.
    let unknown = page(&f.app, &format!("/live/map?site={}", SiteId::new())).await;
    assert!(
        unknown.contains("No such site is visible to this token.")
            && !unknown.contains("<div class=\"map-frame\">")
    );
    let uri = format!("/live/map?site={}&fragment=main", f.riverside);
    let limited = http::call(&f.app, Method::GET, &uri, HARBOUR_TOKEN, None)
        .await
        .text();
    assert!(
        limited.contains("No such site is visible to this token."),
        "{limited}"
    );
    assert!(!limited.contains("Riverside") && !limited.contains("Alpha"));
    // Signing in on the map keeps its site.
    let sign_in = format!("/live/map?site={}", f.harbour);
    let response = http::sign_in_with_form(&f.app, &sign_in, TOKEN).await;
    assert_eq!(response.status, StatusCode::SEE_OTHER);
    assert_eq!(
        response.headers[header::LOCATION],
        format!("/live/map?site={}", f.harbour).as_str()
    );
}

/// Debian's chromium, headless, renders each page (signing in through the page's form); the map's tile URL points
/// at a port nothing listens on, so its tiles fail and the markers and tracks must still be in
/// the rendered DOM. Each screenshot is a PNG of some size; with `SWATH_SCREENSHOTS=<dir>` they
/// are written there (`docs/screenshots` is where the committed ones come from).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    swath_no_chromium,
    ignore = "needs chromium (apt-get install -y chromium), found at build time"
)]
async fn a_browser_renders_each_page() {
    let f = fleet("http://127.0.0.1:9/{z}/{x}/{y}.png").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = http::with_form_sign_in(f.app.clone(), TOKEN);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let out_dir = std::env::var_os("SWATH_SCREENSHOTS")
        .filter(|d| !d.is_empty())
        .map(|d| {
            // Relative to the workspace, not to this package.
            let d = std::path::PathBuf::from(d);
            if d.is_absolute() {
                d
            } else {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("..")
                    .join(d)
            }
        });
    let scratch = std::env::temp_dir().join(format!("swath-screens-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&scratch).unwrap();
    let dir = out_dir.clone().unwrap_or_else(|| scratch.clone());
    std::fs::create_dir_all(&dir).unwrap();
    for (name, path, marker) in [
        ("fleet", "/live/fleet".to_owned(), "<meter "),
        ("wall", "/live/wall".to_owned(), "status status-high"),
        ("health", "/live/health".to_owned(), "status status-offline"),
        (
            "map",
            format!("/live/map?site={}", f.riverside),
            "<g class=\"marker status-",
        ),
    ] {
        let url = format!("http://{addr}/test-sign-in{path}");
        let png = dir.join(format!("{name}.png"));
        let _ = std::fs::remove_file(&png);
        let dom = {
            let (scratch, png, url) = (scratch.clone(), png.clone(), url);
            tokio::task::spawn_blocking(move || {
                let run = |extra: &[String]| run_chromium(&scratch, extra, &url);
                run(&[format!("--screenshot={}", png.display())]);
                run(&["--dump-dom".to_owned()])
            })
            .await
            .unwrap()
        };
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{name}: no screenshot: {e}"));
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: not a PNG");
        assert!(bytes.len() > 20_000, "{name}: {} bytes only", bytes.len());
        assert!(dom.contains(marker), "{name}: no {marker} in\n{dom}");
        if name == "map" {
            // The inline script ran under the page's security policy: it placed the tiles.
            assert!(
                dom.contains("class=\"tile\" data-box=") && dom.contains("style=\"left:"),
                "map: tiles not placed by the script in\n{dom}"
            );
        }
        assert!(
            !dom.contains("<h2 id=\"sign-in\">"),
            "{name}: not signed in"
        );
    }
    server.abort();
    let _ = std::fs::remove_dir_all(&scratch);
}
