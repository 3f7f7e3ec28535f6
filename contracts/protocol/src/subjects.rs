//! Stream and subject names, and message ids. One JetStream stream per chain holds every
//! message about that chain:
//!
//! ```text
//! stream  GANTRY_<chain>              subjects gantry.<chain>.>
//!   gantry.<chain>.ev.<EventName>.<key>   one decoded contract event (key: job or node id;
//!                                         the node id for JobAssigned, so a worker filters
//!                                         `gantry.<chain>.ev.JobAssigned.<its node id>`)
//!   gantry.<chain>.block                  block commit marker, after a block's events
//!   gantry.<chain>.retract                orphaned blocks, before their replacements
//!   gantry.<chain>.final                  finality watermark
//! ```

use alloy::primitives::B256;

/// The stream of chain `chain_id`.
pub fn stream_name(chain_id: u64) -> String {
    format!("GANTRY_{chain_id}")
}

/// The subject filter covering the whole stream of chain `chain_id`.
pub fn stream_subjects(chain_id: u64) -> String {
    format!("gantry.{chain_id}.>")
}

/// The subject of one contract event.
pub fn event(chain_id: u64, event_name: &str, key: u64) -> String {
    format!("gantry.{chain_id}.ev.{event_name}.{key}")
}

/// The filter for every event of one name, e.g. all `JobPosted`.
pub fn event_filter(chain_id: u64, event_name: &str) -> String {
    format!("gantry.{chain_id}.ev.{event_name}.*")
}

/// The filter a worker uses for the jobs assigned to its node.
pub fn assignments_of(chain_id: u64, node_id: u64) -> String {
    event(chain_id, "JobAssigned", node_id)
}

pub fn block_commit(chain_id: u64) -> String {
    format!("gantry.{chain_id}.block")
}

pub fn retraction(chain_id: u64) -> String {
    format!("gantry.{chain_id}.retract")
}

pub fn finality(chain_id: u64) -> String {
    format!("gantry.{chain_id}.final")
}

/// What a message id names within a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// The event at this log index.
    Event { log_index: u64 },
    /// The block's commit marker.
    BlockCommit,
}

/// `Nats-Msg-Id` of a message about block (`number`, `hash`): the same message gets the
/// same id on every retry (so JetStream drops the duplicate), and a block that replaced an
/// orphaned one at the same height gets new ids (so its events are not dropped).
pub fn message_id(chain_id: u64, number: u64, hash: B256, kind: MessageKind) -> String {
    match kind {
        MessageKind::Event { log_index } => format!("{chain_id}:{number}:{hash}:{log_index}"),
        MessageKind::BlockCommit => format!("{chain_id}:{number}:{hash}:commit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_documented_layout() {
        assert_eq!(stream_name(31337), "GANTRY_31337");
        assert_eq!(stream_subjects(31337), "gantry.31337.>");
        assert_eq!(event(1, "JobPosted", 7), "gantry.1.ev.JobPosted.7");
        assert_eq!(assignments_of(1, 3), "gantry.1.ev.JobAssigned.3");
        assert_eq!(event_filter(1, "JobPosted"), "gantry.1.ev.JobPosted.*");
        assert_eq!(block_commit(1), "gantry.1.block");
    }

    #[test]
    fn message_ids_separate_blocks_at_the_same_height() {
        let a = message_id(
            1,
            10,
            B256::repeat_byte(1),
            MessageKind::Event { log_index: 0 },
        );
        let b = message_id(
            1,
            10,
            B256::repeat_byte(2),
            MessageKind::Event { log_index: 0 },
        );
        let commit = message_id(1, 10, B256::repeat_byte(1), MessageKind::BlockCommit);
        assert_ne!(a, b);
        assert_ne!(a, commit);
        assert_eq!(
            a,
            message_id(
                1,
                10,
                B256::repeat_byte(1),
                MessageKind::Event { log_index: 0 }
            )
        );
    }
}
