//! Geofences and virtual zones as GeoJSON polygons (RFC 7946 §3.1.6), and where a position lies
//! relative to one.
//!
//! A polygon is validated once, when it is stored ([`GeoPolygon::from_geojson`]), and turned into
//! a [`Fence`] when the rules need it: the rings projected onto a local plane in metres around
//! the polygon's first vertex (equirectangular). For polygons the size of a garden or a park the
//! projection's error is far below a GNSS fix's; it lets `geo` answer "inside?" and "how far from
//! the boundary?" in plain Euclidean geometry, in metres. Polygons across the antimeridian are
//! refused rather than projected wrongly.

use geo::line_intersection::{line_intersection, LineIntersection};
use geo::{Contains, Coord, Distance, Euclidean, Line, LineString, Point, Polygon};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Mean Earth radius in metres (the one `geo`'s haversine uses).
const EARTH_RADIUS_M: f64 = 6_371_008.8;
/// The most vertices a polygon may have over all its rings: bounds the work per position.
pub const MAX_VERTICES: usize = 1000;
/// The widest a polygon may be in degrees of longitude or latitude: a fence is a garden or a
/// park, not a continent, and the local projection stays exact enough below this.
pub const MAX_SPAN_DEG: f64 = 1.0;

/// Why a GeoJSON polygon was refused. The text is for people (the API's problem detail).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidPolygon(pub String);

fn invalid(detail: impl Into<String>) -> InvalidPolygon {
    InvalidPolygon(detail.into())
}

/// A validated GeoJSON Polygon: an exterior ring and optional holes, each closed, positions as
/// `[lon, lat]` in degrees.
#[derive(Clone, Debug, PartialEq)]
pub struct GeoPolygon {
    rings: Vec<Vec<[f64; 2]>>,
}

impl GeoPolygon {
    /// Validates a GeoJSON geometry object of type `Polygon`: at least one ring, each ring closed
    /// with at least four positions, finite longitudes in -180..=180 and latitudes in -90..=90,
    /// at most [`MAX_VERTICES`] positions, spanning at most [`MAX_SPAN_DEG`], an exterior ring
    /// that encloses an area, and a simple polygon ([`check_simple`]): no ring crosses or
    /// touches itself, every hole lies inside the exterior ring, no two rings cross and no hole
    /// lies inside another.
    pub fn from_geojson(value: &Value) -> Result<GeoPolygon, InvalidPolygon> {
        let object = value
            .as_object()
            .ok_or_else(|| invalid("The geometry must be a GeoJSON object."))?;
        if object.get("type").and_then(Value::as_str) != Some("Polygon") {
            return Err(invalid("The geometry's `type` must be `Polygon`."));
        }
        let rings = object
            .get("coordinates")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("A Polygon needs `coordinates`: an array of linear rings."))?;
        if rings.is_empty() {
            return Err(invalid("A Polygon needs at least its exterior ring."));
        }
        let mut parsed = Vec::with_capacity(rings.len());
        let mut vertices = 0usize;
        for (r, ring) in rings.iter().enumerate() {
            let positions = ring
                .as_array()
                .ok_or_else(|| invalid(format!("Ring {r} must be an array of positions.")))?;
            if positions.len() < 4 {
                return Err(invalid(format!(
                    "Ring {r} has {} positions; a linear ring needs at least 4.",
                    positions.len()
                )));
            }
            vertices += positions.len();
            if vertices > MAX_VERTICES {
                return Err(invalid(format!(
                    "The polygon has more than {MAX_VERTICES} positions."
                )));
            }
            let mut coords = Vec::with_capacity(positions.len());
            for (p, position) in positions.iter().enumerate() {
                let pair = position
                    .as_array()
                    .filter(|a| a.len() >= 2)
                    .ok_or_else(|| {
                        invalid(format!("Position {p} of ring {r} must be [lon, lat]."))
                    })?;
                let lon = pair[0].as_f64();
                let lat = pair[1].as_f64();
                match (lon, lat) {
                    (Some(lon), Some(lat))
                        if lon.is_finite()
                            && lat.is_finite()
                            && (-180.0..=180.0).contains(&lon)
                            && (-90.0..=90.0).contains(&lat) =>
                    {
                        coords.push([lon, lat]);
                    }
                    _ => {
                        return Err(invalid(format!(
                            "Position {p} of ring {r} must have a longitude in -180..180 and a latitude in -90..90."
                        )))
                    }
                }
            }
            if coords.first() != coords.last() {
                return Err(invalid(format!(
                    "Ring {r} is not closed: its first and last positions differ."
                )));
            }
            parsed.push(coords);
        }
        let polygon = GeoPolygon { rings: parsed };
        let (min, max) = polygon.bounds();
        if max[0] - min[0] > MAX_SPAN_DEG || max[1] - min[1] > MAX_SPAN_DEG {
            return Err(invalid(format!(
                "The polygon spans more than {MAX_SPAN_DEG} degree; a fence or zone is a garden or a park."
            )));
        }
        check_simple(&polygon.rings)?;
        if geo::Area::unsigned_area(&Polygon::new(polygon.fence().exterior, vec![])) < 0.01 {
            return Err(invalid("The exterior ring encloses no area."));
        }
        Ok(polygon)
    }

    /// The GeoJSON geometry object.
    pub fn to_geojson(&self) -> Value {
        json!({"type": "Polygon", "coordinates": self.rings})
    }

    fn bounds(&self) -> ([f64; 2], [f64; 2]) {
        let mut min = [f64::INFINITY; 2];
        let mut max = [f64::NEG_INFINITY; 2];
        for p in self.rings.iter().flatten() {
            for i in 0..2 {
                min[i] = min[i].min(p[i]);
                max[i] = max[i].max(p[i]);
            }
        }
        (min, max)
    }

    /// The polygon projected for the rules. Callers cache it: see the watcher.
    pub fn fence(&self) -> Fence {
        let origin = self.rings[0][0];
        let cos_lat = origin[1].to_radians().cos();
        let project = |ring: &Vec<[f64; 2]>| -> LineString<f64> {
            ring.iter()
                .map(|p| project(origin, cos_lat, p[1], p[0]))
                .collect()
        };
        let exterior = project(&self.rings[0]);
        let interiors: Vec<LineString<f64>> = self.rings[1..].iter().map(project).collect();
        Fence {
            origin,
            cos_lat,
            polygon: Polygon::new(exterior.clone(), interiors),
            exterior,
        }
    }
}

/// The segments of a closed ring, without zero-length ones (repeated positions).
fn segments(ring: &[[f64; 2]]) -> Vec<Line<f64>> {
    ring.windows(2)
        .filter(|w| w[0] != w[1])
        .map(|w| Line::new(coord(w[0]), coord(w[1])))
        .collect()
}

fn coord(p: [f64; 2]) -> Coord<f64> {
    Coord { x: p[0], y: p[1] }
}

/// How two segments meet: `None` (apart, or only at an end of both when `adjacent`), or
/// `Some(true)` when they overlap along a stretch, `Some(false)` at one point.
fn meet(a: &Line<f64>, b: &Line<f64>, adjacent: bool) -> Option<bool> {
    match line_intersection(*a, *b)? {
        LineIntersection::Collinear { .. } => Some(true),
        LineIntersection::SinglePoint { intersection, .. } => {
            let shared_end = adjacent
                && [a.start, a.end].contains(&intersection)
                && [b.start, b.end].contains(&intersection);
            (!shared_end).then_some(false)
        }
    }
}

/// A valid simple polygon (OGC simple features): each ring simple (no segment meets another
/// except its neighbours at their shared position), holes strictly inside the exterior ring and
/// outside each other, no two rings crossing. Rings are compared in degrees: the local
/// projection the rules use keeps every crossing. At most [`MAX_VERTICES`] positions, so the
/// pairwise check stays below half a million segment pairs.
fn check_simple(rings: &[Vec<[f64; 2]>]) -> Result<(), InvalidPolygon> {
    let all: Vec<Vec<Line<f64>>> = rings.iter().map(|r| segments(r)).collect();
    for (r, ring) in all.iter().enumerate() {
        if ring.len() < 3 {
            return Err(invalid(format!(
                "Ring {r} has fewer than 3 distinct positions."
            )));
        }
        let n = ring.len();
        for i in 0..n {
            for j in i + 1..n {
                let adjacent = j == i + 1 || (i == 0 && j == n - 1);
                if let Some(overlap) = meet(&ring[i], &ring[j], adjacent) {
                    let how = if overlap {
                        "runs back over itself"
                    } else {
                        "crosses or touches itself"
                    };
                    return Err(invalid(format!(
                        "Ring {r} {how} (its segments {i} and {j} meet): a fence or zone must be \
                         a simple polygon."
                    )));
                }
            }
        }
    }
    for a in 0..all.len() {
        for b in a + 1..all.len() {
            let crossing = all[a]
                .iter()
                .any(|x| all[b].iter().any(|y| meet(x, y, false).is_some()));
            if crossing {
                let what = if a == 0 {
                    format!("Ring {b} (a hole) crosses or touches the exterior ring")
                } else {
                    format!("Rings {a} and {b} (holes) cross or touch each other")
                };
                return Err(invalid(format!(
                    "{what}: a fence or zone must be a simple polygon."
                )));
            }
        }
    }
    let exterior = Polygon::new(rings[0].iter().copied().map(coord).collect(), vec![]);
    for (h, hole) in rings.iter().enumerate().skip(1) {
        // No crossing: one position tells on which side the whole ring is.
        let inside = exterior.contains(&Point::from(coord(hole[0])));
        if !inside {
            return Err(invalid(format!(
                "Ring {h} (a hole) is not inside the exterior ring."
            )));
        }
        for (o, other) in rings.iter().enumerate().skip(1) {
            if o != h {
                let around = Polygon::new(other.iter().copied().map(coord).collect(), vec![]);
                if around.contains(&Point::from(coord(hole[0]))) {
                    return Err(invalid(format!(
                        "Ring {h} (a hole) lies inside ring {o} (another hole)."
                    )));
                }
            }
        }
    }
    Ok(())
}

impl Serialize for GeoPolygon {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_geojson().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for GeoPolygon {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        GeoPolygon::from_geojson(&value).map_err(serde::de::Error::custom)
    }
}

fn project(origin: [f64; 2], cos_lat: f64, lat: f64, lon: f64) -> Coord<f64> {
    let k = EARTH_RADIUS_M * std::f64::consts::PI / 180.0;
    Coord {
        x: (lon - origin[0]) * cos_lat * k,
        y: (lat - origin[1]) * k,
    }
}

/// A polygon ready for the rules: projected onto a local plane in metres.
#[derive(Clone, Debug)]
pub struct Fence {
    origin: [f64; 2],
    cos_lat: f64,
    polygon: Polygon<f64>,
    exterior: LineString<f64>,
}

/// Where a position lies relative to a polygon.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    /// Strictly inside (a point on the boundary is not).
    pub inside: bool,
    /// Distance to the nearest point of the boundary (any ring), in metres.
    pub boundary_distance_m: f64,
}

impl Placement {
    /// Clearly inside: inside by more than the position's accuracy.
    pub fn clearly_inside(&self, accuracy_m: f64) -> bool {
        self.inside && self.boundary_distance_m > accuracy_m
    }

    /// Clearly outside: outside by more than the position's accuracy.
    pub fn clearly_outside(&self, accuracy_m: f64) -> bool {
        !self.inside && self.boundary_distance_m > accuracy_m
    }
}

impl Fence {
    /// Where `(lat, lon)` lies.
    pub fn locate(&self, lat: f64, lon: f64) -> Placement {
        let point = Point::from(project(self.origin, self.cos_lat, lat, lon));
        let inside = self.polygon.contains(&point);
        let distance = std::iter::once(&self.exterior)
            .chain(self.polygon.interiors())
            .map(|ring| Euclidean::distance(&point, ring))
            .fold(f64::INFINITY, f64::min);
        Placement {
            inside,
            boundary_distance_m: distance,
        }
    }
}

/// A position's accuracy as the rules use it: unknown or invalid counts as exact.
pub fn accuracy_of(accuracy_m: Option<f64>) -> f64 {
    accuracy_m
        .filter(|a| a.is_finite() && *a > 0.0)
        .unwrap_or(0.0)
}
