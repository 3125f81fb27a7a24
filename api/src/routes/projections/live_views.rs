//! The three live views, `GET /v1/live/fleet`, `/v1/live/wall` and `/v1/live/health`: one route
//! each, declared by `live_view!`, all answered by [`live_answer`]. Their documents are in
//! `crate::dto::live_views`.

use super::{views, TAG};
use crate::auth::Reader;
use crate::dto::answers::LiveNotModified;
use crate::dto::live_views::{
    FleetDashboard, HealthSiteList, HealthWall, LiveMowerList, SiteWall, WallSiteList,
};
use crate::dto::params::Revalidation;
use crate::error::ApiError;
use crate::etag::json_with_etag_of;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Serialize;
use swath_application::projections::{FleetSnapshot, HealthSnapshot, WallSnapshot};
use swath_application::ProjectionError;
use swath_application::Projections;
use swath_domain::Principal;

/// A live view's document: how it is read and built, and what its entity tag covers.
pub(crate) trait LiveDocument: Serialize + Sized {
    type Snapshot;
    type Validator: Serialize;
    /// The principal's snapshot of this view.
    async fn read(
        views: &Projections,
        principal: &Principal,
    ) -> Result<Self::Snapshot, ProjectionError>;
    /// The document of `snapshot`, generated at `now`.
    fn document(snapshot: Self::Snapshot, now: DateTime<Utc>) -> Self;
    /// All of the document but `generated_at`: what its entity tag is computed over.
    fn validator(&self) -> &Self::Validator;
}

/// The answer of every live view: the principal's document, tagged over all but `generated_at`,
/// which is new on every request, so that a poller gets its `304` while the data is the same.
pub(crate) async fn live_answer<D: LiveDocument>(
    state: &AppState,
    principal: &Principal,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let snapshot = D::read(views(state)?, principal).await?;
    let document = D::document(snapshot, state.clock.now());
    json_with_etag_of(headers, &document, document.validator())
}

/// Declares a live view: its route `GET $path`, answered by [`live_answer`] with `$doc`, and
/// `$doc`'s [`LiveDocument`]: read by `Projections::$read`, its entity tag over `$field`.
/// `$description` is the operation's, without what every live view says of polling.
macro_rules! live_view {
    (
        $(#[$summary:meta])*
        $handler:ident: $path:literal => $doc:ident,
        of $snapshot:ty, read by $read:ident, tagged over $field:ident: $validator:ty,
        description = $description:literal,
        answer = $answer:literal
        $(, example = $($example:tt)+)?
    ) => {
        $(#[$summary])*
        #[utoipa::path(
            get,
            path = $path,
            tag = TAG,
            description = concat!(
                $description,
                " Poll it with `If-None-Match`: the answer is `304 Not Modified` while nothing in \
                 it but `generated_at` changed."
            ),
            security(("bearer" = ["read"])),
            params(Revalidation),
            responses(
                (status = 200, description = $answer, body = $doc,
                    headers(
                        ("ETag" = String, description = "The entity tag of this document, over \
                            all of it but `generated_at`."),
                        ("Cache-Control" = String, description = "`private, no-cache`: \
                            revalidate with `If-None-Match`."),
                    )
                    $(, example = $($example)+)?),
                LiveNotModified,
            ),
        )]
        pub async fn $handler(
            Reader(principal): Reader,
            State(state): State<AppState>,
            headers: HeaderMap,
        ) -> Result<Response, ApiError> {
            live_answer::<$doc>(&state, &principal, &headers).await
        }

        impl LiveDocument for $doc {
            type Snapshot = $snapshot;
            type Validator = $validator;

            async fn read(
                views: &Projections,
                principal: &Principal,
            ) -> Result<$snapshot, ProjectionError> {
                views.$read(principal).await
            }

            fn document(snapshot: $snapshot, now: DateTime<Utc>) -> Self {
                Self::of(snapshot, now)
            }

            fn validator(&self) -> &$validator {
                &self.$field
            }
        }
    };
}

live_view! {
    /// The fleet dashboard
    live_fleet: "/v1/live/fleet" => FleetDashboard,
    of FleetSnapshot, read by fleet, tagged over mowers: LiveMowerList,
    description = "A bounded snapshot of your fleet: the first 64 mowers visible to the token (by \
        display order, then name, then id), each with its latest activity, its 32 most urgent \
        open alerts and its operator on duty. Every list says whether it was cut (`truncated`) \
        and where (`limit`); the complete list of mowers is `GET /v1/mowers`. The cost of this \
        call does not grow with the fleet.",
    answer = "The fleet dashboard."
}

live_view! {
    /// The site wall
    live_wall: "/v1/live/wall" => SiteWall,
    of WallSnapshot, read by wall, tagged over sites: WallSiteList,
    description = "A bounded snapshot for a display wall: the first 16 sites visible to the \
        token, each with its first 32 mowers in the field (reported, and neither docked, charging \
        nor offline; filtered before the cut), each with its 32 most urgent open alerts and its \
        operator on duty. Every list carries `truncated` and `limit`.",
    answer = "The site wall.",
    example = json!({
        "generated_at": "2026-06-01T12:00:05Z",
        "sites": {"items": [{
            "site": {"id": "0190a2b4-0000-7000-8000-000000000001", "name": "Riverside park",
                "time_zone": "Europe/Berlin", "display_order": 0},
            "mowers": {"items": [{
                "id": "0190a2b4-0000-7000-8000-000000000002",
                "site_id": "0190a2b4-0000-7000-8000-000000000001", "name": "Lawn 1",
                "model": "M1", "display_order": 0, "activity": "mowing", "battery_percent": 81,
                "observed_at": "2026-06-01T12:00:00Z", "last_seen_at": "2026-06-01T12:00:01Z",
                "offline": false,
                "operator": {"assignment_id": "0190a2b4-0000-7000-8000-000000000003",
                    "operator": "Robin", "priority": "high",
                    "updated_at": "2026-06-01T08:00:00Z"},
                "alerts": {"items": [{"id": "0190a2b4-0000-7000-8000-000000000004",
                    "kind": "battery_low", "severity": "normal",
                    "raised_at": "2026-06-01T11:58:00Z", "code": null}],
                    "truncated": false, "limit": 32}}],
                "truncated": true, "limit": 32}}],
            "truncated": false, "limit": 16}})
}

live_view! {
    /// The health wall
    live_health: "/v1/live/health" => HealthWall,
    of HealthSnapshot, read by health, tagged over sites: HealthSiteList,
    description = "A bounded snapshot of your mowers' health: the first 16 sites visible to the \
        token, each with its first 32 mowers, each with a status computed over all of its open \
        alerts (never a window of them), its blade wear and its operator on duty. Every list \
        carries `truncated` and `limit`.",
    answer = "The health wall."
}
