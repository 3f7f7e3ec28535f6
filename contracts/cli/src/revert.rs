//! Contract reverts as the CLI reports them: the sentences are
//! `gantry_protocol::revert`'s; the kind of refusal picks the exit code.

pub use gantry_protocol::api::TokenInfo;
pub use gantry_protocol::revert::{Refusal, job_status_name};

use crate::error::CliError;

/// The error for a revert of `call`, when it is one of the contracts' errors.
pub fn explain(call: &str, error: &alloy::contract::Error, token: &TokenInfo) -> Option<CliError> {
    gantry_protocol::revert::explain(call, error, token).map(CliError::from)
}

impl From<Refusal> for CliError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::NotFound(sentence) => CliError::NotFound(sentence),
            Refusal::Refused(sentence) => CliError::Refused(sentence),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::exit;

    #[test]
    fn refusals_keep_their_sentence_and_pick_the_exit_code() {
        let refused = CliError::from(Refusal::Refused("job 4 is assigned".into()));
        assert_eq!(refused.to_string(), "job 4 is assigned");
        assert_eq!(refused.exit_code(), exit::REFUSED);
        let missing = CliError::from(Refusal::NotFound("job 9 does not exist".into()));
        assert_eq!(missing.exit_code(), exit::NOT_FOUND);
    }
}
