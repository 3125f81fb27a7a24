//! The parameters many operations share: a page's `limit` and `cursor`, `If-None-Match`, the id
//! in a path that names one resource, and the second id of a path that names one zone or
//! assignment of a mower.

use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

/// `limit` and `cursor`, the parameters of every paged list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// The most items to return, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000, example = 100)]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the previous page, unchanged. Absent (or
    /// empty) for the first page.
    #[param(
        example = "bW93ZXJzOlswLCJBbHBoYSIsIjAxOTBhMmI0LTAwMDAtNzAwMC04MDAwLTAwMDAwMDAwMDAwMSJd"
    )]
    pub cursor: Option<String>,
}

/// `If-None-Match`, the request header of every route that answers an `ETag`, as the document
/// states it (the handlers read it from their `HeaderMap`, `crate::etag`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct Revalidation {
    /// An `ETag` from an earlier answer: when it is still current, the answer is `304 Not Modified` without a body.
    #[serde(rename = "If-None-Match")]
    pub if_none_match: Option<String>,
}

/// A path's ids that name one resource: what its `400` and `404` say
/// (`crate::dto::answers::ById`).
pub trait IdPath {
    /// The `404`, as in "No such site is visible to this token.".
    const NOT_VISIBLE: &'static str;
    /// How the `400` names the id that is not a UUID: "An id" where the path has more than one.
    const ID: &'static str = "The id";
}

/// Declares the `{id}` parameter of the paths that name one `$what`, as the document states it
/// once for all of them (the handlers read it with `ApiPath<Uuid>`).
macro_rules! id_path {
    ($name:ident, $what:literal, $doc:literal $(, example = $example:literal)?) => {
        #[doc = concat!("The `{id}` of every path that names one ", $what, ".")]
        #[derive(Debug, Deserialize, IntoParams)]
        #[into_params(parameter_in = Path)]
        pub struct $name {
            #[doc = $doc]
            $(#[param(example = $example)])?
            pub id: Uuid,
        }

        impl IdPath for $name {
            const NOT_VISIBLE: &'static str =
                concat!("No such ", $what, " is visible to this token.");
        }
    };
}

id_path!(
    MowerPath,
    "mower",
    "The mower's id.",
    example = "0190a2b4-5c3e-7d21-9f00-3b1d2c4e5f60"
);
id_path!(
    SitePath,
    "site",
    "The site's id.",
    example = "0190a2b4-5c3e-7d21-9f00-00000000a001"
);
id_path!(
    TokenPath,
    "token",
    "The token's id.",
    example = "0190a2b4-5c3e-7d21-9f00-00000000c001"
);
id_path!(
    AccountPath,
    "account",
    "The account's id.",
    example = "0190a2b4-5c3e-7d21-9f00-0000000000a0"
);
id_path!(
    EndpointPath,
    "endpoint",
    "The endpoint's id.",
    example = "0190a2b4-5c3e-7d21-9f00-00000000e001"
);
id_path!(
    ImportPath,
    "import",
    "The import's id, from the `Location` of its `POST`."
);

/// The `{zone_id}` of the paths that name one zone of a mower, next to [`MowerPath`]'s `{id}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ZonePath {
    /// The zone's id.
    pub zone_id: Uuid,
}

impl IdPath for ZonePath {
    // A zone is found through its mower: either may be the one missing.
    const NOT_VISIBLE: &'static str =
        "No such mower is visible to this token, or it has no such zone.";
    const ID: &'static str = "An id";
}

/// The `{assignment_id}` of the paths that name one operator assignment of a mower, next to
/// [`MowerPath`]'s `{id}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct AssignmentPath {
    /// The assignment's id.
    pub assignment_id: Uuid,
}
