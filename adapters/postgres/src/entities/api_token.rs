use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "api_tokens")]
pub struct Model {
    /// SHA-256 of the token, hex encoded. The token itself is never stored.
    #[sea_orm(primary_key, auto_increment = false)]
    pub token_hash: String,
    /// What lists show and revocation names (unique).
    pub id: Uuid,
    /// A label for people; may be empty.
    pub name: String,
    pub account_id: Uuid,
    pub scopes: Vec<String>,
    pub sites: Option<Vec<Uuid>>,
    pub created_at: DateTimeWithTimeZone,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
