//! What the node has: GPUs through NVML (model, VRAM, driver and CUDA version), CPU
//! cores, RAM and free disk. Without NVML (no NVIDIA driver) the node has no GPUs and says
//! so; CPU-only jobs still run.

use std::path::Path;

use alloy::primitives::B256;
use sysinfo::{Disks, MemoryRefreshKind, RefreshKind, System};

/// One GPU as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    pub index: u32,
    pub uuid: String,
    /// NVML's name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    pub vram_mib: u32,
}

/// The node's hardware at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    pub gpus: Vec<Gpu>,
    /// Driver and CUDA versions, when NVML answered.
    pub driver_version: Option<String>,
    pub cuda_version: Option<String>,
    /// Why there are no GPUs, when NVML did not answer.
    pub nvml_unavailable: Option<String>,
    pub cpu_cores: u16,
    pub ram_mib: u32,
    /// Free space on the file system holding the work directory.
    pub free_disk_mib: u64,
}

impl Inventory {
    /// Looks at this machine; `work_dir` decides which file system's free space counts.
    pub fn detect(work_dir: &Path) -> Self {
        let (gpus, driver_version, cuda_version, nvml_unavailable) = match detect_gpus() {
            Ok((gpus, driver, cuda)) => (gpus, Some(driver), Some(cuda), None),
            Err(reason) => (Vec::new(), None, None, Some(reason)),
        };
        let system = System::new_with_specifics(
            RefreshKind::nothing().with_memory(MemoryRefreshKind::nothing().with_ram()),
        );
        let cpu_cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            gpus,
            driver_version,
            cuda_version,
            nvml_unavailable,
            cpu_cores: u16::try_from(cpu_cores).unwrap_or(u16::MAX),
            ram_mib: u32::try_from(system.total_memory() / (1024 * 1024)).unwrap_or(u32::MAX),
            free_disk_mib: free_disk(work_dir) / (1024 * 1024),
        }
    }

    /// Logs what was found, saying plainly when there are no GPUs.
    pub fn log(&self) {
        match &self.nvml_unavailable {
            Some(reason) => tracing::warn!(
                reason = %reason,
                cpu_cores = self.cpu_cores,
                ram_mib = self.ram_mib,
                free_disk_mib = self.free_disk_mib,
                "no NVML: this node has no usable GPUs and takes CPU-only jobs"
            ),
            None => tracing::info!(
                gpus = self.gpus.len(),
                model = self.gpus.first().map_or("", |g| g.name.as_str()),
                vram_mib = self.min_vram_mib(),
                driver = self.driver_version.as_deref().unwrap_or(""),
                cuda = self.cuda_version.as_deref().unwrap_or(""),
                cpu_cores = self.cpu_cores,
                ram_mib = self.ram_mib,
                free_disk_mib = self.free_disk_mib,
                "hardware detected"
            ),
        }
    }

    /// The on-chain GPU model: the first GPU's name with spaces as dashes, e.g.
    /// "NVIDIA-H100-80GB-HBM3", right-padded to 32 bytes; zero without GPUs. A mixed node
    /// reports its first model and its smallest VRAM (what every GPU can honour).
    pub fn gpu_model(&self) -> B256 {
        self.gpus
            .first()
            .map_or(B256::ZERO, |gpu| model_id(&gpu.name))
    }

    /// Free space on the file system holding `path`, MiB.
    pub fn free_disk_mib(path: &Path) -> u64 {
        free_disk(path) / (1024 * 1024)
    }

    pub fn min_vram_mib(&self) -> u32 {
        self.gpus.iter().map(|g| g.vram_mib).min().unwrap_or(0)
    }
}

/// Samples the utilisation and memory of the GPUs a job runs on (NVML); without NVML
/// every sample is `None`.
pub struct GpuMonitor {
    nvml: Option<nvml_wrapper::Nvml>,
}

impl std::fmt::Debug for GpuMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuMonitor")
            .field("nvml", &self.nvml.is_some())
            .finish()
    }
}

/// One sample over a job's GPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuSample {
    /// Mean utilisation, 0–1.
    pub utilization: f64,
    /// Memory in use on those GPUs together, MiB.
    pub memory_used_mib: u64,
}

impl GpuMonitor {
    pub fn new() -> Self {
        Self {
            nvml: nvml_wrapper::Nvml::init().ok(),
        }
    }

    /// The mean over `indices`; `None` without NVML, without GPUs, or when NVML fails.
    pub fn sample(&self, indices: &[u32]) -> Option<GpuSample> {
        let nvml = self.nvml.as_ref()?;
        if indices.is_empty() {
            return None;
        }
        let mut utilization = 0.0;
        let mut memory_used_mib = 0;
        for &index in indices {
            let device = nvml.device_by_index(index).ok()?;
            utilization += f64::from(device.utilization_rates().ok()?.gpu) / 100.0;
            memory_used_mib += device.memory_info().ok()?.used / (1024 * 1024);
        }
        Some(GpuSample {
            utilization: utilization / indices.len() as f64,
            memory_used_mib,
        })
    }
}

impl Default for GpuMonitor {
    fn default() -> Self {
        Self::new()
    }
}

/// `gantry-worker inventory`: prints this machine's inventory as JSON (what the node
/// registers, and the device request a job on all its GPUs gets), then `sample_secs` of
/// GPU telemetry over every GPU, a line each half second.
pub async fn print(work_dir: &Path, sample_secs: u64) -> anyhow::Result<()> {
    let inventory = Inventory::detect(work_dir);
    let model = inventory.gpu_model();
    let uuids: Vec<String> = inventory.gpus.iter().map(|g| g.uuid.clone()).collect();
    let plan = crate::sandbox::RunPlan {
        name: "inventory".into(),
        image: "any".into(),
        command: Vec::new(),
        env: Vec::new(),
        image_user: None,
        inputs_dir: work_dir.into(),
        outputs_dir: work_dir.into(),
        checkpoints_dir: work_dir.into(),
        tmp_dir: work_dir.into(),
        memory_bytes: 0,
        cpu_threads: inventory.cpu_cores,
        pids_limit: 0,
        max_log_bytes: 0,
        gpu_uuids: uuids,
        labels: Vec::new(),
        deterministic: false,
    };
    let device_requests = crate::sandbox::container_body(&plan)
        .host_config
        .and_then(|h| h.device_requests);
    let gpus: Vec<serde_json::Value> = inventory
        .gpus
        .iter()
        .map(|g| serde_json::json!({"index": g.index, "uuid": g.uuid, "name": g.name, "vramMiB": g.vram_mib}))
        .collect();
    let report = serde_json::json!({
        "gpus": gpus,
        "driver": inventory.driver_version,
        "cuda": inventory.cuda_version,
        "nvmlUnavailable": inventory.nvml_unavailable,
        "registers": {
            "gpuModel": String::from_utf8_lossy(model.as_slice()).trim_end_matches('\0'),
            "gpuModelHex": format!("{model:#x}"),
            "gpuCount": inventory.gpus.len(),
            "vramMiB": inventory.min_vram_mib(),
            "cpuCores": inventory.cpu_cores,
            "ramMiB": inventory.ram_mib,
        },
        "freeDiskMiB": inventory.free_disk_mib,
        "deviceRequests": device_requests,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    let monitor = GpuMonitor::new();
    let indices: Vec<u32> = inventory.gpus.iter().map(|g| g.index).collect();
    let started = std::time::Instant::now();
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
    while started.elapsed().as_secs() < sample_secs {
        tick.tick().await;
        let sample = monitor.sample(&indices);
        println!(
            "{}",
            serde_json::json!({
                "t": started.elapsed().as_secs_f64(),
                "utilization": sample.map(|s| s.utilization),
                "memoryUsedMiB": sample.map(|s| s.memory_used_mib),
            })
        );
    }
    Ok(())
}

/// "NVIDIA H100 80GB HBM3" → bytes32 "NVIDIA-H100-80GB-HBM3" (at most 32 bytes).
pub fn model_id(name: &str) -> B256 {
    let normalized: String = name.split_whitespace().collect::<Vec<_>>().join("-");
    let bytes = normalized.as_bytes();
    B256::right_padding_from(&bytes[..bytes.len().min(32)])
}

fn detect_gpus() -> Result<(Vec<Gpu>, String, String), String> {
    let nvml = nvml_wrapper::Nvml::init().map_err(|e| format!("NVML did not load: {e}"))?;
    let count = nvml.device_count().map_err(|e| e.to_string())?;
    let mut gpus = Vec::with_capacity(count as usize);
    for index in 0..count {
        let device = nvml.device_by_index(index).map_err(|e| e.to_string())?;
        let memory = device.memory_info().map_err(|e| e.to_string())?;
        gpus.push(Gpu {
            index,
            uuid: device.uuid().map_err(|e| e.to_string())?,
            name: device.name().map_err(|e| e.to_string())?,
            vram_mib: u32::try_from(memory.total / (1024 * 1024)).unwrap_or(u32::MAX),
        });
    }
    let driver = nvml.sys_driver_version().map_err(|e| e.to_string())?;
    let cuda = nvml.sys_cuda_driver_version().map_err(|e| e.to_string())?;
    Ok((gpus, driver, cuda_version(cuda)))
}

/// NVML's CUDA version integer (12040) as "12.4".
fn cuda_version(encoded: i32) -> String {
    format!("{}.{}", encoded / 1000, (encoded % 1000) / 10)
}

/// Free bytes on the mounted file system that holds `path` (the longest mount-point prefix).
fn free_disk(path: &Path) -> u64 {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let disks = Disks::new_with_refreshed_list();
    disks
        .list()
        .iter()
        .filter(|disk| path.starts_with(disk.mount_point()))
        .max_by_key(|disk| disk.mount_point().as_os_str().len())
        .map_or(0, |disk| disk.available_space())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_become_padded_ids() {
        let id = model_id("NVIDIA H100 80GB HBM3");
        assert_eq!(&id[..21], b"NVIDIA-H100-80GB-HBM3");
        assert!(id[21..].iter().all(|b| *b == 0));
        // Longer than 32 bytes: cut, never a panic.
        let long = model_id(&"X".repeat(40));
        assert_eq!(&long[..], "X".repeat(32).as_bytes());
    }

    #[test]
    fn cuda_versions_read_like_nvidia_smi() {
        assert_eq!(cuda_version(12040), "12.4");
        assert_eq!(cuda_version(11080), "11.8");
    }

    #[test]
    fn this_machine_is_inventoried_consistently() {
        let dir = std::env::temp_dir();
        let inventory = Inventory::detect(&dir);
        assert!(inventory.cpu_cores >= 1);
        assert!(inventory.ram_mib > 0);
        assert!(inventory.free_disk_mib > 0, "{inventory:?}");
        // Either NVML answered (versions known) or it did not (no GPUs, a reason given).
        match &inventory.nvml_unavailable {
            Some(reason) => {
                assert!(inventory.gpus.is_empty() && !reason.is_empty());
                assert_eq!(inventory.gpu_model(), B256::ZERO);
            }
            None => assert!(inventory.driver_version.is_some() && inventory.cuda_version.is_some()),
        }
    }
}
