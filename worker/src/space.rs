//! A job's writable space: a fixed-size ext4 file system in an image file reserved on the
//! work directory's disk (`fallocate`), loop-mounted under the job's directory, and bound
//! into the container as `/outputs`, `/checkpoints` and `/tmp`. The kernel stops the job's
//! writes at the space's size (ENOSPC inside the job: its own limit, a job fault), the
//! host's disk holds exactly the image whatever the job writes, and the space is taken
//! before the job starts: a node without the room finds out before the job runs, not by
//! failing it halfway.
//!
//! Making a space takes tens of milliseconds (the reservation, `mkfs`, the mount), longer
//! than a WASM job takes to start: a [`SpacePool`] makes each slot's space before the job
//! that takes it arrives, and a fresh one once that job is done. A space is never used
//! twice: the next job cannot find what the last one left.
//!
//! IO glue around `mkfs.ext4` (e2fsprogs) and `mount -o loop` (util-linux): the worker
//! needs root (`CAP_SYS_ADMIN`) and loop devices, which [`probe`] checks at start-up.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::process::Command;

use crate::fault::Failure;

/// The image file of a job's space, beside its mount point.
const IMAGE: &str = "space.img";
/// The mount point of a job's space in its directory.
const MOUNT: &str = "space";
/// ext4's own structures (superblocks, group descriptors, inode tables) take about 1.5 %
/// of a small file system; the image is this much larger than the room promised.
const OVERHEAD_DIVISOR: u64 = 32;
const OVERHEAD_MIN: u64 = 4 << 20;
/// A space with less than this free counts as full: the job wrote up to its limit.
const FULL_SLACK: u64 = 1 << 20;

/// A job's mounted space; unmounted and its image deleted when dropped.
#[derive(Debug)]
pub struct Space {
    image: PathBuf,
    mount: PathBuf,
    /// Room promised to the job, bytes.
    room: u64,
}

impl Space {
    /// Reserves and mounts a space with `room` bytes free in `dir` (the job's directory).
    /// Every error is the node's: the job has not started.
    pub async fn create(dir: &Path, room: u64) -> Result<Self, Failure> {
        let space = Self {
            image: dir.join(IMAGE),
            mount: dir.join(MOUNT),
            room,
        };
        let size = room + (room / OVERHEAD_DIVISOR).max(OVERHEAD_MIN);
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            Failure::node(format!("the job's disk space: {what}: {e}"))
        };
        tokio::fs::create_dir_all(&space.mount)
            .await
            .map_err(|e| failed("mount point", &e))?;
        let image = space.image.clone();
        // Reserved, not sparse: the job can never meet a full host disk halfway.
        tokio::task::spawn_blocking(move || reserve(&image, size))
            .await
            .map_err(|e| failed("reserving", &e))?
            .map_err(|e| failed(&format!("reserving {} MiB", size >> 20), &e))?;
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-m", "0", "-O", "^has_journal"])
            // `nodiscard`: discarding would punch the reservation out of the image.
            .args(["-E", "nodiscard,lazy_itable_init=1"])
            .arg(&space.image))
        .await
        .map_err(|e| failed("mkfs.ext4", &e))?;
        run(Command::new("mount")
            .args(["-t", "ext4", "-o", "loop,nosuid,nodev"])
            .arg(&space.image)
            .arg(&space.mount))
        .await
        .map_err(|e| failed("mount", &e))?;
        Ok(space)
    }

    /// Where the space is mounted; the job's writable directories go under it.
    pub fn path(&self) -> &Path {
        &self.mount
    }

    /// The room promised to the job, bytes.
    pub fn room(&self) -> u64 {
        self.room
    }

    /// Bytes the job's files take in the space now.
    pub fn used(&self) -> io::Result<u64> {
        let stat = rustix::fs::statvfs(&self.mount)?;
        let used_blocks = stat.f_blocks.saturating_sub(stat.f_bfree);
        Ok(used_blocks * stat.f_frsize)
    }

    /// Whether the job wrote its space full (what it is left is under a MiB).
    pub fn is_full(&self) -> bool {
        rustix::fs::statvfs(&self.mount)
            .is_ok_and(|stat| stat.f_bavail * stat.f_frsize < FULL_SLACK)
    }
}

impl Drop for Space {
    fn drop(&mut self) {
        unmount(&self.mount);
        if let Err(e) = std::fs::remove_file(&self.image)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(image = %self.image.display(), error = %e, "could not remove a job's disk image");
        }
        // The mount point, once empty (never recursively: were it still mounted, the
        // removal would reach into the job's files).
        let _ = std::fs::remove_dir(&self.mount);
    }
}

/// The spaces of the node's job slots, made ahead: one ready per slot not running a job.
/// Each space has the same room, the most a job on this node may write (its result, its
/// checkpoint and its scratch room at the node's limits). A job that finds none ready
/// (jobs arriving faster than spaces are made) gets one made on the spot, as before the
/// pool. The disk it holds is the node's: the spaces of every slot, always, whether their
/// jobs run or not. A space that cannot be made ahead (the disk full) is logged; the job
/// that then finds none ready tries to make one and, failing, is given back as the
/// node's fault before it starts, as without the pool.
#[derive(Debug)]
pub struct SpacePool {
    work_dir: PathBuf,
    room: u64,
    slots: usize,
    state: Mutex<PoolState>,
    /// Notified as each space made ahead is ready.
    made: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct PoolState {
    ready: Vec<Space>,
    /// Spaces being made in the background.
    making: usize,
    /// Spaces held by jobs.
    taken: usize,
    /// The name of the next space's directory (`space-<n>` in the work directory).
    next: u64,
    /// Closed at shutdown: nothing more is made, the ready ones are released.
    closed: bool,
}

impl SpacePool {
    /// How many spaces are ready now.
    pub fn ready(&self) -> usize {
        self.lock().ready.len()
    }

    /// Completes once `count` spaces are ready (for tests).
    pub async fn until_ready(&self, count: usize) {
        while self.ready() < count {
            self.made.notified().await;
        }
    }
}

/// A job's space from the pool: released when dropped (unmounted, its image deleted), and
/// a fresh one made in its place.
#[derive(Debug)]
pub struct PooledSpace {
    space: Option<Space>,
    home: PathBuf,
    pool: Arc<SpacePool>,
}

impl SpacePool {
    /// A pool of `slots` spaces of `room` bytes in `work_dir`; none made until [`fill`].
    ///
    /// [`fill`]: SpacePool::fill
    pub fn new(work_dir: &Path, room: u64, slots: usize) -> Arc<Self> {
        Arc::new(Self {
            work_dir: work_dir.to_owned(),
            room,
            slots,
            state: Mutex::new(PoolState::default()),
            made: tokio::sync::Notify::new(),
        })
    }

    /// The room of each space, bytes.
    pub fn room(&self) -> u64 {
        self.room
    }

    /// Makes spaces in the background until every slot has one (ready or taken).
    pub fn fill(self: &Arc<Self>) {
        let homes: Vec<PathBuf> = {
            let mut state = self.lock();
            let have = state.ready.len() + state.making + state.taken;
            let wanted = if state.closed {
                0
            } else {
                self.slots.saturating_sub(have)
            };
            state.making += wanted;
            (0..wanted).map(|_| self.next_home(&mut state)).collect()
        };
        for home in homes {
            let pool = self.clone();
            tokio::spawn(async move {
                let made = Space::create(&home, pool.room).await;
                let mut state = pool.lock();
                state.making -= 1;
                match made {
                    Ok(space) if !state.closed => {
                        state.ready.push(space);
                        drop(state);
                        pool.made.notify_one();
                    }
                    Ok(space) => {
                        drop(state);
                        drop(space);
                        let _ = std::fs::remove_dir(&home);
                    }
                    Err(failure) => {
                        drop(state);
                        let _ = std::fs::remove_dir_all(&home);
                        tracing::warn!(reason = %failure.reason, "could not make a job's disk space ahead");
                    }
                }
            });
        }
    }

    /// A space for a job: a ready one, or one made now when none is. Every error is the
    /// node's: the job has not started.
    pub async fn take(self: &Arc<Self>) -> Result<PooledSpace, Failure> {
        let (ready, home) = {
            let mut state = self.lock();
            state.taken += 1;
            match state.ready.pop() {
                Some(space) => (Some(space), None),
                None => (None, Some(self.next_home(&mut state))),
            }
        };
        let space = match (ready, home) {
            (Some(space), _) => space,
            (None, Some(home)) => match Space::create(&home, self.room).await {
                Ok(space) => space,
                Err(failure) => {
                    self.lock().taken -= 1;
                    let _ = std::fs::remove_dir_all(&home);
                    return Err(failure);
                }
            },
            (None, None) => unreachable!("a space or a home for one"),
        };
        let home = space
            .image
            .parent()
            .expect("a space's image is in its home")
            .to_owned();
        Ok(PooledSpace {
            space: Some(space),
            home,
            pool: self.clone(),
        })
    }

    /// Releases the ready spaces and makes no more (the worker is stopping). Spaces held
    /// by jobs are released by them.
    pub fn close(&self) {
        let ready = {
            let mut state = self.lock();
            state.closed = true;
            std::mem::take(&mut state.ready)
        };
        for space in ready {
            let home = space.image.parent().map(Path::to_owned);
            drop(space);
            if let Some(home) = home {
                let _ = std::fs::remove_dir(home);
            }
        }
    }

    /// A guard that closes the pool when dropped, however its owner ends.
    pub fn closing(self: &Arc<Self>) -> ClosePool {
        ClosePool(self.clone())
    }

    fn next_home(&self, state: &mut PoolState) -> PathBuf {
        state.next += 1;
        self.work_dir.join(format!("space-{}", state.next))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state
            .lock()
            .expect("the pool's lock is never poisoned")
    }
}

/// Closes its pool when dropped ([`SpacePool::closing`]).
#[derive(Debug)]
pub struct ClosePool(Arc<SpacePool>);

impl Drop for ClosePool {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl std::ops::Deref for PooledSpace {
    type Target = Space;

    fn deref(&self) -> &Space {
        self.space.as_ref().expect("held until dropped")
    }
}

impl Drop for PooledSpace {
    fn drop(&mut self) {
        drop(self.space.take());
        let _ = std::fs::remove_dir(&self.home);
        self.pool.lock().taken -= 1;
        // The slot's next space, made while the job's answer goes out.
        if tokio::runtime::Handle::try_current().is_ok() {
            self.pool.fill();
        }
    }
}

/// Unmounts the space a previous run left in the job directory `dir`, if any, so that
/// removing `dir` cannot reach into it.
pub fn unmount_in(dir: &Path) {
    unmount(&dir.join(MOUNT));
}

/// Removes everything under `work_dir` that a previous run left (after a crash), its
/// spaces unmounted first so that no removal reaches into a mounted file system.
pub async fn clear(work_dir: &Path) -> io::Result<()> {
    let mut entries = tokio::fs::read_dir(work_dir).await?;
    while let Some(entry) = entries.next_entry().await? {
        if entry.file_name() == crate::seats::SEALS_DIR {
            continue;
        }
        let path = entry.path();
        unmount_in(&path);
        if entry.file_type().await?.is_dir() {
            tokio::fs::remove_dir_all(&path).await?;
        } else {
            tokio::fs::remove_file(&path).await?;
        }
    }
    Ok(())
}

/// Unmounts every job space under `work_dir`, leaving the files (the worker's reaper, when
/// the worker died: its next start empties the directory).
pub async fn unmount_all(work_dir: &Path) {
    let Ok(mut entries) = tokio::fs::read_dir(work_dir).await else {
        return;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        unmount_in(&entry.path());
    }
}

/// Checks at start-up that this machine can give jobs their spaces: a small one is made,
/// written and released in `work_dir`.
pub async fn probe(work_dir: &Path) -> Result<(), Failure> {
    let dir = work_dir.join(".probe");
    let space = Space::create(&dir, 1 << 20).await.map_err(|f| {
        Failure::node(format!(
            "{} (the worker needs root or CAP_SYS_ADMIN, loop devices, mkfs.ext4 and mount; \
             in a container: privileged, with the work directory bind-mounted rshared)",
            f.reason
        ))
    })?;
    let written = tokio::fs::write(space.path().join("probe"), b"ok").await;
    drop(space);
    let _ = tokio::fs::remove_dir_all(&dir).await;
    written.map_err(|e| Failure::node(format!("the job's disk space: writing: {e}")))
}

/// Lazily unmounts `mount` if it is a mount point (a container that still holds it keeps
/// its view until it is gone; the loop device is freed then).
fn unmount(mount: &Path) {
    use rustix::mount::{UnmountFlags, unmount};
    match unmount(mount, UnmountFlags::DETACH) {
        Ok(()) => {}
        // Not a mount point, or not there.
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOENT) => {}
        Err(e) => {
            tracing::warn!(mount = %mount.display(), error = %e, "could not unmount a job's disk space")
        }
    }
}

fn reserve(image: &Path, size: u64) -> io::Result<()> {
    let file = std::fs::File::create(image)?;
    rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, size)?;
    Ok(())
}

/// Runs a command to its end; a failure says what it printed.
async fn run(command: &mut Command) -> Result<(), String> {
    let output = command
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| e.to_string())?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Err(format!("{} ({})", said.trim(), output.status))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    /// What the kernel does with a space: a writer without end stops at its room with
    /// ENOSPC, the host holds exactly the image, and dropping it leaves nothing mounted.
    #[tokio::test]
    async fn a_space_stops_a_writer_at_its_room_and_holds_no_more_of_the_host() {
        let dir = tempfile::tempdir().unwrap();
        let room = 16 << 20;
        let space = Space::create(dir.path(), room).await.unwrap();
        let image = dir.path().join(IMAGE);
        let reserved = std::fs::metadata(&image).unwrap().blocks() * 512;
        let path = space.path().join("fill");
        let written = tokio::task::spawn_blocking(move || {
            let mut file = std::fs::File::create(path).unwrap();
            let chunk = vec![7u8; 1 << 16];
            let mut written = 0u64;
            loop {
                match file.write(&chunk) {
                    Ok(n) => written += n as u64,
                    Err(e) => return (written, e.raw_os_error()),
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(written.1, Some(rustix::io::Errno::NOSPC.raw_os_error()));
        assert!(written.0 >= room, "the job gets its room: {written:?}");
        assert!(space.is_full());
        assert!(space.used().unwrap() >= room);
        // The host's disk: the reservation, not a byte more.
        assert_eq!(std::fs::metadata(&image).unwrap().blocks() * 512, reserved);
        assert!(reserved <= room + (room / OVERHEAD_DIVISOR).max(OVERHEAD_MIN) + (1 << 20));
        let mount = space.path().to_owned();
        drop(space);
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(!mounts.contains(mount.to_str().unwrap()), "still mounted");
        assert!(!image.exists());
    }

    /// The pool makes a space per slot ahead, hands each out once (the next job never
    /// finds the last one's files), makes a fresh one in a released one's place, and
    /// leaves nothing behind once closed.
    #[tokio::test]
    async fn a_pool_makes_each_slot_a_fresh_space_ahead_and_never_hands_one_out_twice() {
        let work = tempfile::tempdir().unwrap();
        let pool = SpacePool::new(work.path(), 1 << 20, 2);
        pool.fill();
        pool.until_ready(2).await;
        let first = pool.take().await.unwrap();
        let second = pool.take().await.unwrap();
        assert_eq!(pool.ready(), 0);
        assert_ne!(first.path(), second.path());
        assert_eq!(first.room(), 1 << 20);
        std::fs::write(first.path().join("secret"), b"the last job's").unwrap();
        // A third job while both slots' spaces are out: made on the spot.
        let third = pool.take().await.unwrap();
        assert!(
            std::fs::read_dir(third.path())
                .unwrap()
                .all(|e| e.unwrap().file_name() == "lost+found")
        );
        drop(third);
        let used = first.path().to_owned();
        drop(first);
        // Released: unmounted, its image and directories gone, a fresh one made for the slot.
        pool.until_ready(1).await;
        assert!(!used.exists());
        let next = pool.take().await.unwrap();
        assert_ne!(next.path(), used);
        assert!(!next.path().join("secret").exists());
        drop(next);
        drop(second);
        pool.until_ready(2).await;
        pool.close();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            !mounts.contains(work.path().to_str().unwrap()),
            "still mounted"
        );
        assert_eq!(
            std::fs::read_dir(work.path()).unwrap().count(),
            0,
            "left files"
        );
    }

    #[tokio::test]
    async fn clearing_the_work_directory_unmounts_what_a_crash_left() {
        let work = tempfile::tempdir().unwrap();
        let job = work.path().join("7-100");
        let space = Space::create(&job, 1 << 20).await.unwrap();
        std::fs::write(space.path().join("left"), b"x").unwrap();
        // The worker died: nothing dropped the space.
        std::mem::forget(space);
        clear(work.path()).await.unwrap();
        assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0);
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(!mounts.contains(job.to_str().unwrap()), "still mounted");
    }
}
