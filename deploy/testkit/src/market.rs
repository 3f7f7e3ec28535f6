//! Posting jobs to the market of a [`Devnet`].

use alloy::primitives::aliases::{U40, U96};
use alloy::providers::DynProvider;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};

use crate::{Devnet, DevnetError, GUSD, confirm_receipt, scenario};

/// A deadline no test reaches (in 2096), in chain seconds.
pub const FAR_DEADLINE: u64 = 4_000_000_000;

/// A job to post with [`Devnet::post_job`]. The default is the scenario's: an H100 job
/// ([`scenario::h100_requirements`]) with the example spec, a 50 gUSD bounty and
/// [`FAR_DEADLINE`].
#[derive(Debug, Clone)]
pub struct JobPost {
    pub requirements: JobMarket::JobRequirements,
    /// In the token's base units (see [`GUSD`]).
    pub bounty: u64,
    /// Chain time, seconds.
    pub deadline: u64,
    /// The spec's bytes as posted.
    pub spec: Vec<u8>,
}

impl Default for JobPost {
    fn default() -> Self {
        Self {
            requirements: scenario::h100_requirements(),
            bounty: 50 * GUSD,
            deadline: FAR_DEADLINE,
            spec: scenario::example_spec(),
        }
    }
}

impl Devnet {
    /// The market, signing as anvil's account `account`.
    pub fn market(&self, account: usize) -> JobMarket::JobMarketInstance<DynProvider> {
        JobMarket::new(self.deployment.market, self.provider(account))
    }

    /// The registry, signing as anvil's account `account`.
    pub fn registry(&self, account: usize) -> NodeRegistry::NodeRegistryInstance<DynProvider> {
        NodeRegistry::new(self.deployment.registry, self.provider(account))
    }

    /// Posts `job` as account `account`, which holds the bounty and lets the market take
    /// it (see [`Devnet::fund`]); returns the job id.
    pub async fn post_job(&self, account: usize, job: JobPost) -> Result<u64, DevnetError> {
        let receipt = confirm_receipt(
            "postJob",
            self.market(account)
                .postJob(
                    job.requirements,
                    U96::from(job.bounty),
                    U40::from(job.deadline),
                    job.spec.into(),
                )
                .send()
                .await,
        )
        .await?;
        let posted =
            receipt
                .decoded_log::<JobMarket::JobPosted>()
                .ok_or(DevnetError::MissingEvent {
                    call: "postJob",
                    event: gantry_protocol::events::event_name::<JobMarket::JobPosted>(),
                })?;
        Ok(posted.jobId)
    }
}
