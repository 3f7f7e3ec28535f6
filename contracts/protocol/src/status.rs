//! Job and node statuses, typed: the contracts' `JobStatus` and `NodeStatus` enums
//! (`Types.sol`) by value, named in lowercase as the API, the CLI and their users spell
//! them. Every reader converts the chain's `u8` here once, with [`TryFrom<u8>`]; nothing
//! else indexes by position.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A status value the contracts never use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{kind} status {value} is not one the contracts define")]
pub struct UnknownStatus {
    pub kind: &'static str,
    pub value: u8,
}

/// A status name no status has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} status {name:?} (one of: {expected})")]
pub struct UnknownStatusName {
    pub kind: &'static str,
    pub name: String,
    pub expected: String,
}

macro_rules! status_enum {
    ($(#[$doc:meta])* $name:ident, $kind:literal, { $($(#[$vdoc:meta])* $variant:ident = $value:literal => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(rename_all = "lowercase")]
        #[repr(u8)]
        pub enum $name {
            $($(#[$vdoc])* $variant = $value),+
        }

        impl $name {
            /// Every status, in the contract's order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The lowercase name, e.g. `assigned`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl TryFrom<u8> for $name {
            type Error = UnknownStatus;

            fn try_from(value: u8) -> Result<Self, UnknownStatus> {
                match value {
                    $($value => Ok($name::$variant),)+
                    _ => Err(UnknownStatus { kind: $kind, value }),
                }
            }
        }

        impl From<$name> for u8 {
            fn from(status: $name) -> u8 {
                status as u8
            }
        }

        impl FromStr for $name {
            type Err = UnknownStatusName;

            fn from_str(name: &str) -> Result<Self, UnknownStatusName> {
                match name {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownStatusName {
                        kind: $kind,
                        name: name.to_owned(),
                        expected: [$($text),+].join(", "),
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

status_enum!(
    /// `JobStatus` in `Types.sol`.
    JobStatus, "job", {
        None = 0 => "none",
        Open = 1 => "open",
        Assigned = 2 => "assigned",
        Submitted = 3 => "submitted",
        Disputed = 4 => "disputed",
        Completed = 5 => "completed",
        Failed = 6 => "failed",
        Cancelled = 7 => "cancelled",
        Expired = 8 => "expired",
        /// A verified job's seats are drawn and commit their results.
        Committing = 9 => "committing",
        /// A verified job's commitments are opened.
        Revealing = 10 => "revealing",
        /// A refereed dispute the referees did not settle: the arbiter decides.
        Arbitrating = 11 => "arbitrating",
    }
);

status_enum!(
    /// `NodeStatus` in `Types.sol`.
    NodeStatus, "node", {
        None = 0 => "none",
        Active = 1 => "active",
        Inactive = 2 => "inactive",
        Exiting = 3 => "exiting",
        Exited = 4 => "exited",
    }
);

impl JobStatus {
    /// The job is over: paid, refunded or cancelled; no event changes it again.
    pub const fn is_settled(self) -> bool {
        matches!(
            self,
            JobStatus::Completed | JobStatus::Failed | JobStatus::Cancelled | JobStatus::Expired
        )
    }
}

impl NodeStatus {
    /// The node has left for good: its stake is withdrawn.
    pub const fn is_settled(self) -> bool {
        matches!(self, NodeStatus::Exited)
    }
}

#[allow(clippy::derivable_impls)] // the macro cannot mark a #[default] variant
impl Default for JobStatus {
    fn default() -> Self {
        JobStatus::None
    }
}

#[allow(clippy::derivable_impls)]
impl Default for NodeStatus {
    fn default() -> Self {
        NodeStatus::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_names_and_serde_agree() {
        for (i, status) in JobStatus::ALL.iter().enumerate() {
            assert_eq!(u8::from(*status), i as u8);
            assert_eq!(JobStatus::try_from(i as u8), Ok(*status));
            assert_eq!(status.as_str().parse::<JobStatus>(), Ok(*status));
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                serde_json::json!(status.as_str())
            );
        }
        for (i, status) in NodeStatus::ALL.iter().enumerate() {
            assert_eq!(NodeStatus::try_from(i as u8), Ok(*status));
            assert_eq!(status.to_string().parse::<NodeStatus>(), Ok(*status));
        }
        assert_eq!(JobStatus::try_from(12).unwrap_err().value, 12);
        assert!("running".parse::<JobStatus>().is_err());
    }

    #[test]
    fn settled_statuses_are_the_final_four() {
        let settled: Vec<_> = JobStatus::ALL.iter().filter(|s| s.is_settled()).collect();
        assert_eq!(
            settled,
            [
                &JobStatus::Completed,
                &JobStatus::Failed,
                &JobStatus::Cancelled,
                &JobStatus::Expired
            ]
        );
    }
}
