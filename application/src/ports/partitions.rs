//! Partitions of a subject pattern: which partition a subject falls in, and which consumer
//! filters a partitioned pattern admits. Both buses call these, so that a subject lands in the
//! same partition on the memory bus as in JetStream (whose stream subject transform
//! `{{partition(P,1)}}` hashes the token the same way: FNV-1a, 32 bits, modulo P).

use super::BusError;

/// The most partitions a pattern may have: each is a durable consumer per use case on
/// JetStream, with a pull request waiting on it at every replica.
pub const MAX_PARTITIONS: u32 = 64;

/// How a bus splits the messages of one subject pattern into partitions (docs/rules.md §5).
///
/// The pattern is literal tokens followed by one `*`, the partition key (for `telemetry.mower.*`,
/// the mower id): a subject always falls into the same partition, so the messages of one key
/// keep their publication order inside their partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partitioning {
    subjects: String,
    partitions: u32,
}

impl Partitioning {
    /// `subjects`: literal tokens then one `*` (e.g. `telemetry.mower.*`); `partitions`:
    /// 1..=[`MAX_PARTITIONS`]. Anything else is [`BusError::Refused`].
    pub fn new(subjects: impl Into<String>, partitions: u32) -> Result<Self, BusError> {
        let subjects = subjects.into();
        let tokens: Vec<&str> = subjects.split('.').collect();
        let (key, literal) = tokens
            .split_last()
            .expect("split yields one token at least");
        let literal_ok = !literal.is_empty()
            && literal.iter().all(|t| {
                !t.is_empty() && *t != "*" && *t != ">" && !t.contains(char::is_whitespace)
            });
        if *key != "*" || !literal_ok {
            return Err(BusError::Refused(format!(
                "a partitioned pattern is literal tokens then one `*` (the key), not {subjects:?}"
            )));
        }
        if !(1..=MAX_PARTITIONS).contains(&partitions) {
            return Err(BusError::Refused(format!(
                "{partitions} partitions: between 1 and {MAX_PARTITIONS}"
            )));
        }
        Ok(Self {
            subjects,
            partitions,
        })
    }

    /// The partitioned pattern, e.g. `telemetry.mower.*`.
    pub fn subjects(&self) -> &str {
        &self.subjects
    }

    /// How many partitions.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// The partition of a key (the token the pattern's `*` stands for).
    pub fn partition_of_key(&self, key: &str) -> u32 {
        fnv1a32(key.as_bytes()) % self.partitions
    }

    /// The partition of a subject the pattern matches; `None` for any other subject.
    pub fn partition_of(&self, subject: &str) -> Option<u32> {
        if !crate::bus_rules::subject_matches(&self.subjects, subject) {
            return None;
        }
        let (_, key) = subject.rsplit_once('.')?;
        Some(self.partition_of_key(key))
    }

    /// What a consumer filtering `filter` gets: `Ok(true)` when the filter is the pattern itself
    /// (its consumer is partitioned), `Ok(false)` when the two share no subject (not concerned),
    /// and [`BusError::Refused`] when they overlap otherwise: a consumer of part of a partitioned
    /// pattern (`telemetry.>`, one mower's subject) would see the partitions' messages in no
    /// defined order, and JetStream stores them under subjects it cannot filter.
    pub fn admits(&self, filter: &str) -> Result<bool, BusError> {
        if filter == self.subjects {
            return Ok(true);
        }
        if subjects_overlap(filter, &self.subjects) {
            return Err(BusError::Refused(format!(
                "{filter} overlaps the partitioned subjects {}: a consumer of them filters exactly {}",
                self.subjects, self.subjects
            )));
        }
        Ok(false)
    }
}

/// FNV-1a, 32 bits: the hash NATS's `{{partition(P,…)}}` transform takes of the key token.
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in bytes {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// Whether some subject matches both filters (NATS wildcards).
pub fn subjects_overlap(a: &str, b: &str) -> bool {
    let mut a = a.split('.');
    let mut b = b.split('.');
    loop {
        match (a.next(), b.next()) {
            (Some(">"), Some(_)) | (Some(_), Some(">")) => return true,
            (Some(x), Some(y)) if x == "*" || y == "*" || x == y => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_is_literal_tokens_then_one_key() {
        assert!(Partitioning::new("telemetry.mower.*", 8).is_ok());
        for bad in [
            "telemetry.>",
            "telemetry.*.x",
            "*",
            "telemetry.mower",
            "a..*",
            "a.*.*",
        ] {
            assert!(Partitioning::new(bad, 8).is_err(), "{bad}");
        }
        assert!(Partitioning::new("a.*", 0).is_err());
        assert!(Partitioning::new("a.*", MAX_PARTITIONS + 1).is_err());
        assert!(Partitioning::new("a.*", MAX_PARTITIONS).is_ok());
    }

    #[test]
    fn fnv1a32_matches_the_published_vectors() {
        // From the FNV reference test suite.
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn a_subject_falls_in_its_key_s_partition() {
        let p = Partitioning::new("telemetry.mower.*", 8).unwrap();
        let id = "0192f3a0-0000-7000-8000-000000000001";
        let n = p.partition_of(&format!("telemetry.mower.{id}")).unwrap();
        assert_eq!(n, fnv1a32(id.as_bytes()) % 8);
        assert_eq!(p.partition_of("telemetry.lawn.x"), None);
        assert_eq!(p.partition_of("telemetry.mower.x.y"), None);
        let one = Partitioning::new("telemetry.mower.*", 1).unwrap();
        assert_eq!(one.partition_of("telemetry.mower.x"), Some(0));
    }

    #[test]
    fn only_the_pattern_itself_or_disjoint_filters_are_admitted() {
        let p = Partitioning::new("telemetry.mower.*", 4).unwrap();
        assert!(p.admits("telemetry.mower.*").unwrap());
        assert!(!p.admits("notifications.>").unwrap());
        assert!(!p.admits("telemetry.lawn.*").unwrap());
        for overlapping in ["telemetry.>", "telemetry.*.*", ">", "telemetry.mower.m1"] {
            assert!(p.admits(overlapping).is_err(), "{overlapping}");
        }
    }

    #[test]
    fn overlap_is_symmetric_and_follows_wildcards() {
        let pairs = [
            ("a.b", "a.b", true),
            ("a.*", "a.b", true),
            ("a.>", "a.b.c", true),
            ("a.*", "a.b.c", false),
            ("a.b", "a.c", false),
            ("*.b", "a.*", true),
            ("a", "a.b", false),
        ];
        for (a, b, overlap) in pairs {
            assert_eq!(subjects_overlap(a, b), overlap, "{a} {b}");
            assert_eq!(subjects_overlap(b, a), overlap, "{b} {a}");
        }
    }
}
