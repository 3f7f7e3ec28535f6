//! Whether a node can take a job: the one mirror of `JobMarket._checkEligible`, used by the
//! matcher (planning and its explanations) and by the worker's claim mode. Pure, and
//! allocation-free, so the planner's hot path calls it too.
//!
//! ```text
//!  Requirements (JobPosted / getJob) ─┐
//!                                     ├─▶ capability_violations ─▶ Constraints (bitset, contract order)
//!  Capabilities (NodeRegistered / getNode) ─┘
//! ```
//!
//! The contract reverts at the first failing check, in this order: engine, model, GPU
//! count, VRAM, CPU, RAM, price; [`Constraints::first`] names the revert. The node-state checks the
//! market makes of the job and the node (`barred`, `notActive`) and the matcher's own
//! `noFreeSlot` need the matcher's view and are added there. A differential test in gantry-devnet checks every pair of a random
//! set of nodes and jobs against the deployed contract.

use alloy::primitives::B256;
use serde::{Deserialize, Serialize};

use crate::bindings::{JobMarket, NodeRegistry};
use crate::spec::Engine;

/// A hard constraint a node can fail, in the order the chain checks them: the job's bar
/// on the node, the node's status, then the market's `_checkEligible`. `NoFreeSlot` is the
/// matcher's alone: the chain does not count a node's jobs, its worker refuses the excess.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum Constraint {
    Barred,
    NotActive,
    NoFreeSlot,
    Engine,
    GpuModel,
    GpuCount,
    Vram,
    Cpu,
    Ram,
    Price,
}

impl Constraint {
    /// Every constraint, in the chain's order.
    pub const ALL: [Constraint; 10] = [
        Constraint::Barred,
        Constraint::NotActive,
        Constraint::NoFreeSlot,
        Constraint::Engine,
        Constraint::GpuModel,
        Constraint::GpuCount,
        Constraint::Vram,
        Constraint::Cpu,
        Constraint::Ram,
        Constraint::Price,
    ];

    /// Its name in explanations and metric labels, e.g. `noFreeSlot`.
    pub const fn name(self) -> &'static str {
        match self {
            Constraint::Barred => "barred",
            Constraint::NotActive => "notActive",
            Constraint::NoFreeSlot => "noFreeSlot",
            Constraint::Engine => "engine",
            Constraint::GpuModel => "gpuModel",
            Constraint::GpuCount => "gpuCount",
            Constraint::Vram => "vram",
            Constraint::Cpu => "cpu",
            Constraint::Ram => "ram",
            Constraint::Price => "price",
        }
    }

    const fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// A set of [`Constraint`]s, iterated in the chain's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Constraints(u16);

impl Constraints {
    pub const NONE: Constraints = Constraints(0);

    pub fn insert(&mut self, constraint: Constraint) {
        self.0 |= constraint.bit();
    }

    pub const fn contains(self, constraint: Constraint) -> bool {
        self.0 & constraint.bit() != 0
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The first failed check: the one the contract's revert names.
    pub fn first(self) -> Option<Constraint> {
        self.iter().next()
    }

    pub fn iter(self) -> impl Iterator<Item = Constraint> {
        Constraint::ALL
            .into_iter()
            .filter(move |c| self.contains(*c))
    }
}

impl FromIterator<Constraint> for Constraints {
    fn from_iter<I: IntoIterator<Item = Constraint>>(iter: I) -> Self {
        let mut set = Constraints::NONE;
        iter.into_iter().for_each(|c| set.insert(c));
        set
    }
}

/// The engines a node runs, as in `NodeCapabilities.engines`: bit `1 << code` for each
/// [`Engine`] (bits of engines this build does not know are kept, as the chain keeps them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Engines(pub u8);

impl Engines {
    pub const DOCKER: Engines = Engines(1 << Engine::Docker.code());
    pub const WASM: Engines = Engines(1 << Engine::Wasm.code());
    /// Every engine this build knows.
    pub const ALL: Engines = Engines(Engines::DOCKER.0 | Engines::WASM.0);
    /// Not an engine: the node's opt-in (`DETERMINISTIC_DOCKER`, bit 7, only beside Docker)
    /// to seats of replicated CPU Docker jobs, run in the worker's deterministic sandbox.
    pub const DETERMINISTIC_DOCKER: Engines = Engines(1 << 7);

    /// Whether the node takes verified Docker seats ([`Engines::DETERMINISTIC_DOCKER`]).
    pub fn sandboxed(self) -> bool {
        self.0 & Engines::DETERMINISTIC_DOCKER.0 != 0
    }

    /// Whether the node may join the verification pool: it takes WASM or Docker seats
    /// (the contract's `VERIFIABLE`).
    pub fn verifiable(self) -> bool {
        self.contains(Engine::Wasm) || self.sandboxed()
    }

    /// Whether the set holds the engine of on-chain code `code` (`false` past the byte).
    pub fn has_code(self, code: u8) -> bool {
        self.0
            .checked_shr(u32::from(code))
            .is_some_and(|bits| bits & 1 == 1)
    }

    pub fn contains(self, engine: Engine) -> bool {
        self.has_code(engine.code())
    }

    pub fn with(self, engine: Engine) -> Engines {
        Engines(self.0 | 1 << engine.code())
    }

    /// The known engines of the set, by code.
    pub fn iter(self) -> impl Iterator<Item = Engine> {
        Engine::ALL.into_iter().filter(move |e| self.contains(*e))
    }
}

/// Docker alone: what every node ran before there was a second engine.
impl Default for Engines {
    fn default() -> Self {
        Engines::DOCKER
    }
}

impl FromIterator<Engine> for Engines {
    fn from_iter<I: IntoIterator<Item = Engine>>(iter: I) -> Self {
        iter.into_iter().fold(Engines(0), Engines::with)
    }
}

/// `docker,wasm`: the known engines, comma-separated.
impl std::fmt::Display for Engines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.iter().map(|e| e.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

/// What a job needs, as in `JobRequirements`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Requirements {
    /// The engine's on-chain code ([`Engine::code`]; [`Requirements::engine`] names it):
    /// kept as the chain has it, so a code this build does not know fails the check as
    /// it does on chain.
    pub engine: u8,
    /// Zero accepts any model.
    pub gpu_model: B256,
    pub min_gpu_count: u16,
    pub min_vram_mib: u32,
    pub min_cpu_cores: u16,
    pub min_ram_mib: u32,
    pub max_price_per_gpu_hour: u128,
    pub max_runtime: u32,
    pub priority: u8,
}

/// What a node offers, as in `NodeCapabilities`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Capabilities {
    pub gpu_model: B256,
    pub gpu_count: u16,
    pub vram_mib: u32,
    pub cpu_cores: u16,
    pub ram_mib: u32,
    pub price_per_gpu_hour: u128,
    pub max_concurrent_jobs: u8,
    pub engines: Engines,
}

impl Requirements {
    /// The job's engine; `None` for a code this build does not know.
    pub fn engine(&self) -> Option<Engine> {
        Engine::from_code(self.engine)
    }
}

impl From<&JobMarket::JobRequirements> for Requirements {
    fn from(r: &JobMarket::JobRequirements) -> Self {
        Self {
            gpu_model: r.gpuModel,
            min_gpu_count: r.minGpuCount,
            min_vram_mib: r.minVramMiB,
            min_cpu_cores: r.minCpuCores,
            min_ram_mib: r.minRamMiB,
            max_price_per_gpu_hour: r.maxPricePerGpuHour.to::<u128>(),
            max_runtime: r.maxRuntime,
            priority: r.priority,
            engine: r.engine,
        }
    }
}

impl From<&NodeRegistry::NodeCapabilities> for Capabilities {
    fn from(c: &NodeRegistry::NodeCapabilities) -> Self {
        Self {
            gpu_model: c.gpuModel,
            gpu_count: c.gpuCount,
            vram_mib: c.vramMiB,
            cpu_cores: c.cpuCores,
            ram_mib: c.ramMiB,
            price_per_gpu_hour: c.pricePerGpuHour.to::<u128>(),
            max_concurrent_jobs: c.maxConcurrentJobs,
            engines: Engines(c.engines),
        }
    }
}

/// The market's checks (`_checkEligible`) that `offered` fails for `needed`, line for line.
pub fn capability_violations(needed: &Requirements, offered: &Capabilities) -> Constraints {
    let mut failed = Constraints::NONE;
    if !offered.engines.has_code(needed.engine) {
        failed.insert(Constraint::Engine);
    }
    if needed.gpu_model != B256::ZERO && needed.gpu_model != offered.gpu_model {
        failed.insert(Constraint::GpuModel);
    }
    if offered.gpu_count < needed.min_gpu_count {
        failed.insert(Constraint::GpuCount);
    }
    // Unconditional, as on-chain: a CPU job that names VRAM needs it too.
    if offered.vram_mib < needed.min_vram_mib {
        failed.insert(Constraint::Vram);
    }
    if offered.cpu_cores < needed.min_cpu_cores {
        failed.insert(Constraint::Cpu);
    }
    if offered.ram_mib < needed.min_ram_mib {
        failed.insert(Constraint::Ram);
    }
    if offered.price_per_gpu_hour > needed.max_price_per_gpu_hour {
        failed.insert(Constraint::Price);
    }
    failed
}

/// Whether `offered` passes the market's checks for `needed`.
pub fn capable(needed: &Requirements, offered: &Capabilities) -> bool {
    capability_violations(needed, offered).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn constraint_names_are_their_serde_names_in_chain_order() {
        let names: Vec<&str> = Constraint::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(
            names,
            [
                "barred",
                "notActive",
                "noFreeSlot",
                "engine",
                "gpuModel",
                "gpuCount",
                "vram",
                "cpu",
                "ram",
                "price"
            ]
        );
        for c in Constraint::ALL {
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                serde_json::json!(c.name())
            );
        }
        let mut sorted = Constraint::ALL;
        sorted.sort();
        assert_eq!(sorted, Constraint::ALL, "Ord is the chain's order");
    }

    #[test]
    fn a_cpu_job_that_names_vram_needs_it_as_on_chain() {
        let needed = Requirements {
            min_vram_mib: 1024,
            max_price_per_gpu_hour: 10,
            ..Requirements::default()
        };
        let offered = Capabilities {
            vram_mib: 0,
            ..Capabilities::default()
        };
        assert_eq!(
            capability_violations(&needed, &offered).first(),
            Some(Constraint::Vram)
        );
    }

    fn check(needed: Requirements, offered: Capabilities, expected: &[Constraint]) {
        let got: Vec<_> = capability_violations(&needed, &offered).iter().collect();
        assert_eq!(got, expected, "{needed:?} on {offered:?}");
    }

    #[test]
    fn each_check_fails_alone() {
        let model = B256::repeat_byte(7);
        let needed = Requirements {
            gpu_model: model,
            min_gpu_count: 2,
            min_vram_mib: 100,
            min_cpu_cores: 4,
            min_ram_mib: 1000,
            max_price_per_gpu_hour: 50,
            ..Requirements::default()
        };
        let fits = Capabilities {
            gpu_model: model,
            gpu_count: 2,
            vram_mib: 100,
            cpu_cores: 4,
            ram_mib: 1000,
            price_per_gpu_hour: 50,
            max_concurrent_jobs: 1,
            engines: Engines::DOCKER,
        };
        check(needed, fits, &[]);
        check(
            Requirements {
                gpu_model: B256::ZERO,
                ..needed
            },
            Capabilities {
                gpu_model: B256::repeat_byte(1),
                ..fits
            },
            &[],
        );
        let table: [(Capabilities, Constraint); 7] = [
            (
                Capabilities {
                    engines: Engines::WASM,
                    ..fits
                },
                Constraint::Engine,
            ),
            (
                Capabilities {
                    gpu_model: B256::repeat_byte(1),
                    ..fits
                },
                Constraint::GpuModel,
            ),
            (
                Capabilities {
                    gpu_count: 1,
                    ..fits
                },
                Constraint::GpuCount,
            ),
            (
                Capabilities {
                    vram_mib: 99,
                    ..fits
                },
                Constraint::Vram,
            ),
            (
                Capabilities {
                    cpu_cores: 3,
                    ..fits
                },
                Constraint::Cpu,
            ),
            (
                Capabilities {
                    ram_mib: 999,
                    ..fits
                },
                Constraint::Ram,
            ),
            (
                Capabilities {
                    price_per_gpu_hour: 51,
                    ..fits
                },
                Constraint::Price,
            ),
        ];
        for (offered, constraint) in table {
            check(needed, offered, &[constraint]);
        }
    }

    #[test]
    fn an_engine_set_holds_exactly_its_bits() {
        let both: Engines = Engine::ALL.into_iter().collect();
        assert_eq!(both, Engines(0b11));
        assert_eq!(both.to_string(), "docker,wasm");
        assert_eq!(Engines::WASM.to_string(), "wasm");
        assert!(Engines::WASM.contains(Engine::Wasm) && !Engines::WASM.contains(Engine::Docker));
        // A code past the byte, or one this build does not know, is not held.
        assert!(!Engines(0xff).has_code(8) && !Engines(0xff).has_code(200));
        assert!(Engines(0b100).has_code(2) && Engines(0b100).iter().count() == 0);
        for engine in Engine::ALL {
            assert_eq!(Engine::from_code(engine.code()), Some(engine));
        }
        assert_eq!(Engine::from_code(2), None);
    }

    #[test]
    fn a_job_goes_only_to_a_node_running_its_engine() {
        let wasm_job = Requirements {
            engine: Engine::Wasm.code(),
            ..Requirements::default()
        };
        let docker_node = Capabilities::default();
        assert_eq!(
            capability_violations(&wasm_job, &docker_node).first(),
            Some(Constraint::Engine)
        );
        let both = Capabilities {
            engines: Engines::DOCKER.with(Engine::Wasm),
            ..docker_node
        };
        assert!(capable(&wasm_job, &both));
        assert!(capable(&Requirements::default(), &both));
        let unknown = Requirements {
            engine: 5,
            ..Requirements::default()
        };
        assert!(
            !capable(&unknown, &both),
            "a code no node runs is served by none"
        );
    }

    proptest! {
        #[test]
        fn the_set_agrees_with_each_comparison(
            model in 0u8..3, want_model in 0u8..3,
            gpus in 0u16..4, want_gpus in 0u16..4,
            vram in 0u32..4, want_vram in 0u32..4,
            price in 0u128..4, max_price in 0u128..4,
        ) {
            let needed = Requirements {
                gpu_model: if want_model == 0 { B256::ZERO } else { B256::repeat_byte(want_model) },
                min_gpu_count: want_gpus,
                min_vram_mib: want_vram,
                max_price_per_gpu_hour: max_price,
                ..Requirements::default()
            };
            let offered = Capabilities {
                gpu_model: B256::repeat_byte(model.max(1)),
                gpu_count: gpus,
                vram_mib: vram,
                price_per_gpu_hour: price,
                ..Capabilities::default()
            };
            let set = capability_violations(&needed, &offered);
            prop_assert_eq!(set.contains(Constraint::GpuModel), want_model != 0 && want_model != model.max(1));
            prop_assert_eq!(set.contains(Constraint::GpuCount), gpus < want_gpus);
            prop_assert_eq!(set.contains(Constraint::Vram), vram < want_vram);
            prop_assert_eq!(set.contains(Constraint::Price), price > max_price);
            prop_assert_eq!(set.is_empty(), capable(&needed, &offered));
            prop_assert_eq!(set.len(), set.iter().count());
        }
    }
}
