//! Job and node statuses by their Solidity names (`Types.sol`), as the API, the CLI and
//! their users spell them; index = the enum's value.

/// `JobStatus`: None, Open, Assigned, Submitted, Disputed, Completed, Failed, Cancelled,
/// Expired.
pub const JOB_STATUS: [&str; 9] = [
    "none",
    "open",
    "assigned",
    "submitted",
    "disputed",
    "completed",
    "failed",
    "cancelled",
    "expired",
];

/// `NodeStatus`: None, Active, Inactive, Exiting, Exited.
pub const NODE_STATUS: [&str; 5] = ["none", "active", "inactive", "exiting", "exited"];
