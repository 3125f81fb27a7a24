//! SeaORM entities of the directory tables. The telemetry tables are written and read with
//! constant SQL through the pool (see `telemetry/`): their statements take whole arrays.

pub mod account;
pub mod api_token;
pub mod mower;
pub mod site;
