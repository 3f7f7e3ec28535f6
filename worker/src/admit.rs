//! Whether the node runs a job, and with what: the spec checked against the protocol's
//! schema, the job's on-chain requirements (its terms), the node's hardware and the
//! provider's settings. Pure; a refusal is the job's fault and becomes the `reject`
//! reason, sent at once (free: within the market's reject grace).

use std::time::Duration;

use gantry_protocol::eligibility::Requirements;
use gantry_protocol::spec::{Engine, JobKind, JobSpec};

use crate::config::Jobs;
use crate::fault::Failure;

/// What the node has to give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLimits {
    pub gpus: u16,
    pub cpu_cores: u16,
    pub ram_mib: u32,
}

/// A job the node will run, and its resources.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    pub spec: JobSpec,
    pub gpus: u16,
    pub cpu_threads: u16,
    pub memory_bytes: i64,
    pub gpu_memory_percent: u8,
    pub timeout: Duration,
    pub output_limit: u64,
}

/// Checks a job before anything is downloaded or started.
pub fn admit(
    spec_bytes: &[u8],
    requirements: &Requirements,
    node: &NodeLimits,
    settings: &Jobs,
) -> Result<Admitted, Failure> {
    let spec =
        JobSpec::from_slice(spec_bytes).map_err(|e| Failure::job(format!("invalid spec: {e}")))?;
    match spec.kind {
        JobKind::Training if !settings.accept_training => {
            return Err(Failure::job("this node does not take training jobs"));
        }
        JobKind::Inference if !settings.accept_inference => {
            return Err(Failure::job("this node does not take inference jobs"));
        }
        _ => {}
    }
    if !settings.engines.contains(&spec.engine) {
        return Err(Failure::job(format!(
            "this node does not run {} jobs",
            spec.engine
        )));
    }
    // The chain matched the job to this node by the engine of its terms; the spec is what
    // runs. A submitter who names two engines gets a free refusal from every node.
    if requirements.engine != spec.engine.code() {
        let posted = requirements.engine().map_or_else(
            || format!("engine {}", requirements.engine),
            |e| e.to_string(),
        );
        return Err(Failure::job(format!(
            "the job was posted for {posted}, and its spec is a {} job",
            spec.engine
        )));
    }
    if spec.engine == Engine::Wasm && requirements.min_gpu_count > 0 {
        return Err(Failure::job(format!(
            "a WASM job runs on the CPU: it cannot use the {} GPUs its requirements ask for",
            requirements.min_gpu_count
        )));
    }
    if spec.timeout_secs > u64::from(requirements.max_runtime) {
        return Err(Failure::job(format!(
            "invalid spec: timeoutSecs {} exceeds the job's maxRuntime {}",
            spec.timeout_secs, requirements.max_runtime
        )));
    }
    // The node answers `answer_margin` before the attempt ends: a runtime no longer than
    // that leaves the job no time at all.
    let margin = settings.answer_margin.as_secs();
    if u64::from(requirements.max_runtime) <= margin {
        return Err(Failure::job(format!(
            "maxRuntime {} s leaves no time to run: this node answers {margin} s before the \
             attempt ends",
            requirements.max_runtime
        )));
    }
    if requirements.min_gpu_count > node.gpus {
        return Err(Failure::job(format!(
            "needs {} GPUs; this node has {}",
            requirements.min_gpu_count, node.gpus
        )));
    }
    // A WASM job's memory is its module's linear memory: the spec's limit when it names
    // one (a deterministic job must: the same on every node).
    let memory_mib = match (
        spec.wasm.as_ref().and_then(|w| w.memory_mib),
        requirements.min_ram_mib,
    ) {
        (Some(mib), _) => mib,
        (None, 0) => settings.default_memory_mib,
        (None, mib) => mib,
    };
    if memory_mib > node.ram_mib {
        return Err(Failure::job(format!(
            "needs {memory_mib} MiB of memory; this node has {}",
            node.ram_mib
        )));
    }
    let cpu_threads = spec
        .resources
        .cpu_threads
        .unwrap_or(settings.default_cpu_threads)
        .max(requirements.min_cpu_cores)
        .min(node.cpu_cores.max(1));
    Ok(Admitted {
        gpus: requirements.min_gpu_count,
        cpu_threads,
        memory_bytes: i64::from(memory_mib) << 20,
        gpu_memory_percent: spec
            .resources
            .gpu_memory_percent
            .unwrap_or(settings.default_gpu_memory_percent),
        timeout: Duration::from_secs(spec.timeout_secs),
        output_limit: spec
            .outputs
            .max_bytes
            .unwrap_or(settings.max_output_bytes)
            .min(settings.max_output_bytes),
        spec,
    })
}

#[cfg(test)]
mod tests {
    use gantry_protocol::spec::{OutputSpec, Resources};

    use super::*;
    use crate::fault::FaultClass;

    fn spec() -> JobSpec {
        JobSpec {
            encryption: None,
            version: 1,
            kind: JobKind::Training,
            image: "gantry/test:1".into(),
            command: vec!["/bin/sh".into(), "-c".into(), "true".into()],
            env: Default::default(),
            inputs: vec![],
            outputs: OutputSpec::default(),
            resources: Resources::default(),
            timeout_secs: 60,
            engine: gantry_protocol::spec::Engine::Docker,
            wasm: None,
        }
    }

    fn requirements() -> Requirements {
        Requirements {
            min_cpu_cores: 1,
            min_ram_mib: 512,
            max_runtime: 120,
            priority: 5,
            ..Requirements::default()
        }
    }

    fn node() -> NodeLimits {
        NodeLimits {
            gpus: 0,
            cpu_cores: 2,
            ram_mib: 4096,
        }
    }

    #[test]
    fn a_fitting_job_gets_its_resources() {
        let admitted = admit(&spec().to_vec(), &requirements(), &node(), &Jobs::default()).unwrap();
        assert_eq!(admitted.memory_bytes, 512 << 20);
        assert_eq!(
            admitted.cpu_threads, 2,
            "default 4 threads, capped at the node's 2"
        );
        assert_eq!(admitted.timeout, Duration::from_secs(60));
        assert_eq!(admitted.output_limit, Jobs::default().max_output_bytes);
        assert_eq!(admitted.gpu_memory_percent, 90);
    }

    #[test]
    fn refusals_are_the_job_s_fault_with_a_reason() {
        let refuse = |bytes: &[u8], req: Requirements, settings: Jobs| {
            let failure = admit(bytes, &req, &node(), &settings).unwrap_err();
            assert_eq!(failure.class, FaultClass::Job);
            failure.reason
        };
        assert!(
            refuse(b"{\"version\":1}", requirements(), Jobs::default()).starts_with("invalid spec")
        );
        let mut long = spec();
        long.timeout_secs = 121;
        assert!(refuse(&long.to_vec(), requirements(), Jobs::default()).contains("maxRuntime"));
        let mut gpus = requirements();
        gpus.min_gpu_count = 1;
        assert!(refuse(&spec().to_vec(), gpus, Jobs::default()).contains("GPUs"));
        let mut ram = requirements();
        ram.min_ram_mib = 8192;
        assert!(refuse(&spec().to_vec(), ram, Jobs::default()).contains("memory"));
        let mut inference = spec();
        inference.kind = JobKind::Inference;
        let settings = Jobs {
            accept_inference: false,
            ..Jobs::default()
        };
        assert!(refuse(&inference.to_vec(), requirements(), settings).contains("inference"));
        // A runtime the node's answer margin eats whole: nothing could run.
        let mut short = spec();
        short.timeout_secs = 30;
        let mut runtime = requirements();
        runtime.max_runtime = 60;
        assert!(refuse(&short.to_vec(), runtime, Jobs::default()).contains("no time to run"));
        let settings = Jobs {
            answer_margin: Duration::from_secs(20),
            ..Jobs::default()
        };
        assert!(admit(&short.to_vec(), &runtime, &node(), &settings).is_ok());
    }

    fn wasm_spec(memory_mib: Option<u32>) -> JobSpec {
        JobSpec {
            version: 2,
            engine: Engine::Wasm,
            image: String::new(),
            command: vec![],
            wasm: Some(gantry_protocol::spec::WasmSpec {
                module: gantry_protocol::spec::ModuleSpec {
                    uri: "https://example.org/m.wasm".into(),
                    sha256: "ab".repeat(32),
                    max_bytes: None,
                },
                entry: None,
                memory_mib,
                deterministic: false,
            }),
            ..spec()
        }
    }

    fn wasm_requirements() -> Requirements {
        Requirements {
            engine: Engine::Wasm.code(),
            ..requirements()
        }
    }

    #[test]
    fn a_job_whose_terms_and_spec_name_different_engines_is_refused() {
        let refuse = |spec: JobSpec, req: Requirements| {
            let failure = admit(&spec.to_vec(), &req, &node(), &Jobs::default()).unwrap_err();
            assert_eq!(failure.class, FaultClass::Job);
            failure.reason
        };
        assert_eq!(
            refuse(wasm_spec(None), requirements()),
            "the job was posted for docker, and its spec is a wasm job"
        );
        assert_eq!(
            refuse(spec(), wasm_requirements()),
            "the job was posted for wasm, and its spec is a docker job"
        );
        let unknown = Requirements {
            engine: 7,
            ..requirements()
        };
        assert_eq!(
            refuse(spec(), unknown),
            "the job was posted for engine 7, and its spec is a docker job"
        );
    }

    #[test]
    fn a_wasm_job_gets_its_module_s_memory_and_no_gpu() {
        let admitted = admit(
            &wasm_spec(Some(64)).to_vec(),
            &wasm_requirements(),
            &node(),
            &Jobs::default(),
        )
        .unwrap();
        assert_eq!(admitted.memory_bytes, 64 << 20, "the spec's limit");
        assert_eq!(admitted.gpus, 0);
        let defaulted = admit(
            &wasm_spec(None).to_vec(),
            &wasm_requirements(),
            &node(),
            &Jobs::default(),
        )
        .unwrap();
        assert_eq!(
            defaulted.memory_bytes,
            512 << 20,
            "the requirements' memory"
        );

        let refuse = |spec: JobSpec, req: Requirements, settings: Jobs| {
            let failure = admit(&spec.to_vec(), &req, &node(), &settings).unwrap_err();
            assert_eq!(failure.class, FaultClass::Job);
            failure.reason
        };
        let mut gpus = wasm_requirements();
        gpus.min_gpu_count = 1;
        let with_gpus = NodeLimits { gpus: 1, ..node() };
        let failure = admit(
            &wasm_spec(None).to_vec(),
            &gpus,
            &with_gpus,
            &Jobs::default(),
        )
        .unwrap_err();
        assert!(failure.reason.contains("runs on the CPU"), "{failure:?}");
        let docker_only = Jobs {
            engines: vec![Engine::Docker],
            ..Jobs::default()
        };
        assert_eq!(
            refuse(wasm_spec(None), wasm_requirements(), docker_only),
            "this node does not run wasm jobs"
        );
        let wasm_only = Jobs {
            engines: vec![Engine::Wasm],
            ..Jobs::default()
        };
        assert_eq!(
            refuse(spec(), requirements(), wasm_only),
            "this node does not run docker jobs"
        );
        assert!(
            refuse(wasm_spec(Some(8192)), wasm_requirements(), Jobs::default()).contains("memory")
        );
    }

    #[test]
    fn the_spec_can_lower_but_not_raise_the_output_limit() {
        let mut small = spec();
        small.outputs.max_bytes = Some(1000);
        let settings = Jobs::default();
        assert_eq!(
            admit(&small.to_vec(), &requirements(), &node(), &settings)
                .unwrap()
                .output_limit,
            1000
        );
        small.outputs.max_bytes = Some(u64::MAX);
        assert_eq!(
            admit(&small.to_vec(), &requirements(), &node(), &settings)
                .unwrap()
                .output_limit,
            settings.max_output_bytes
        );
    }
}
