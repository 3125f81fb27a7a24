//! A mower's lawn: a turned rectangle with its dock, in a local frame in metres projected to
//! WGS 84.

use geo::{LineString, Polygon};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// metres wide, so a local flat (equirectangular) projection is far more precise than needed.
pub(crate) const METRES_PER_DEGREE: f64 = 111_320.0;
/// Distance between two mowing lanes (a little less than a cutting width, so lanes overlap).
const LANE_SPACING_M: f64 = 0.3;
/// The mower keeps this far from the lawn's edges while mowing.
const EDGE_MARGIN_M: f64 = 1.0;
/// The dock stands this far inside the lawn's edge (inside, so that every position, docked or
/// not, is inside the lawn and a geofence drawn along the lawn never fires spuriously).
const DOCK_INSET_M: f64 = 0.5;

/// A rectangular lawn, turned by a bearing, with its dock inside one of its edges.
///
/// Positions are computed in a local frame in metres (`u` along the lanes, `v` across them, the
/// origin at the lawn's centre) and projected to WGS 84 by an affine map. An affine map keeps
/// "inside" inside, so a point of the local rectangle is inside [`Lawn::polygon`] exactly.
#[derive(Clone, Debug, PartialEq)]
pub struct Lawn {
    centre_lat: f64,
    centre_lon: f64,
    width_m: f64,
    depth_m: f64,
    /// Direction of the lanes (`u`), degrees clockwise from north.
    bearing_deg: f64,
    /// The dock's `u`; its `v` is just inside the `-v` edge.
    dock_u: f64,
}

impl Lawn {
    /// A lawn of `width_m` × `depth_m` (each at least 10 m) centred on `(lat, lon)`, its lanes
    /// along `bearing_deg`, the dock in the middle of the edge parallel to the lanes on the `-v`
    /// side.
    pub fn new(lat: f64, lon: f64, width_m: f64, depth_m: f64, bearing_deg: f64) -> Lawn {
        Lawn {
            centre_lat: lat,
            centre_lon: lon,
            width_m: width_m.max(10.0),
            depth_m: depth_m.max(10.0),
            bearing_deg,
            dock_u: 0.0,
        }
    }

    /// A lawn of 30–60 m a side in a random orientation around `(lat, lon)`, its dock somewhere
    /// along one edge.
    pub fn random(lat: f64, lon: f64, seed: u64) -> Lawn {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut lawn = Lawn::new(
            lat,
            lon,
            rng.gen_range(30.0..=60.0),
            rng.gen_range(30.0..=60.0),
            rng.gen_range(0.0..180.0),
        );
        lawn.dock_u = lawn.width_m * rng.gen_range(-0.3..=0.3);
        lawn
    }

    /// The lawn's outline in WGS 84 (`x` = longitude, `y` = latitude), closed.
    pub fn polygon(&self) -> Polygon<f64> {
        let (hw, hd) = (self.width_m / 2.0, self.depth_m / 2.0);
        let corners = [(-hw, -hd), (hw, -hd), (hw, hd), (-hw, hd), (-hw, -hd)];
        let ring: Vec<(f64, f64)> = corners
            .iter()
            .map(|&(u, v)| {
                let (lat, lon) = self.to_lat_lon(u, v);
                (lon, lat)
            })
            .collect();
        Polygon::new(LineString::from(ring), vec![])
    }

    /// The dock's position, `(lat, lon)`.
    pub fn dock_lat_lon(&self) -> (f64, f64) {
        let (u, v) = self.dock();
        self.to_lat_lon(u, v)
    }

    pub(crate) fn dock(&self) -> (f64, f64) {
        (self.dock_u, -self.depth_m / 2.0 + DOCK_INSET_M)
    }

    pub(crate) fn to_lat_lon(&self, u: f64, v: f64) -> (f64, f64) {
        let (east, north) = self.to_east_north(u, v);
        let lat = self.centre_lat + north / METRES_PER_DEGREE;
        let lon = self.centre_lon + east / (METRES_PER_DEGREE * self.centre_lat.to_radians().cos());
        (lat, lon)
    }

    /// Rotates a local vector into (east, north): `u` points along the bearing, `v` 90° clockwise
    /// of it.
    fn to_east_north(&self, u: f64, v: f64) -> (f64, f64) {
        let (sin, cos) = self.bearing_deg.to_radians().sin_cos();
        (u * sin + v * cos, u * cos - v * sin)
    }

    /// The compass heading (degrees clockwise from north, 0..360) of a local direction.
    pub(crate) fn heading_deg(&self, du: f64, dv: f64) -> f64 {
        let (east, north) = self.to_east_north(du, dv);
        east.atan2(north).to_degrees().rem_euclid(360.0)
    }

    /// `v` of lane `k` (lane 0 is nearest the dock's edge).
    pub(crate) fn lane_v(&self, lane: usize) -> f64 {
        -self.depth_m / 2.0 + EDGE_MARGIN_M + lane as f64 * LANE_SPACING_M
    }

    pub(crate) fn lane_count(&self) -> usize {
        ((self.depth_m - 2.0 * EDGE_MARGIN_M) / LANE_SPACING_M).floor() as usize + 1
    }

    /// `u` of the end of a lane driven in direction `dir` (+1 or -1).
    pub(crate) fn lane_end_u(&self, dir: f64) -> f64 {
        dir * (self.width_m / 2.0 - EDGE_MARGIN_M)
    }
}
