//! Reading the database's values: its BIGINTs as the rows' unsigned integers (ids, blocks,
//! times, counts: never negative), checked here once, and its JSON bodies as rows.

use serde::de::DeserializeOwned;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::StoreError;

/// An integer that does not fit across the SQL boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OutOfRange {
    /// A stored id, block, time or count is negative.
    #[error("stored integer {0} is negative")]
    Negative(i64),
    /// An id, block, time or count too large for a BIGINT.
    #[error("{0} does not fit a SQL BIGINT")]
    TooLarge(u64),
}

/// `value` as a BIGINT, to bind.
pub(crate) fn bigint(value: u64) -> Result<i64, OutOfRange> {
    i64::try_from(value).map_err(|_| OutOfRange::TooLarge(value))
}

/// A stored BIGINT as the unsigned integer it holds.
pub(crate) fn unsigned(value: i64) -> Result<u64, OutOfRange> {
    u64::try_from(value).map_err(|_| OutOfRange::Negative(value))
}

/// A result row's columns, typed.
pub(crate) trait Columns {
    /// A BIGINT column that holds an id, block, time or count.
    fn unsigned(&self, column: usize) -> Result<u64, StoreError>;
    /// The same, where SQL may answer NULL (an aggregate over no rows, an optional id).
    fn unsigned_or_null(&self, column: usize) -> Result<Option<u64>, StoreError>;
    /// A text column that holds a row as JSON.
    fn json<T: DeserializeOwned>(&self, column: usize) -> Result<T, StoreError>;
}

impl Columns for AnyRow {
    fn unsigned(&self, column: usize) -> Result<u64, StoreError> {
        Ok(unsigned(self.try_get::<i64, _>(column)?)?)
    }

    fn unsigned_or_null(&self, column: usize) -> Result<Option<u64>, StoreError> {
        Ok(self
            .try_get::<Option<i64>, _>(column)?
            .map(unsigned)
            .transpose()?)
    }

    fn json<T: DeserializeOwned>(&self, column: usize) -> Result<T, StoreError> {
        Ok(serde_json::from_str(&self.try_get::<String, _>(column)?)?)
    }
}

/// The JSON body in the first column of each row.
pub(crate) fn bodies<T: DeserializeOwned>(rows: &[AnyRow]) -> Result<Vec<T>, StoreError> {
    rows.iter().map(|row| row.json(0)).collect()
}

/// The JSON body in the first column of the row, if one was found.
pub(crate) fn body<T: DeserializeOwned>(row: Option<AnyRow>) -> Result<Option<T>, StoreError> {
    row.map(|row| row.json(0)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bigints_cross_only_within_range() {
        assert_eq!(unsigned(7), Ok(7));
        assert_eq!(unsigned(-1), Err(OutOfRange::Negative(-1)));
        assert_eq!(bigint(7), Ok(7));
        assert_eq!(bigint(u64::MAX), Err(OutOfRange::TooLarge(u64::MAX)));
        assert_eq!(bigint(i64::MAX as u64), Ok(i64::MAX));
    }
}
