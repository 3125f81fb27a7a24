//! Ingest.
