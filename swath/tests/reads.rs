//! A mower's history, track (JSON and GeoJSON) and day totals: pages, cursors, windows.

mod helpers;

use axum::http::StatusCode;
use chrono::Duration;
use helpers::{t0, TestApp, TOKEN_A, TOKEN_A_SOUTH};
use serde_json::{json, Value};

/// Walks every page of `path` (which has a `?`), returning the items in order.
async fn walk(app: &TestApp, path: &str, limit: u32) -> (Vec<Value>, usize) {
    let mut items = Vec::new();
    let mut pages = 0;
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => format!("{path}&limit={limit}&cursor={c}"),
            None => format!("{path}&limit={limit}"),
        };
        let response = app.get(&url, Some(TOKEN_A)).await;
        assert_eq!(response.status, StatusCode::OK, "{url}");
        let page = response.json();
        pages += 1;
        assert!(page["items"].as_array().unwrap().len() <= limit as usize);
        items.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => {
                assert_eq!(page["truncated"], true);
                cursor = Some(c.to_owned());
            }
            None => {
                assert_eq!(page["truncated"], false);
                break;
            }
        }
    }
    (items, pages)
}

/// Bravo reports every second for `n` seconds after the seeded states.
async fn more_states(app: &TestApp, n: i64) {
    let bravo = app.a.mowers[0];
    for i in 0..n {
        app.record(json!({
            "mower_id": bravo, "account_id": app.a.account_id,
            "observed_at": (t0() + Duration::seconds(31 + i)).to_rfc3339(),
            "activity": "mowing", "blade_on": true, "battery_percent": 78,
            "position": {"lat": 52.5, "lon": 13.4002 + i as f64 * 1e-5},
        }))
        .await;
    }
}

#[tokio::test]
async fn the_history_is_oldest_first_and_its_pages_join_up() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let response = app
        .get(&format!("/v1/mowers/{bravo}/history"), Some(TOKEN_A))
        .await;
    assert_eq!(response.status, StatusCode::OK);
    let page = response.json();
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(page["items"][0]["observed_at"], "2026-06-01T12:00:00Z");
    assert_eq!(page["items"][1]["lawn_mower_activity"], "mowing");
    assert_eq!(page["limit"], 100);
    redacted_snapshot!("history", &page);

    more_states(&app, 8).await;
    let (items, pages) = walk(&app, &format!("/v1/mowers/{bravo}/history?"), 3).await;
    assert_eq!(items.len(), 10);
    assert_eq!(pages, 4);
    let times: Vec<&str> = items
        .iter()
        .map(|i| i["observed_at"].as_str().unwrap())
        .collect();
    let mut sorted = times.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(times, sorted, "strictly increasing: no repeats");
}

#[tokio::test]
async fn from_is_inclusive_and_to_exclusive() {
    let app = TestApp::spawn().await;
    more_states(&app, 10).await;
    let bravo = app.a.mowers[0];
    let from = (t0() + Duration::seconds(31)).to_rfc3339();
    let to = (t0() + Duration::seconds(35)).to_rfc3339();
    let path = format!(
        "/v1/mowers/{bravo}/history?from={}&to={}",
        urlencode(&from),
        urlencode(&to)
    );
    let (items, _) = walk(&app, &path, 2).await;
    let times: Vec<&str> = items
        .iter()
        .map(|i| i["observed_at"].as_str().unwrap())
        .collect();
    assert_eq!(
        times,
        [
            "2026-06-01T12:00:31Z",
            "2026-06-01T12:00:32Z",
            "2026-06-01T12:00:33Z",
            "2026-06-01T12:00:34Z"
        ]
    );
    let empty = app
        .get(
            &format!(
                "/v1/mowers/{bravo}/history?from={}&to={}",
                urlencode(&from),
                urlencode(&from)
            ),
            Some(TOKEN_A),
        )
        .await
        .json();
    assert_eq!(empty["items"], json!([]));
    let inverted = app
        .get(
            &format!(
                "/v1/mowers/{bravo}/history?from={}&to={}",
                urlencode(&to),
                urlencode(&from)
            ),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(inverted.status, StatusCode::BAD_REQUEST);
}

fn urlencode(s: &str) -> String {
    s.replace('+', "%2B").replace(':', "%3A")
}

#[tokio::test]
async fn the_track_is_json_or_a_geojson_line_string() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let page = app
        .get(&format!("/v1/mowers/{bravo}/track"), Some(TOKEN_A))
        .await;
    assert_eq!(page.content_type(), Some("application/json"));
    let page = page.json();
    assert_eq!(page["items"][0]["lat"], json!(52.5));
    redacted_snapshot!("track", &page);

    let geo = app
        .get(
            &format!("/v1/mowers/{bravo}/track?format=geojson"),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(geo.status, StatusCode::OK);
    assert_eq!(geo.content_type(), Some("application/geo+json"));
    let geo = geo.json();
    assert_eq!(geo["type"], "FeatureCollection");
    assert_eq!(geo["features"][0]["geometry"]["type"], "LineString");
    assert_eq!(
        geo["features"][0]["geometry"]["coordinates"],
        json!([[13.4, 52.5], [13.4001, 52.5]]),
        "[longitude, latitude]"
    );
    redacted_snapshot!("track_geojson", &geo);

    let one = app
        .get(
            &format!("/v1/mowers/{bravo}/track?format=geojson&limit=1"),
            Some(TOKEN_A),
        )
        .await
        .json();
    assert_eq!(one["features"][0]["geometry"]["type"], "Point");
    assert_eq!(one["truncated"], true);

    // Alpha never reported a position: no feature.
    let alpha = app.a.mowers[2];
    let none = app
        .get(
            &format!("/v1/mowers/{alpha}/track?format=geojson"),
            Some(TOKEN_A),
        )
        .await
        .json();
    assert_eq!(none["features"], json!([]));

    let bad = app
        .get(
            &format!("/v1/mowers/{bravo}/track?format=kml"),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

/// The GeoJSON track has its own operation (decision 111): same page, same cursors, one media
/// type; the old `format=geojson` query still answers the same document.
#[tokio::test]
async fn the_geojson_track_is_its_own_operation() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let geo = app
        .get(&format!("/v1/mowers/{bravo}/track.geojson"), Some(TOKEN_A))
        .await;
    assert_eq!(geo.status, StatusCode::OK);
    assert_eq!(geo.content_type(), Some("application/geo+json"));
    let geo = geo.json();
    assert_eq!(geo["type"], "FeatureCollection");
    assert_eq!(geo["features"][0]["geometry"]["type"], "LineString");
    assert_eq!(
        geo["features"][0]["geometry"]["coordinates"],
        json!([[13.4, 52.5], [13.4001, 52.5]]),
        "[longitude, latitude]"
    );
    let old = app
        .get(
            &format!("/v1/mowers/{bravo}/track?format=geojson"),
            Some(TOKEN_A),
        )
        .await
        .json();
    assert_eq!(geo, old, "the old query answers the same document");

    // Paged like the JSON track, with its cursors.
    let first = app
        .get(&format!("/v1/mowers/{bravo}/track?limit=1"), Some(TOKEN_A))
        .await
        .json();
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let second = app
        .get(
            &format!("/v1/mowers/{bravo}/track.geojson?limit=1&cursor={cursor}"),
            Some(TOKEN_A),
        )
        .await
        .json();
    assert_eq!(second["features"][0]["geometry"]["type"], "Point");
    assert_eq!(
        second["features"][0]["geometry"]["coordinates"],
        json!([13.4001, 52.5])
    );
    assert_eq!(second["truncated"], false);

    let bad = app
        .get(
            &format!("/v1/mowers/{bravo}/track.geojson?limit=0"),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let unseen = app
        .get(
            &format!("/v1/mowers/{}/track.geojson", app.b.mowers[0]),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(unseen.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_track_pages_like_the_history() {
    let app = TestApp::spawn().await;
    more_states(&app, 5).await;
    let bravo = app.a.mowers[0];
    let (items, pages) = walk(&app, &format!("/v1/mowers/{bravo}/track?"), 4).await;
    assert_eq!((items.len(), pages), (7, 2));
    // A history cursor is not a track cursor.
    let history = app
        .get(
            &format!("/v1/mowers/{bravo}/history?limit=1"),
            Some(TOKEN_A),
        )
        .await
        .json();
    let cursor = history["next_cursor"].as_str().unwrap();
    let wrong = app
        .get(
            &format!("/v1/mowers/{bravo}/track?cursor={cursor}"),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST);
    assert_eq!(wrong.problem_type(), "bad-request");
}

/// The first page of `path` (which has a `?`) with `limit`, and the one after it.
async fn two_pages(app: &TestApp, path: &str, limit: u32) -> (Value, Value) {
    let first = app
        .get(&format!("{path}&limit={limit}"), Some(TOKEN_A))
        .await;
    assert_eq!(first.status, StatusCode::OK);
    let first = first.json();
    let cursor = first["next_cursor"].as_str().expect("a second page");
    let second = app
        .get(
            &format!("{path}&limit={limit}&cursor={cursor}"),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(second.status, StatusCode::OK);
    (first, second.json())
}

/// A memory store whose bound (`SWATH_MEMORY_HISTORY_PER_MOWER`, here 5) has dropped states says
/// so on every history and track page (JSON and GeoJSON): `oldest_kept` is where the kept rows
/// begin, the first item of the first page. Before anything is dropped, and for a mower whose
/// rows all fit, it is `null`.
#[tokio::test]
async fn pages_say_where_the_kept_rows_begin_once_the_bound_dropped_states() {
    let app = TestApp::spawn_with_history(5).await;
    let bravo = app.a.mowers[0];
    let alpha = app.a.mowers[2];
    let history = format!("/v1/mowers/{bravo}/history?");
    let track = format!("/v1/mowers/{bravo}/track?");
    let geojson = format!("/v1/mowers/{bravo}/track?format=geojson");

    // Bravo's 2 seeded states fit: nothing dropped.
    for path in [&history, &track, &geojson] {
        let (first, second) = two_pages(&app, path, 1).await;
        assert_eq!(first["oldest_kept"], Value::Null, "{path}");
        assert_eq!(second["oldest_kept"], Value::Null, "{path}");
    }

    // 10 states (12:00:00, :30, :31 … :38), 5 kept: :34 … :38.
    more_states(&app, 8).await;
    let kept = "2026-06-01T12:00:34Z";
    let (first, second) = two_pages(&app, &history, 2).await;
    assert_eq!(first["items"][0]["observed_at"], kept);
    assert_eq!(first["oldest_kept"], kept);
    assert_eq!(second["oldest_kept"], kept, "on every page");
    redacted_snapshot!("history_bounded", &first);

    let (first, second) = two_pages(&app, &track, 2).await;
    assert_eq!(first["items"][0]["observed_at"], kept);
    assert_eq!(first["oldest_kept"], kept);
    assert_eq!(second["oldest_kept"], kept, "on every page");

    let (first, second) = two_pages(&app, &geojson, 2).await;
    assert_eq!(first["features"][0]["properties"]["times"][0], kept);
    assert_eq!(first["oldest_kept"], kept);
    assert_eq!(second["oldest_kept"], kept, "on every page");
    redacted_snapshot!("track_geojson_bounded", &first);

    // A window after the kept start still says where the kept rows begin.
    let from = urlencode("2026-06-01T12:00:37Z");
    let late = app
        .get(&format!("{history}from={from}"), Some(TOKEN_A))
        .await
        .json();
    assert_eq!(late["items"][0]["observed_at"], "2026-06-01T12:00:37Z");
    assert_eq!(late["oldest_kept"], kept);

    // Alpha's one state fits: its pages say nothing was dropped.
    for path in [
        format!("/v1/mowers/{alpha}/history"),
        format!("/v1/mowers/{alpha}/track"),
    ] {
        let page = app.get(&path, Some(TOKEN_A)).await.json();
        assert_eq!(page["oldest_kept"], Value::Null, "{path}");
    }
}

#[tokio::test]
async fn day_totals_are_per_local_day_of_the_site() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    let response = app
        .get(
            &format!("/v1/mowers/{bravo}/days?from=2026-05-31&to=2026-06-02"),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK);
    let days = response.json();
    assert_eq!(days["time_zone"], "Europe/Berlin");
    assert_eq!(
        days["items"].as_array().unwrap().len(),
        1,
        "days without totals are left out"
    );
    assert_eq!(days["items"][0]["day"], "2026-06-01");
    assert_eq!(days["items"][0]["mowing_seconds"], json!(30.0));
    redacted_snapshot!("days", &days);

    for query in [
        "from=2026-06-02&to=2026-06-01",
        "from=2026-01-01&to=2027-01-02",
        "from=2026-06-01",
        "from=yesterday&to=2026-06-01",
    ] {
        let response = app
            .get(&format!("/v1/mowers/{bravo}/days?{query}"), Some(TOKEN_A))
            .await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{query}");
        response.problem();
    }
    let year = app
        .get(
            &format!("/v1/mowers/{bravo}/days?from=2026-01-01&to=2027-01-01"),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(year.status, StatusCode::OK, "366 days at most");
}

#[tokio::test]
async fn reads_of_a_hidden_mower_answer_404() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0]; // North; the token sees South only.
    for route in ["history", "track", "days?from=2026-06-01&to=2026-06-01"] {
        let response = app
            .get(&format!("/v1/mowers/{bravo}/{route}"), Some(TOKEN_A_SOUTH))
            .await;
        assert_eq!(response.status, StatusCode::NOT_FOUND, "{route}");
    }
}

#[tokio::test]
async fn limits_and_cursors_are_checked() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    for query in [
        "limit=0",
        "limit=1001",
        "limit=ten",
        "cursor=%%%",
        "cursor=bm9wZQ",
        "from=monday",
    ] {
        let response = app
            .get(
                &format!("/v1/mowers/{bravo}/history?{query}"),
                Some(TOKEN_A),
            )
            .await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(response.problem_type(), "bad-request");
    }
    let max = app
        .get(
            &format!("/v1/mowers/{bravo}/history?limit=1000"),
            Some(TOKEN_A),
        )
        .await;
    assert_eq!(max.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_through_10_000_states_while_ingest_goes_on_returns_each_once() {
    let app = std::sync::Arc::new(TestApp::spawn_with_history(100_000).await);
    let bravo = app.a.mowers[0];
    let report = |i: i64| {
        json!({
            "mower_id": bravo, "account_id": app.a.account_id,
            "observed_at": (t0() - Duration::hours(3) + Duration::milliseconds(i * 100)).to_rfc3339(),
            "activity": "mowing", "blade_on": true,
        })
    };
    // 10 000 states before the walk (plus the two seeded ones, later than all of them).
    for chunk in (0..10_000).collect::<Vec<i64>>().chunks(1000) {
        let batch: Vec<Value> = chunk.iter().map(|i| report(*i)).collect();
        let answer = app
            .post(
                "/v1/states",
                Some(helpers::TOKEN_A_ADMIN),
                &Value::Array(batch),
            )
            .await;
        assert_eq!(answer.json()["stored"], 1000);
    }
    // Ingestion goes on during the walk: newer states, through the same route.
    let writer = {
        let app = app.clone();
        let reports: Vec<Value> = (0..100)
            .map(|b| {
                Value::Array(
                    (0..20)
                        .map(|i| {
                            json!({
                                "mower_id": bravo, "account_id": app.a.account_id,
                                "observed_at": (t0() + Duration::seconds(31) + Duration::milliseconds((b * 20 + i) * 10)).to_rfc3339(),
                                "activity": "mowing",
                            })
                        })
                        .collect(),
                )
            })
            .collect();
        tokio::spawn(async move {
            for batch in reports {
                let answer = app
                    .post("/v1/states", Some(helpers::TOKEN_A_ADMIN), &batch)
                    .await;
                assert_eq!(answer.status, StatusCode::OK);
                tokio::task::yield_now().await;
            }
        })
    };
    let (items, pages) = walk(&app, &format!("/v1/mowers/{bravo}/history?"), 250).await;
    writer.await.unwrap();
    let times: Vec<chrono::DateTime<chrono::Utc>> = items
        .iter()
        .map(|i| i["observed_at"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(pages > 40, "{pages} pages");
    assert!(
        times.windows(2).all(|w| w[0] < w[1]),
        "no state twice, in order"
    );
    let expected: Vec<_> = (0..10_000)
        .map(|i| t0() - Duration::hours(3) + Duration::milliseconds(i * 100))
        .chain([t0(), t0() + Duration::seconds(30)])
        .collect();
    assert_eq!(
        &times[..expected.len()],
        &expected[..],
        "each stored state once"
    );
    assert!(times[expected.len()..]
        .iter()
        .all(|t| *t > t0() + Duration::seconds(30)));
}

#[tokio::test]
async fn an_empty_cursor_is_the_first_page_of_history_and_track() {
    let app = TestApp::spawn().await;
    let bravo = app.a.mowers[0];
    more_states(&app, 3).await;
    for list in ["history", "track"] {
        app.assert_empty_cursor_is_the_first_page(
            &format!("/v1/mowers/{bravo}/{list}?limit=2"),
            TOKEN_A,
        )
        .await;
    }
}
