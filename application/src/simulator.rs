//! Simulator (placeholder until written).
