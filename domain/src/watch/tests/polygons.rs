//! GeoJSON polygon validation at its limits (docs/rules.md §4; `GeoPolygon::from_geojson`): each
//! condition of the validation is met exactly by one valid polygon and missed by one invalid
//! one, whose refusal names the problem; and where a position lies relative to a fence with a hole.

use super::*;
use crate::watch::geometry::{accuracy_of, MAX_SPAN_DEG, MAX_VERTICES};

fn polygon(rings: Vec<Vec<[f64; 2]>>) -> serde_json::Value {
    json!({"type": "Polygon", "coordinates": rings})
}

/// A closed axis-aligned rectangle from `(lon, lat)` to `(lon + w, lat + h)`, in degrees.
fn rectangle(lon: f64, lat: f64, w: f64, h: f64) -> Vec<[f64; 2]> {
    vec![
        [lon, lat],
        [lon + w, lat],
        [lon + w, lat + h],
        [lon, lat + h],
        [lon, lat],
    ]
}

fn refusal(value: serde_json::Value) -> String {
    GeoPolygon::from_geojson(&value)
        .expect_err(&value.to_string())
        .0
}

fn accepted(value: serde_json::Value) {
    if let Err(e) = GeoPolygon::from_geojson(&value) {
        panic!("{value}: {e}");
    }
}

#[test]
fn the_shape_of_the_object_is_checked_first() {
    assert!(refusal(json!([1, 2])).contains("must be a GeoJSON object"));
    assert!(refusal(json!({"coordinates": []})).contains("`type` must be `Polygon`"));
    assert!(refusal(json!({"type": "Polygon"})).contains("needs `coordinates`"));
    assert!(refusal(json!({"type": "Polygon", "coordinates": 5})).contains("needs `coordinates`"));
    assert!(refusal(polygon(vec![])).contains("at least its exterior ring"));
    assert!(refusal(json!({"type": "Polygon", "coordinates": [5]}))
        .contains("Ring 0 must be an array of positions"));
    let short =
        json!({"type": "Polygon", "coordinates": [[[0, 0], [0.001], [0.001, 0.001], [0, 0]]]});
    assert!(refusal(short).contains("Position 1 of ring 0 must be [lon, lat]"));
    let text =
        json!({"type": "Polygon", "coordinates": [[[0, 0], ["0.001", 0], [0.001, 0.001], [0, 0]]]});
    assert!(refusal(text).contains("Position 1 of ring 0 must have a longitude"));
    // A third number (an altitude, RFC 7946 §3.1.1) is allowed and ignored.
    accepted(json!({"type": "Polygon", "coordinates": [[
        [0, 0, 30], [0.001, 0, 30], [0.001, 0.001, 31], [0, 0, 30]
    ]]}));
}

#[test]
fn a_ring_needs_four_positions_and_a_triangle_is_enough() {
    let triangle = vec![[0.0, 0.0], [0.001, 0.0], [0.0, 0.001], [0.0, 0.0]];
    accepted(polygon(vec![triangle.clone()]));
    let open = triangle[..3].to_vec();
    assert!(
        refusal(polygon(vec![open])).contains("has 3 positions; a linear ring needs at least 4")
    );
    // Four positions but two distinct segments: no ring.
    let there_and_back = vec![[0.0, 0.0], [0.001, 0.0], [0.001, 0.0], [0.0, 0.0]];
    assert!(refusal(polygon(vec![there_and_back])).contains("fewer than 3 distinct positions"));
}

#[test]
fn longitudes_and_latitudes_are_valid_up_to_their_limits() {
    // Touching 180° E, 180° W, 90° N and 90° S is fine.
    accepted(polygon(vec![rectangle(179.999, 10.0, 0.001, 0.001)]));
    accepted(polygon(vec![rectangle(-180.0, 10.0, 0.001, 0.001)]));
    accepted(polygon(vec![rectangle(10.0, 89.999, 0.001, 0.001)]));
    // (Starting away from the pole: the fence's projection is centred on the first position,
    // and at a pole a degree of longitude has no width.)
    accepted(polygon(vec![vec![
        [10.0, -89.999],
        [10.0, -90.0],
        [10.001, -90.0],
        [10.001, -89.999],
        [10.0, -89.999],
    ]]));
    for ring in [
        rectangle(180.0, 10.0, 0.001, 0.001),
        rectangle(-180.001, 10.0, 0.001, 0.001),
        rectangle(10.0, 90.0, 0.001, 0.001),
        rectangle(10.0, -90.001, 0.001, 0.001),
    ] {
        assert!(
            refusal(polygon(vec![ring.clone()])).contains("must have a longitude in -180..180"),
            "{ring:?}"
        );
    }
}

#[test]
fn a_polygon_may_span_one_degree_in_each_direction_not_more() {
    // Exactly one degree wide and high (binary-exact values, so the span is exactly 1.0).
    accepted(polygon(vec![rectangle(
        13.0,
        52.0,
        MAX_SPAN_DEG,
        MAX_SPAN_DEG,
    )]));
    for ring in [
        rectangle(13.0, 52.0, 1.5, 0.001),
        rectangle(13.0, 52.0, 0.001, 1.5),
    ] {
        assert!(
            refusal(polygon(vec![ring.clone()])).contains("spans more than 1 degree"),
            "{ring:?}"
        );
    }
    // Holes count in the span too… but they lie inside the exterior, so only the exterior can
    // make it too wide; a hole far away is refused for lying outside.
    let far_hole = rectangle(20.0, 52.0, 0.001, 0.001);
    assert!(
        refusal(polygon(vec![rectangle(13.0, 52.0, 0.01, 0.01), far_hole]))
            .contains("spans more than 1 degree")
    );
}

#[test]
fn a_polygon_may_have_a_thousand_positions_not_more() {
    // A regular polygon of n positions (n - 1 distinct vertices and the closing one).
    let ring = |n: usize| -> Vec<[f64; 2]> {
        let k = n - 1;
        (0..=k)
            .map(|i| {
                let a = std::f64::consts::TAU * (i % k) as f64 / k as f64;
                [13.0 + 0.01 * a.cos(), 52.0 + 0.01 * a.sin()]
            })
            .collect()
    };
    accepted(polygon(vec![ring(MAX_VERTICES)]));
    assert!(refusal(polygon(vec![ring(MAX_VERTICES + 1)])).contains("more than 1000 positions"));
    // Over all rings: a 996-position exterior and a 5-position hole are 1001.
    let hole = rectangle(12.999, 51.999, 0.001, 0.001);
    assert!(refusal(polygon(vec![ring(MAX_VERTICES - 4), hole.clone()]))
        .contains("more than 1000 positions"));
    accepted(polygon(vec![ring(MAX_VERTICES - 5), hole]));
}

#[test]
fn an_exterior_ring_must_enclose_a_square_decimetre() {
    // A simple triangle with 1e-7° legs (about 1.1 cm by 0.7 cm): about 0.4 cm².
    let speck = vec![
        [13.0, 52.0],
        [13.000_000_1, 52.0],
        [13.0, 52.000_000_1],
        [13.0, 52.0],
    ];
    assert!(refusal(polygon(vec![speck])).contains("encloses no area"));
    // 1e-5° legs: about 1.1 m by 0.7 m, 0.4 m².
    accepted(polygon(vec![vec![
        [13.0, 52.0],
        [13.000_01, 52.0],
        [13.0, 52.000_01],
        [13.0, 52.0],
    ]]));
}

#[test]
fn a_ring_that_touches_itself_only_at_its_closing_position_is_simple() {
    // Segment 0 and the last segment meet at the closing position: neighbours, not a crossing.
    // A ring whose third segment comes back across the first is refused.
    accepted(polygon(vec![rectangle(0.0, 0.0, 0.01, 0.01)]));
    let hook = vec![
        [0.0, 0.0],
        [0.01, 0.0],
        [0.01, 0.01],
        [0.005, -0.005],
        [0.0, 0.0],
    ];
    assert!(refusal(polygon(vec![hook])).contains("crosses or touches itself"));
    // Two triangles joined at the first position: the ring passes through it again half-way,
    // where its first and last segments meet segments that are not their neighbours.
    let bow = vec![
        [0.005, 0.005],
        [0.01, 0.0],
        [0.01, 0.01],
        [0.005, 0.005],
        [0.0, 0.01],
        [0.0, 0.0],
        [0.005, 0.005],
    ];
    assert!(refusal(polygon(vec![bow])).contains("crosses or touches itself"));
}

#[test]
fn a_hole_is_outside_the_fence_and_its_boundary_counts_for_the_distance() {
    // 100 m square fence (as the watcher tests use) with a 20 m hole in its middle.
    let hole_ring = vec![
        [lon_of(40.0), lat_of(40.0)],
        [lon_of(60.0), lat_of(40.0)],
        [lon_of(60.0), lat_of(60.0)],
        [lon_of(40.0), lat_of(60.0)],
        [lon_of(40.0), lat_of(40.0)],
    ];
    let mut value = square().to_geojson();
    value["coordinates"]
        .as_array_mut()
        .unwrap()
        .push(json!(hole_ring));
    let fence = GeoPolygon::from_geojson(&value).unwrap().fence();
    let near = |placement: Placement, inside: bool, metres: f64| {
        assert_eq!(placement.inside, inside, "{placement:?}");
        assert!(
            (placement.boundary_distance_m - metres).abs() < 0.05,
            "{placement:?}"
        );
    };
    // The hole's centre: outside, 10 m from the hole's edge.
    near(fence.locate(lat_of(50.0), lon_of(50.0)), false, 10.0);
    // Between the hole and the fence: inside, 5 m from the hole (35 m from the fence).
    near(fence.locate(lat_of(50.0), lon_of(35.0)), true, 5.0);
    // Outside the fence: 10 m from it.
    near(fence.locate(lat_of(50.0), lon_of(110.0)), false, 10.0);
}

#[test]
fn clearly_means_farther_than_the_accuracy_and_a_bad_accuracy_counts_as_exact() {
    let inside = Placement {
        inside: true,
        boundary_distance_m: 5.0,
    };
    let outside = Placement {
        inside: false,
        ..inside
    };
    assert!(!inside.clearly_inside(5.0) && inside.clearly_inside(4.9));
    assert!(!inside.clearly_outside(1.0));
    assert!(!outside.clearly_outside(5.0) && outside.clearly_outside(4.9));
    assert!(!outside.clearly_inside(1.0));
    assert_eq!(accuracy_of(Some(3.5)), 3.5);
    for bad in [
        None,
        Some(0.0),
        Some(-2.0),
        Some(f64::NAN),
        Some(f64::INFINITY),
    ] {
        assert_eq!(accuracy_of(bad), 0.0, "{bad:?}");
    }
}
