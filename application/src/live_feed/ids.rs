//! The stream's event ids: the feed's sequence, hidden (issue 35).
//!
//! The feed numbers every tenant's items in one sequence, so a plain number in an id would let a
//! tenant count the others' traffic between two of its own events. An id carries the sequence
//! through a keyed permutation of 64-bit numbers instead (a four-round Feistel network whose
//! round function is SHA-256 over a random per-process key): it is opaque to whoever lacks the
//! key, ids of consecutive items look unrelated, and the feed maps an id back to its sequence
//! exactly, so a resume stays exact. A value that is not an id of this feed maps to a sequence
//! far beyond the head and is an unknown id.

use sha2::{Digest, Sha256};

/// Rounds of the Feistel network: four make a keyed permutation that looks random to whoever
/// queries it (Luby and Rackoff), given a round function that does.
const ROUNDS: u8 = 4;

/// The key of one feed's ids.
pub(super) struct IdKey([u8; 32]);

impl IdKey {
    pub(super) fn random() -> Self {
        Self(rand::random())
    }

    fn round(&self, round: u8, half: u32) -> u32 {
        let digest = Sha256::new()
            .chain_update(self.0)
            .chain_update([round])
            .chain_update(half.to_be_bytes())
            .finalize();
        u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
    }

    /// The opaque number of sequence `seq`.
    pub(super) fn hide(&self, seq: u64) -> u64 {
        let (mut left, mut right) = ((seq >> 32) as u32, seq as u32);
        for round in 0..ROUNDS {
            (left, right) = (right, left ^ self.round(round, right));
        }
        (u64::from(left) << 32) | u64::from(right)
    }

    /// The sequence whose opaque number is `id` ([`IdKey::hide`]'s inverse).
    pub(super) fn reveal(&self, id: u64) -> u64 {
        let (mut left, mut right) = ((id >> 32) as u32, id as u32);
        for round in (0..ROUNDS).rev() {
            (left, right) = (right ^ self.round(round, left), left);
        }
        (u64::from(left) << 32) | u64::from(right)
    }
}
