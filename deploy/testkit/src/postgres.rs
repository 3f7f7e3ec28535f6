//! A real PostgreSQL for tests: a private cluster (`initdb`) in a temporary folder, its
//! server on a free loopback port with the unix socket in that folder, stopped and removed
//! on drop.
//!
//! Debian keeps the server programs off `PATH` (`/usr/lib/postgresql/<version>/bin`), and
//! PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` system
//! user (created by Debian's `postgresql` package) and its programs run as that user.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::DevnetError;

/// The superuser role the cluster is created with, and the database [`Postgres::start`]
/// creates.
const SUPERUSER: &str = "gantry";
const DATABASE: &str = "gantry";
/// Where Debian installs one folder per major version.
const DEBIAN_ROOT: &str = "/usr/lib/postgresql";
const READY_LINE: &str = "database system is ready to accept connections";
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Tries at a free port: another process may take the one picked before the server binds it.
const PORT_TRIES: usize = 5;

/// A running PostgreSQL server with a database `gantry` owned by the superuser `gantry`,
/// reachable without a password.
#[derive(Debug)]
pub struct Postgres {
    child: Option<Child>,
    port: u16,
    bin: PathBuf,
    server_user: Option<ServerUser>,
    dir: tempfile::TempDir,
}

impl Postgres {
    /// Creates a cluster in a fresh temporary folder, starts its server on a free port,
    /// waits until it accepts connections, and creates the database `gantry`.
    pub fn start() -> Result<Self, DevnetError> {
        let bin = bin_dir()?;
        let server_user = ServerUser::for_this_process()?;
        // Short path: the socket's (`<dir>/.s.PGSQL.<port>`) must stay under the 108-byte
        // limit of a unix address.
        let dir = tempfile::Builder::new().prefix("gp").tempdir_in("/tmp")?;
        if let Some(user) = &server_user {
            std::os::unix::fs::chown(dir.path(), Some(user.uid), Some(user.gid))?;
        }
        let data = dir.path().join("data");
        run(
            server_command(&bin.join("initdb"), server_user.as_ref(), dir.path())
                .arg("-D")
                .arg(&data)
                .args(["-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--locale=C"])
                // Tests throw the cluster away: no need to wait for its files to reach the disk.
                .arg("--no-sync"),
        )?;
        let (child, port) = spawn(&bin, server_user.as_ref(), dir.path())?;
        let postgres = Self {
            child: Some(child),
            port,
            bin,
            server_user,
            dir,
        };
        run(Command::new(postgres.bin.join("createdb"))
            .args(["--no-password", "-h", "127.0.0.1", "-p", &port.to_string()])
            .args(["-U", SUPERUSER, DATABASE]))?;
        Ok(postgres)
    }

    /// `postgres://gantry@127.0.0.1:<port>/gantry`.
    pub fn url(&self) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{DATABASE}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The folder holding the cluster and the server's unix socket (`host=<dir>`).
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `sql` with `psql` against [`Postgres::url`] and returns its output: rows one a
    /// line, columns separated by `|`, no headers.
    pub fn psql(&self, sql: &str) -> Result<String, DevnetError> {
        let stdout = run(Command::new(self.bin.join("psql"))
            .args([
                "--no-psqlrc",
                "--no-password",
                "--no-align",
                "--tuples-only",
            ])
            .args(["--set", "ON_ERROR_STOP=1", "--dbname"])
            .arg(self.url())
            .args(["--command", sql]))?;
        Ok(stdout.trim_end_matches('\n').to_string())
    }

    /// Immediate shutdown: the data is thrown away, so there is nothing to checkpoint.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let stopped = server_command(
            &self.bin.join("pg_ctl"),
            self.server_user.as_ref(),
            self.dir.path(),
        )
        .arg("stop")
        .arg("-D")
        .arg(self.dir.path().join("data"))
        .args(["-m", "immediate", "-w", "-t", "10"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
        if !stopped {
            let _ = child.kill();
        }
        let _ = child.wait();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
        // The temporary folder goes with `self.dir`, after the server has exited.
    }
}

/// The system user the server runs as when this process is root.
#[derive(Debug, Clone, Copy)]
struct ServerUser {
    uid: u32,
    gid: u32,
}

impl ServerUser {
    /// `None` when this process is not root: the cluster is then simply its own.
    fn for_this_process() -> Result<Option<Self>, DevnetError> {
        // /proc/self belongs to the process's effective user.
        let euid = std::fs::metadata("/proc/self")?.uid();
        if euid != 0 {
            return Ok(None);
        }
        let passwd = std::fs::read_to_string("/etc/passwd")?;
        passwd
            .lines()
            .find_map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                match fields.as_slice() {
                    ["postgres", _, uid, gid, ..] => Some(Self {
                        uid: uid.parse().ok()?,
                        gid: gid.parse().ok()?,
                    }),
                    _ => None,
                }
            })
            .map(Some)
            .ok_or_else(|| {
                DevnetError::Postgres(
                    "running as root needs the system user `postgres`: install Debian's \
                     postgresql (`deploy/setup.sh`)"
                        .into(),
                )
            })
    }
}

/// `program` run as the server's user (through `setpriv`, which execs it in place, so a
/// child handle is the program itself), with English messages and `cwd` as its working
/// directory (the caller's may be closed to that user).
fn server_command(program: &Path, user: Option<&ServerUser>, cwd: &Path) -> Command {
    let mut command = match user {
        Some(user) => {
            let mut command = Command::new("setpriv");
            command
                .arg(format!("--reuid={}", user.uid))
                .arg(format!("--regid={}", user.gid))
                .args(["--clear-groups", "--"])
                .arg(program);
            command
        }
        None => Command::new(program),
    };
    command.current_dir(cwd).env("LC_ALL", "C");
    command
}

/// Starts the server on a free port, retrying when the port was taken meanwhile, and
/// waits until it accepts connections.
fn spawn(bin: &Path, user: Option<&ServerUser>, dir: &Path) -> Result<(Child, u16), DevnetError> {
    let mut last_log = String::new();
    for _ in 0..PORT_TRIES {
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))?
            .local_addr()?
            .port();
        match spawn_on(bin, user, dir, port)? {
            Ok(child) => return Ok((child, port)),
            Err(log) if log.contains("Address already in use") => last_log = log,
            Err(log) => {
                return Err(DevnetError::Postgres(format!(
                    "the server did not start:\n{log}"
                )));
            }
        }
    }
    Err(DevnetError::Postgres(format!(
        "no free port after {PORT_TRIES} tries:\n{last_log}"
    )))
}

/// `Ok(Err(log))` when the server exited before it was ready.
fn spawn_on(
    bin: &Path,
    user: Option<&ServerUser>,
    dir: &Path,
    port: u16,
) -> Result<Result<Child, String>, DevnetError> {
    let mut child = server_command(&bin.join("postgres"), user, dir)
        .arg("-D")
        .arg(dir.join("data"))
        .arg("-k")
        .arg(dir)
        .args(["-p", &port.to_string()])
        .args(["-c", "listen_addresses=127.0.0.1"])
        .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
        .args(["-c", "full_page_writes=off"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| DevnetError::Postgres(format!("starting postgres: {e}")))?;
    let stderr = child.stderr.take().expect("stderr is piped");
    let (ready_tx, ready_rx) = mpsc::channel();
    // Reads the log until the server is ready (or gone), then keeps draining it into the
    // trace so the pipe never fills.
    std::thread::spawn(move || {
        let mut startup_log = String::new();
        let mut ready_tx = Some(ready_tx);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            tracing::debug!(port, "postgres: {line}");
            let Some(tx) = &ready_tx else { continue };
            startup_log.push_str(&line);
            startup_log.push('\n');
            if line.contains(READY_LINE) {
                let _ = tx.send(Ok(()));
                ready_tx = None;
            }
        }
        if let Some(tx) = ready_tx {
            let _ = tx.send(Err(startup_log));
        }
    });
    match ready_rx.recv_timeout(READY_TIMEOUT) {
        Ok(Ok(())) => Ok(Ok(child)),
        Ok(Err(log)) => {
            let _ = child.wait();
            Ok(Err(log))
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(DevnetError::Postgres(format!(
                "the server was not ready within {} s",
                READY_TIMEOUT.as_secs()
            )))
        }
    }
}

/// Runs `command` to completion; its stdout, or an error with its stderr.
fn run(command: &mut Command) -> Result<String, DevnetError> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| DevnetError::Postgres(format!("running {:?}: {e}", command.get_program())))?;
    if !output.status.success() {
        let args: Vec<_> = command.get_args().map(|a| a.to_string_lossy()).collect();
        return Err(DevnetError::CommandFailed {
            command: format!(
                "{} {}",
                command.get_program().to_string_lossy(),
                args.join(" ")
            ),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The folder of `initdb` and its companions (`postgres`, `pg_ctl`, `createdb`, `psql`):
/// where `initdb` on `PATH` really lives, else Debian's newest
/// `/usr/lib/postgresql/<version>/bin`.
fn bin_dir() -> Result<PathBuf, DevnetError> {
    let from_path = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("initdb"))
        .find(|candidate| is_executable(candidate))
        .and_then(|initdb| initdb.canonicalize().ok())
        .and_then(|initdb| initdb.parent().map(Path::to_path_buf));
    if let Some(dir) = from_path {
        return Ok(dir);
    }
    let versions: Vec<String> = std::fs::read_dir(DEBIAN_ROOT)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|version| is_executable(&Path::new(DEBIAN_ROOT).join(version).join("bin/initdb")))
        .collect();
    newest(&versions)
        .map(|version| Path::new(DEBIAN_ROOT).join(version).join("bin"))
        .ok_or_else(|| DevnetError::ToolMissing {
            tool: "initdb",
            path: Path::new(DEBIAN_ROOT).join("<version>/bin/initdb"),
        })
}

/// The highest of version folder names like `15`, `16` or `9.6`; names that are not
/// versions are ignored.
fn newest(versions: &[String]) -> Option<&str> {
    versions
        .iter()
        .filter_map(|name| {
            let parts: Result<Vec<u32>, _> = name.split('.').map(str::parse).collect();
            Some((parts.ok()?, name.as_str()))
        })
        .max()
        .map(|(_, name)| name)
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::newest;

    #[test]
    fn newest_compares_versions_as_numbers() {
        fn check(names: &[&str], expected: Option<&str>) {
            let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            assert_eq!(newest(&names), expected, "{names:?}");
        }
        check(&[], None);
        check(&["15"], Some("15"));
        check(&["9.6", "15", "10"], Some("15"));
        check(&["15", "16", "README"], Some("16"));
        check(&["9.6", "9.10"], Some("9.10"));
        check(&["notes"], None);
    }
}
