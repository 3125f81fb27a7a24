//! Rows from array parameters side by side, for the widest writes (decision 209).

/// `SELECT unnest($first::ty[]) AS name, …`, one `unnest` per column, numbered from `first`: a
/// row per array index, for `FROM (…) AS u`.
///
/// Why not `FROM UNNEST($1, …, $n) AS u(…)`: PostgreSQL runs a multi-array `UNNEST` in `FROM` as
/// one function scan per array, each copied into a tuple store before the rows are put together,
/// which a write with a score of arrays pays per batch. In the target list the arrays are read
/// in step (PostgreSQL 10 on: one row per index, a shorter array padded with NULLs, as `UNNEST`
/// does) and nothing is copied. Every array of one statement has the same length here.
pub(crate) fn zipped(first: usize, columns: &[(&str, &str)]) -> String {
    let items = columns
        .iter()
        .enumerate()
        .map(|(i, (name, ty))| format!("unnest(${}::{ty}[]) AS {name}", first + i))
        .collect::<Vec<_>>()
        .join(", ");
    format!("SELECT {items}")
}

/// `name = u.name, …`: each column set from the row of [`zipped`] it is matched with.
pub(crate) fn set_from_u(columns: &[(&str, &str)]) -> String {
    columns
        .iter()
        .map(|(name, _)| format!("{name} = u.{name}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_column_gets_the_next_parameter_and_its_own_name() {
        let columns = [("mower_id", "uuid"), ("seen", "timestamptz"), ("n", "int8")];
        assert_eq!(
            zipped(4, &columns),
            "SELECT unnest($4::uuid[]) AS mower_id, unnest($5::timestamptz[]) AS seen, \
             unnest($6::int8[]) AS n"
        );
        assert_eq!(set_from_u(&columns[1..]), "seen = u.seen, n = u.n");
    }
}
