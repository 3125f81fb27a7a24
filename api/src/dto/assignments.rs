//! The operator assignments of a mower, which the live views rank to show who is on duty.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use swath_domain::{Assignment, Priority};
use utoipa::ToSchema;
use uuid::Uuid;

/// How an assignment ranks: the active assignment of the highest priority is on duty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = Priority)]
pub enum PriorityDto {
    Critical,
    High,
    Normal,
    Low,
}

impl PriorityDto {
    pub(crate) fn of(p: Priority) -> Self {
        match p {
            Priority::Critical => PriorityDto::Critical,
            Priority::High => PriorityDto::High,
            Priority::Normal => PriorityDto::Normal,
            Priority::Low => PriorityDto::Low,
        }
    }

    pub(crate) fn domain(self) -> Priority {
        match self {
            PriorityDto::Critical => Priority::Critical,
            PriorityDto::High => Priority::High,
            PriorityDto::Normal => Priority::Normal,
            PriorityDto::Low => Priority::Low,
        }
    }
}

/// An operator assignment of a mower.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Assignment)]
pub struct AssignmentDto {
    /// The assignment's id.
    pub id: Uuid,
    /// The mower.
    pub mower_id: Uuid,
    /// The operator's name.
    #[schema(example = "Robin")]
    pub operator: String,
    /// Its priority: the active assignment of the highest priority is on duty.
    pub priority: PriorityDto,
    /// Whether it can be on duty.
    pub active: bool,
    /// When it was last changed (ties of priority go to the most recent).
    pub updated_at: DateTime<Utc>,
}

impl From<Assignment> for AssignmentDto {
    fn from(a: Assignment) -> Self {
        Self {
            id: a.id,
            mower_id: a.mower_id.0,
            operator: a.operator,
            priority: PriorityDto::of(a.priority),
            active: a.active,
            updated_at: a.updated_at,
        }
    }
}

/// The assignments of a mower: active first, then in ranking order (the first is on duty).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct AssignmentList {
    /// Every assignment of the mower (at most 64).
    pub items: Vec<AssignmentDto>,
    /// Always `false`: a mower has at most `limit` assignments.
    pub truncated: bool,
    /// The most assignments a mower may have (64).
    #[schema(example = 64)]
    pub limit: u32,
}

/// An assignment to add, or the new values of one.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AssignmentBody {
    /// The operator's name, 1 to 128 characters.
    #[schema(example = "Robin")]
    pub operator: String,
    /// `critical`, `high`, `normal` or `low`.
    pub priority: PriorityDto,
    /// Whether it can be on duty (default `true`).
    #[serde(default = "active_default")]
    #[schema(default = true)]
    pub active: bool,
}

fn active_default() -> bool {
    true
}

impl AssignmentBody {
    /// The assignment as the use case takes it, or the `422` of its operator's name.
    pub(crate) fn checked(
        &self,
    ) -> Result<swath_application::AssignmentSpec, crate::error::ApiError> {
        use swath_domain::valid::{Label, TextRule};
        Ok(swath_application::AssignmentSpec {
            operator: Label::new("operator", self.operator.as_str(), TextRule::OPERATOR)?,
            priority: self.priority.domain(),
            active: self.active,
        })
    }
}
