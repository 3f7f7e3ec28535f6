//! The part of a `gantry-worker` config file that says where everything is.

use std::path::Path;

use crate::Devnet;

/// The top of a worker's config file: the chain of `devnet` and its contracts, NATS at
/// `nats_url`, the Docker engine at `docker_socket`, and the cache and work folders under
/// `root`. Inputs may come from `127.0.0.1`, where tests and the dev network serve them
/// (without this a worker refuses them); `localhost` and the rest of the machine's
/// loopback stay refused. The caller adds `metrics_addr` and the `[node]` and `[jobs]`
/// sections.
pub fn worker_config(devnet: &Devnet, nats_url: &str, docker_socket: &Path, root: &Path) -> String {
    let d = devnet.deployment;
    format!(
        "rpc_url = {rpc_url}\n\
         chain_id = {chain_id}\n\
         nats_url = {nats_url}\n\
         market = \"{market}\"\n\
         registry = \"{registry}\"\n\
         token = \"{token}\"\n\
         docker_socket = {docker_socket}\n\
         cache_dir = {cache_dir}\n\
         work_dir = {work_dir}\n\
         allow_input_hosts = [\"127.0.0.1\"]\n",
        rpc_url = toml_string(devnet.anvil.endpoint_url().as_str()),
        chain_id = d.chain_id,
        nats_url = toml_string(nats_url),
        market = d.market,
        registry = d.registry,
        token = d.token,
        docker_socket = toml_path(docker_socket),
        cache_dir = toml_path(&root.join("cache")),
        work_dir = toml_path(&root.join("work")),
    )
}

/// A TOML basic string: a JSON string is one (the same quotes and escapes).
fn toml_string(value: &str) -> String {
    serde_json::to_string(value).expect("a string serializes")
}

fn toml_path(path: &Path) -> String {
    toml_string(&path.display().to_string())
}
