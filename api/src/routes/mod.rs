//! The routes, one module per OpenAPI tag. Each handler carries its `#[utoipa::path]`, so the
//! document is generated from the code that serves it.

pub mod mowers;
pub mod operations;
