//! W8 mowing sessions (docs/rules.md §3, W8; decision 190): a pure fold over one mower's distinct
//! states in `observed_at` order, the same states W4 folds.
//!
//! [`SessionFold`] is incremental: [`SessionFold::push`] takes the next state and
//! [`SessionFold::sessions`] gives every session so far (the newest last, possibly open or still
//! able to merge). What it carries between states ([`SessionFold::current`], the rest after the
//! newest session's end, the previous state) is what a store keeps so that an in-order batch
//! extends the newest session without reading the states again. [`sessions_of`] folds a whole
//! sequence. Its tests are `tests/tests/sessions_rule.rs`, against the independent reference.
//!
//! Where a rule of W8 is decided, the code says which clause; the readings of its ambiguities are
//! decision 190: silence is judged against the next state only, never against the clock, so
//! that a stretch whose last state is the mower's newest stays open.

use crate::ids::{AccountId, MowerId};
use crate::report::Activity;
use crate::rows::HealthTotals;
use crate::rules::MAX_ATTRIBUTED_INTERVAL;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The default of `SWATH_SESSION_MERGE_GAP_SECONDS`: a stretch that starts at most this long
/// after the previous session ended joins it.
pub const DEFAULT_SESSION_MERGE_GAP: Duration = Duration::hours(2);

/// Why a session ended (W8): its last stretch's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The next state, within 5 minutes, was `docked` or `charging`.
    Docked,
    /// The next state, within 5 minutes, was `idle`.
    Stopped,
    /// The next state, within 5 minutes, was `error` (its `error_code` is the session's).
    Error,
    /// More than 5 minutes passed before the next state.
    Silent,
}

impl EndReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Docked => "docked",
            EndReason::Stopped => "stopped",
            EndReason::Error => "error",
            EndReason::Silent => "silent",
        }
    }

    /// Parses a wire name.
    pub fn parse(value: &str) -> Option<EndReason> {
        [
            EndReason::Docked,
            EndReason::Stopped,
            EndReason::Error,
            EndReason::Silent,
        ]
        .into_iter()
        .find(|r| r.as_str() == value)
    }

    /// The end reason of a stretch closed by a non-working state of activity `activity`.
    fn closed_by(activity: Activity) -> EndReason {
        match activity {
            Activity::Error => EndReason::Error,
            Activity::Idle => EndReason::Stopped,
            _ => EndReason::Docked,
        }
    }
}

/// W8: a state is working when its activity is `leaving`, `mowing`, `returning` or `paused`.
pub fn is_working(activity: Activity) -> bool {
    matches!(
        activity,
        Activity::Leaving | Activity::Mowing | Activity::Returning | Activity::Paused
    )
}

/// What a session needs of one state (a history row joined with its position).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionPoint {
    pub observed_at: DateTime<Utc>,
    pub activity: Activity,
    pub blade_on: bool,
    pub battery_percent: Option<u8>,
    pub error_code: Option<String>,
    pub lat: Option<f64>,
    pub lon: Option<f64>,
}

impl SessionPoint {
    /// The point of a state report.
    pub fn of(state: &crate::StateReport) -> Self {
        Self {
            observed_at: state.observed_at,
            activity: state.activity,
            blade_on: state.blade_on,
            battery_percent: state.battery_percent,
            error_code: state.error_code.clone(),
            lat: state.position.as_ref().map(|p| p.lat),
            lon: state.position.as_ref().map(|p| p.lon),
        }
    }

    /// The point of the mower's newest counted state as its health totals remember it: what
    /// the fold needs of the previous state (its time, activity, blade and position) when an
    /// in-order batch resumes it. Battery and error code are not remembered; the fold never
    /// reads them from the previous state (they were taken when it was pushed).
    pub fn newest_counted(health: &HealthTotals) -> Self {
        Self {
            observed_at: health.counted_until,
            activity: health.last_activity,
            blade_on: health.last_blade_on,
            battery_percent: None,
            error_code: None,
            lat: health.last_lat,
            lon: health.last_lon,
        }
    }
}

/// One mowing session (W8).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Derived from the mower and `started_at` ([`session_id`]).
    pub id: Uuid,
    pub mower_id: MowerId,
    pub started_at: DateTime<Utc>,
    /// `None` while open (the last stretch's last state is the mower's newest).
    pub ended_at: Option<DateTime<Utc>>,
    /// `None` while open.
    pub end_reason: Option<EndReason>,
    /// The closing state's error code, when the end reason is `error`.
    pub error_code: Option<String>,
    /// W4's intervals whose earlier state lies in `[started_at, ended_at)`.
    pub mowing_ms: i64,
    pub blade_ms: i64,
    pub distance_mm: i64,
    /// Merged stretches minus one.
    pub breaks: i64,
    /// States from the first through the closing state, rests between merged stretches included.
    pub states: i64,
    pub first_lat: Option<f64>,
    pub first_lon: Option<f64>,
    pub last_lat: Option<f64>,
    pub last_lon: Option<f64>,
    pub first_battery_percent: Option<u8>,
    pub last_battery_percent: Option<u8>,
    /// The local date of `started_at` in the site's time zone.
    pub local_date: NaiveDate,
}

impl Session {
    /// True while the session's last stretch is open.
    pub fn is_open(&self) -> bool {
        self.ended_at.is_none()
    }

    /// Counts `point` as one of the session's states: its position and battery become the last
    /// known (and the first, when none was known yet).
    fn take(&mut self, point: &SessionPoint) {
        self.states += 1;
        if let (Some(lat), Some(lon)) = (point.lat, point.lon) {
            if self.first_lat.is_none() {
                self.first_lat = Some(lat);
                self.first_lon = Some(lon);
            }
            self.last_lat = Some(lat);
            self.last_lon = Some(lon);
        }
        if let Some(b) = point.battery_percent {
            self.first_battery_percent = self.first_battery_percent.or(Some(b));
            self.last_battery_percent = Some(b);
        }
    }
}

/// A session's id: UUID version 8 whose first 48 bits are the Unix milliseconds of `started_at`
/// (ids sort by start, as event ids do by time) and the rest the SHA-256 of
/// `("session", mower, started_at µs)`: the same for a given start in every store and replica.
pub fn session_id(mower_id: MowerId, started_at: DateTime<Utc>) -> Uuid {
    let mut hash = Sha256::new();
    hash.update(b"session");
    hash.update(mower_id.0.as_bytes());
    hash.update(started_at.timestamp_micros().to_be_bytes());
    let digest = hash.finalize();
    let millis = started_at.timestamp_millis().clamp(0, (1 << 48) - 1) as u64;
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    bytes[6..].copy_from_slice(&digest[..10]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// What the states after the newest session's end would add to it, were a later stretch to merge
/// into it (W8: "rests between merged stretches included"): their count, the blade time of the
/// intervals they open, and their last known position and battery.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rest {
    pub states: i64,
    pub blade_ms: i64,
    pub first_lat: Option<f64>,
    pub first_lon: Option<f64>,
    pub last_lat: Option<f64>,
    pub last_lon: Option<f64>,
    pub first_battery_percent: Option<u8>,
    pub last_battery_percent: Option<u8>,
}

impl Rest {
    fn take(&mut self, point: &SessionPoint) {
        self.states += 1;
        if let (Some(lat), Some(lon)) = (point.lat, point.lon) {
            if self.first_lat.is_none() {
                self.first_lat = Some(lat);
                self.first_lon = Some(lon);
            }
            self.last_lat = Some(lat);
            self.last_lon = Some(lon);
        }
        if let Some(b) = point.battery_percent {
            self.first_battery_percent = self.first_battery_percent.or(Some(b));
            self.last_battery_percent = Some(b);
        }
    }

    /// Adds the rest to `session` (a later stretch merged into it).
    fn merge_into(self, session: &mut Session) {
        session.states += self.states;
        session.blade_ms += self.blade_ms;
        if self.last_lat.is_some() {
            if session.first_lat.is_none() {
                session.first_lat = self.first_lat;
                session.first_lon = self.first_lon;
            }
            session.last_lat = self.last_lat;
            session.last_lon = self.last_lon;
        }
        if self.last_battery_percent.is_some() {
            session.first_battery_percent =
                session.first_battery_percent.or(self.first_battery_percent);
            session.last_battery_percent = self.last_battery_percent;
        }
    }
}

/// The incremental W8 fold of one mower (module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct SessionFold {
    mower_id: MowerId,
    zone: Tz,
    merge_gap: Duration,
    /// Sessions that can no longer change (a later session started beyond the merge gap).
    closed: Vec<Session>,
    /// The newest session: open, or ended and still able to merge with a later stretch.
    pub current: Option<Session>,
    /// The states after `current`'s end.
    pub rest: Rest,
    /// The previous state: the earlier end of the next interval.
    pub last: Option<SessionPoint>,
}

impl SessionFold {
    /// An empty fold for `mower_id`, whose site is in `zone`.
    pub fn new(mower_id: MowerId, zone: Tz, merge_gap: Duration) -> Self {
        Self {
            mower_id,
            zone,
            merge_gap,
            closed: Vec::new(),
            current: None,
            rest: Rest::default(),
            last: None,
        }
    }

    /// A fold that continues from a stored newest session, the rest after it and the mower's
    /// newest counted state: what an in-order batch extends.
    pub fn resume(
        mower_id: MowerId,
        zone: Tz,
        merge_gap: Duration,
        current: Option<Session>,
        rest: Rest,
        last: Option<SessionPoint>,
    ) -> Self {
        Self {
            current,
            rest,
            last,
            ..Self::new(mower_id, zone, merge_gap)
        }
    }

    /// Folds the next state (strictly newer than every state folded so far).
    pub fn push(&mut self, point: SessionPoint) {
        let working = is_working(point.activity);
        let Some(previous) = self.last.take() else {
            if working {
                self.start(&point);
            }
            self.last = Some(point);
            return;
        };
        let gap = point.observed_at - previous.observed_at;
        let within = gap <= MAX_ATTRIBUTED_INTERVAL;
        let open = self.current.as_ref().is_some_and(Session::is_open);
        // The interval previous → point (W4's, when at most 5 minutes long) belongs to the
        // session when its earlier state lies in [started_at, ended_at): the open stretch's
        // states; else to the rest, which joins the session only if a later stretch merges.
        if within {
            let ms = gap.num_milliseconds();
            if open {
                let session = self.current.as_mut().expect("open");
                if previous.activity == Activity::Mowing {
                    session.mowing_ms += ms;
                    if let (Some(a), Some(b), Some(c), Some(d)) =
                        (previous.lat, previous.lon, point.lat, point.lon)
                    {
                        session.distance_mm += crate::rules::distance_mm(a, b, c, d);
                    }
                }
                if previous.blade_on {
                    session.blade_ms += ms;
                }
            } else if self.current.is_some() && previous.blade_on {
                self.rest.blade_ms += ms;
            }
        }
        if open {
            let session = self.current.as_mut().expect("open");
            if within && working {
                // The stretch goes on.
                session.take(&point);
                self.last = Some(point);
                return;
            }
            if within {
                // Closed by the next state, which is the session's closing state.
                session.ended_at = Some(point.observed_at);
                let reason = EndReason::closed_by(point.activity);
                session.end_reason = Some(reason);
                session.error_code = match reason {
                    EndReason::Error => point.error_code.clone(),
                    _ => None,
                };
                session.take(&point);
                self.rest = Rest::default();
                self.last = Some(point);
                return;
            }
            // Silence: the stretch ends at its last state.
            session.ended_at = Some(previous.observed_at);
            session.end_reason = Some(EndReason::Silent);
            session.error_code = None;
            self.rest = Rest::default();
        }
        if working {
            self.start(&point);
        } else if self.current.is_some() {
            self.rest.take(&point);
        }
        self.last = Some(point);
    }

    /// A new stretch starts at `point`: it merges into the newest session when it starts at most
    /// the merge gap after that session's end, else it opens a new session.
    fn start(&mut self, point: &SessionPoint) {
        let rest = std::mem::take(&mut self.rest);
        if let Some(session) = self.current.as_mut() {
            let ended = session
                .ended_at
                .expect("a stretch starts only after the last ended");
            if point.observed_at - ended <= self.merge_gap {
                rest.merge_into(session);
                session.breaks += 1;
                session.ended_at = None;
                session.end_reason = None;
                session.error_code = None;
                session.take(point);
                return;
            }
        }
        let mut session = Session {
            id: session_id(self.mower_id, point.observed_at),
            mower_id: self.mower_id,
            started_at: point.observed_at,
            ended_at: None,
            end_reason: None,
            error_code: None,
            mowing_ms: 0,
            blade_ms: 0,
            distance_mm: 0,
            breaks: 0,
            states: 0,
            first_lat: None,
            first_lon: None,
            last_lat: None,
            last_lon: None,
            first_battery_percent: None,
            last_battery_percent: None,
            local_date: point.observed_at.with_timezone(&self.zone).date_naive(),
        };
        session.take(point);
        if let Some(done) = self.current.replace(session) {
            self.closed.push(done);
        }
    }

    /// The sessions that can no longer change, oldest first (drained: a store writes them once).
    pub fn take_closed(&mut self) -> Vec<Session> {
        std::mem::take(&mut self.closed)
    }

    /// Every session folded so far, oldest first: the closed ones, then the newest.
    pub fn sessions(&self) -> Vec<Session> {
        self.closed
            .iter()
            .chain(self.current.as_ref())
            .cloned()
            .collect()
    }
}

/// W8 over a whole sequence: the sessions of `points` (one mower's distinct states, in
/// `observed_at` order), oldest first.
pub fn sessions_of(
    mower_id: MowerId,
    zone: Tz,
    merge_gap: Duration,
    points: impl IntoIterator<Item = SessionPoint>,
) -> Vec<Session> {
    let mut fold = SessionFold::new(mower_id, zone, merge_gap);
    for point in points {
        fold.push(point);
    }
    fold.sessions()
}

/// A stored session: the session and the account whose states made it (a per-mower read answers
/// only the rows of the principal's account, like every child row of a mower).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRow {
    pub account_id: AccountId,
    #[serde(flatten)]
    pub session: Session,
}

/// A mower's newest stored session and the rest after its end: with the health totals' newest
/// counted state ([`SessionPoint::newest_counted`]), what [`SessionFold::resume`] needs to extend
/// it by an in-order batch without reading states.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionCarry {
    pub newest: Option<Session>,
    pub rest: Rest,
}

/// A mower's newest session and the rest after its end as a batch leaves them: what the store
/// keeps beside the mower's health totals (decision 207), so that the next in-order batch resumes
/// it from the row it locks anyway.
#[derive(Clone, Debug, PartialEq)]
pub struct NewestSession {
    pub mower_id: MowerId,
    /// The account whose states made the session (that of the mower's rows).
    pub account_id: AccountId,
    pub carry: SessionCarry,
}

/// What a batch changes of the sessions, written by the store with the batch's other rows.
///
/// A stored session row is final once a later session starts; the newest session's running
/// figures live in `newest` (decision 207), so an in-order batch that only extends it upserts no
/// row.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionChanges {
    /// Inserted or replaced, keyed by `(mower, started_at)`, each key at most once: sessions that
    /// closed, sessions a recompute gave, and a newest session whose start is not stored yet.
    pub upsert: Vec<SessionRow>,
    /// Keys `(mower, started_at)` a recompute no longer gives: removed. Disjoint from `upsert`.
    pub remove: Vec<(MowerId, DateTime<Utc>)>,
    /// The mowers whose newest session or rest changed, each at most once, in mower id order:
    /// replaces what the store keeps of the newest session. Every one of them has its health
    /// row in the same batch's changes (the ingest sees to it), so a store may keep the carry
    /// in that row.
    pub newest: Vec<NewestSession>,
}

impl SessionChanges {
    pub fn is_empty(&self) -> bool {
        self.upsert.is_empty() && self.remove.is_empty() && self.newest.is_empty()
    }
}
