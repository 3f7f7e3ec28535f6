//! The SQL side of the projection, over sqlx's `Any` driver: SQLite (a file, the default)
//! or PostgreSQL (`postgres://…`), the same migrations and queries for both. Each block
//! (or retraction) is written together with the new checkpoint in one transaction, so a
//! crash never applies an event twice or skips one.
//!
//! Tables: `events` (every applied event with the job, node and account it touched),
//! `jobs`, `nodes` and `accounts` (the rows folded from them, as JSON, with the columns the
//! lists filter and the stats sum), `policies` (the market's policy versions), `blocks`
//! and `checkpoint`; [`reports`] adds the workers' reports, [`market`] the money reads.

use alloy::primitives::U256;
use gantry_protocol::api::{
    AccountRow, AttemptRow, JobBrief, JobPolicy, JobRow, Minute, NodeRow, Stats, TimelineEntry,
};
use gantry_protocol::envelope::{BlockCommit, EventEnvelope, Retraction};
use gantry_protocol::jobs::CompletionReport;
use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Row};

use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::events::{GantryEvent, event_name};
use gantry_protocol::status::{JobStatus, NodeStatus, UnknownStatusName};

mod documents;
mod events;
mod market;
mod reports;
mod rows;

use bytes::Bytes;
pub use documents::JobDocument;
use documents::{Documents, SummaryText};
use events::{EVENT_VALUES, EventValues, INSERT_EVENTS, event_columns, stored_event};
pub use market::SLASHES_SHOWN;
pub use reports::{LOG_LINES_KEPT, PROGRESS_SAMPLES_KEPT};
pub use rows::OutOfRange;
use rows::{Columns, bigint, bodies, body};

use crate::model::{
    ModelError, Specs, Touches, amount, apply_account, apply_job, apply_job_reading, apply_node,
    job_of, policy_of, posted_policy, touches, typed, with_failure_reports,
};

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("stored row is not valid JSON: {0}")]
    Row(#[from] serde_json::Error),
    #[error("stored row: {0}")]
    Status(#[from] UnknownStatusName),
    #[error(transparent)]
    Integer(#[from] OutOfRange),
    #[error(
        "the projection was emptied and started again by another projector (epoch {0}): \
         this one stops, and its restart reads on from the new checkpoint"
    )]
    Superseded(u64),
    #[error("stored row: {0}")]
    Corrupt(String),
}

/// The projection's database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    /// SQLite, else PostgreSQL: the few queries whose SQL differs (JSON aggregation).
    sqlite: bool,
    /// The projection's epoch this store writes under (`checkpoint.epoch`, read at open
    /// and when it empties the projection): a claim under an older one fails.
    epoch: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Jobs' documents kept ready (`documents.rs`): forgotten after each commit that may
    /// change them.
    documents: std::sync::Arc<Documents>,
    /// SQLite: the WAL's checkpointer, woken after each commit of the chain projection.
    checkpoints: Option<Checkpoints>,
    /// Events one statement inserts at most while a range is folded
    /// ([`EVENTS_PER_INSERT`]).
    events_per_insert: usize,
}

/// Copies SQLite's WAL into the database file (a passive checkpoint: it waits for no
/// one) on a connection of its own, each time a commit wakes it, so that the writer's
/// next transaction and the copy run at once, on SQLite's two worker threads. Without
/// it the writer copied the WAL itself in the commit that filled it (a third of a
/// second, every 16 MiB written, with nothing else going on). Ends when the last store
/// sharing it is dropped.
#[derive(Debug, Clone)]
struct Checkpoints {
    wake: tokio::sync::mpsc::Sender<()>,
}

impl Checkpoints {
    fn start(pool: AnyPool) -> Self {
        let (wake, mut woken) = tokio::sync::mpsc::channel::<()>(1);
        tokio::spawn(async move {
            while woken.recv().await.is_some() {
                if let Err(error) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                    .execute(&pool)
                    .await
                {
                    tracing::warn!(%error, "SQLite's WAL checkpoint (the writer makes its own)");
                }
            }
        });
        Self { wake }
    }

    /// Asks for a checkpoint (one already asked for covers this one too).
    fn wake(&self) {
        let _ = self.wake.try_send(());
    }
}

/// Bytes of jobs' documents kept in memory unless told otherwise: about 130,000 documents
/// of 4 KiB (a job's document with a few events; the memory is taken only as documents are
/// read).
pub const DEFAULT_DOCUMENT_CACHE: u64 = 512 << 20;

pub(crate) type Tx<'a> = sqlx::Transaction<'a, sqlx::Any>;

impl Store {
    /// Connects (creating a SQLite file when missing) and runs the migrations.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        install_default_drivers();
        let sqlite = url.starts_with("sqlite:");
        let url = if sqlite && !url.contains("mode=") {
            format!("{url}{}mode=rwc", if url.contains('?') { '&' } else { '?' })
        } else {
            url.to_owned()
        };
        // SQLite takes one writer at a time; readers share the rest of the pool. Its
        // connections are in-process: no ping before use (a round trip through sqlx's
        // worker thread per query), and the file mapped rather than read page by page.
        let pool = AnyPoolOptions::new()
            .max_connections(if sqlite { 4 } else { 16 })
            .test_before_acquire(!sqlite)
            .after_connect(move |connection, _| {
                Box::pin(async move {
                    if sqlite {
                        // 16 KiB pages for a new file (a file's pages keep the size it
                        // was made with): a job's row (its JSON and summary, 2-3 KiB) left
                        // a third of a 4 KiB page empty, and the projection wrote those
                        // pages.
                        sqlx::query("PRAGMA page_size = 16384")
                            .execute(&mut *connection)
                            .await?;
                        sqlx::query("PRAGMA mmap_size = 1073741824")
                            .execute(&mut *connection)
                            .await?;
                        // The WAL is copied into the file by the store's checkpointer, on a
                        // connection of its own, while the writer goes on (`Checkpoints`); a
                        // writer copies it itself only once it holds 64 MiB (4,096 pages),
                        // the checkpointer having fallen behind.
                        sqlx::query("PRAGMA wal_autocheckpoint = 4096")
                            .execute(&mut *connection)
                            .await?;
                        // With WAL, NORMAL syncs at checkpoints, not at every commit: a
                        // power loss may drop the last transactions, never tear one, and
                        // the stream holds whatever was dropped (the checkpoint goes with
                        // it, so it is read again). Without WAL (a database in memory),
                        // the default stays.
                        let mode: String = sqlx::query("PRAGMA journal_mode = WAL")
                            .fetch_one(&mut *connection)
                            .await?
                            .get(0);
                        if mode.eq_ignore_ascii_case("wal") {
                            sqlx::query("PRAGMA synchronous = NORMAL")
                                .execute(connection)
                                .await?;
                        }
                    } else {
                        // A job's row (2-3 KiB of JSON) is past PostgreSQL's TOAST
                        // threshold and compressed as it is written: with lz4 where the
                        // server has it (PostgreSQL 14 and later, built with it) rather
                        // than pglz, which took a third of the server's time projecting.
                        // Only a speed-up: a server (or a proxy in front of one) that
                        // refuses the question or the setting keeps its default.
                        let lz4 = sqlx::query(
                            "SELECT 1 FROM pg_settings \
                             WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)",
                        )
                        .fetch_optional(&mut *connection)
                        .await;
                        let set = match lz4 {
                            Ok(Some(_)) => sqlx::query("SET default_toast_compression = 'lz4'")
                                .execute(connection)
                                .await
                                .map(drop),
                            Ok(None) => Ok(()),
                            Err(e) => Err(e),
                        };
                        if let Err(error) = set {
                            tracing::warn!(%error, "PostgreSQL's TOAST compression left as it is");
                        }
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        let store = Self {
            pool: pool.clone(),
            sqlite,
            epoch: Default::default(),
            documents: std::sync::Arc::new(Documents::new(DEFAULT_DOCUMENT_CACHE)),
            checkpoints: sqlite.then(|| Checkpoints::start(pool.clone())),
            events_per_insert: EVENTS_PER_INSERT,
        };
        let epoch = store.stored_epoch().await?;
        store
            .epoch
            .store(epoch, std::sync::atomic::Ordering::SeqCst);
        Ok(store)
    }

    /// Keeps up to `bytes` of jobs' documents ready in memory (0: none, every read builds
    /// it).
    pub fn with_document_cache(mut self, bytes: u64) -> Self {
        self.documents = std::sync::Arc::new(Documents::new(bytes));
        self
    }

    /// Inserts the events a range folds `events` a statement at most (the default
    /// [`EVENTS_PER_INSERT`]): a test makes it small, so that every kind of event is
    /// folded while an insert runs, and that every one that reads the database waits for one.
    #[doc(hidden)]
    pub fn with_events_per_insert(mut self, events: usize) -> Self {
        self.events_per_insert = events.max(1);
        self
    }

    /// Forgets the documents of `jobs` (a caller that knows they may have changed in a
    /// commit it did not make through this store's calls).
    pub fn forget_documents(&self, jobs: impl IntoIterator<Item = u64>) {
        self.documents.forget(jobs);
    }

    /// Forgets every document kept.
    pub fn forget_all_documents(&self) {
        self.documents.forget_all();
    }

    /// Bytes of jobs' documents kept in memory now.
    pub fn documents_kept(&self) -> u64 {
        self.documents.weight()
    }

    async fn stored_epoch(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT epoch FROM checkpoint WHERE id = 1")
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.unsigned(0)).transpose()?.unwrap_or(0))
    }

    /// The newest block applied: its number, hash and the stream sequence of its commit.
    pub async fn newest_block(
        &self,
    ) -> Result<Option<(u64, alloy::primitives::B256, u64)>, StoreError> {
        let row =
            sqlx::query("SELECT number, hash, stream_seq FROM blocks ORDER BY number DESC LIMIT 1")
                .fetch_optional(&self.pool)
                .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let hash: String = row.get(1);
        let hash = hash.parse().map_err(|_| {
            StoreError::Sql(sqlx::Error::Decode(
                format!("the stored block hash {hash} is not a hash").into(),
            ))
        })?;
        Ok(Some((row.unsigned(0)?, hash, row.unsigned(2)?)))
    }

    /// Empties the chain projection (the workers' reports stay) and moves it to a new
    /// epoch, so that it is folded again from the stream's start; false when another
    /// projector did so first (this store then writes under that epoch).
    pub async fn empty_projection(&self) -> Result<bool, StoreError> {
        use std::sync::atomic::Ordering;
        let epoch = self.epoch.load(Ordering::SeqCst);
        let mut tx = self.pool.begin().await?;
        let moved = sqlx::query(
            "UPDATE checkpoint SET stream_seq = 0, epoch = $1 WHERE id = 1 AND epoch = $2",
        )
        .bind(bigint(epoch + 1)?)
        .bind(bigint(epoch)?)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if moved != 1 {
            tx.rollback().await?;
            self.documents.forget_all();
            self.epoch
                .store(self.stored_epoch().await?, Ordering::SeqCst);
            return Ok(false);
        }
        for delete in [
            "DELETE FROM blocks",
            "DELETE FROM events",
            "DELETE FROM jobs",
            "DELETE FROM nodes",
            "DELETE FROM accounts",
            "DELETE FROM policies",
        ] {
            sqlx::query(delete).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        self.documents.forget_all();
        self.epoch.store(epoch + 1, Ordering::SeqCst);
        Ok(true)
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The stream sequence of the last message whose effects are stored (0: none).
    pub async fn checkpoint(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT stream_seq FROM checkpoint WHERE id = 1")
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.unsigned(0)).transpose()?.unwrap_or(0))
    }

    /// The newest block applied (0: none).
    pub async fn last_block(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT MAX(number) FROM blocks")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.unsigned_or_null(0)?.unwrap_or(0))
    }

    /// Applies a committed block's events and moves the checkpoint to `seq` (the
    /// commit's stream sequence), in one transaction. Returns the rows it changed, as
    /// they now are. When another projector sharing the database has applied the block
    /// already, writes nothing and returns those rows as they are.
    pub async fn apply_block(
        &self,
        events: &[EventEnvelope],
        commit: &BlockCommit,
        seq: u64,
    ) -> Result<Applied, StoreError> {
        let block = CommittedBlock {
            events,
            commit,
            seq,
        };
        let mut applied = self.apply_blocks(std::slice::from_ref(&block)).await?;
        Ok(applied.pop().unwrap_or_default())
    }

    /// Applies committed blocks in order, in one transaction that moves the checkpoint to
    /// the last one's sequence (while catching up: the transaction's cost is shared by the
    /// range). Each row is read once and written once for the whole range, the events in
    /// multi-row inserts. Returns, per block, the rows it changed as they are after it.
    /// When another projector sharing the database has applied some of the range, each
    /// block is applied (or read back) on its own.
    pub async fn apply_blocks(
        &self,
        blocks: &[CommittedBlock<'_>],
    ) -> Result<Vec<Applied>, StoreError> {
        let (Some(first), Some(last)) = (blocks.first(), blocks.last()) else {
            return Ok(Vec::new());
        };
        // Every event read once, each posting's spec too (a distinct spec once).
        let events: usize = blocks.iter().map(|block| block.events.len()).sum();
        let mut specs = Specs::with_capacity(events);
        let typed_blocks: Vec<Vec<GantryEvent>> = blocks
            .iter()
            .map(|block| {
                block
                    .events
                    .iter()
                    .map(|event| {
                        let typed = typed(event)?;
                        if let GantryEvent::Market(JobMarket::JobMarketEvents::JobPosted(e)) =
                            &typed
                        {
                            specs.add(&e.spec);
                        }
                        Ok(typed)
                    })
                    .collect::<Result<_, StoreError>>()
            })
            .collect::<Result<_, _>>()?;
        // The jobs the events name, fetched together.
        let jobs: std::collections::BTreeSet<u64> =
            typed_blocks.iter().flatten().filter_map(job_of).collect();
        let mut tx = self.pool.begin().await?;
        if !self.claim_chain(&mut tx, first.seq, last.seq).await? {
            tx.rollback().await?;
            if let [block] = blocks {
                // Applied by another projector, committed (the claim waited for it).
                self.documents.forget(jobs.iter().copied());
                return Ok(vec![self.applied_by_another(block.commit).await?]);
            }
            let mut all = Vec::with_capacity(blocks.len());
            for block in blocks {
                all.extend(Box::pin(self.apply_blocks(std::slice::from_ref(block))).await?);
            }
            return Ok(all);
        }
        let mut batch = Batch::new(Parameters::of(self.sqlite), specs, self.events_per_insert);
        batch.fetch_jobs(&mut tx, &jobs).await?;
        // The nodes and accounts the events name themselves, fetched together too.
        let mut nodes = std::collections::BTreeSet::new();
        let mut accounts = std::collections::BTreeSet::new();
        for named in typed_blocks
            .iter()
            .flatten()
            .map(|typed| touches(typed, None))
        {
            nodes.extend(named.node);
            accounts.extend(named.account);
        }
        batch
            .fetch_nodes_and_accounts(&mut tx, &nodes, &accounts)
            .await?;
        // The fold, while SQLite or PostgreSQL inserts the events folded before: an
        // event whose rows are all read already folds without the database, one that
        // reads it (a row not fetched, a policy, a slash's treasury) waits for the insert.
        let mut fold = Fold::new(blocks, typed_blocks);
        loop {
            let stop = match batch.full_insert()? {
                Some(insert) => {
                    let (inserted, stop) =
                        tokio::join!(insert.execute(&mut *tx), async { fold.run(&mut batch) });
                    inserted?;
                    stop?
                }
                None => fold.run(&mut batch)?,
            };
            match stop {
                Stop::Full => {}
                Stop::Reads => fold.step_reading(&mut batch, &mut tx).await?,
                Stop::End => break,
            }
        }
        let all = fold.applied;
        batch.write(&mut tx).await?;
        tx.commit().await?;
        if let Some(checkpoints) = &self.checkpoints {
            checkpoints.wake();
        }
        self.documents.forget(jobs);
        Ok(all)
    }

    /// The rows a block applied by another projector touched, as they are now (its
    /// stored events name them).
    async fn applied_by_another(&self, commit: &BlockCommit) -> Result<Applied, StoreError> {
        let mut applied = Applied::default();
        let touched = sqlx::query(
            "SELECT job_id, node_id FROM events WHERE block_number = $1 AND block_hash = $2",
        )
        .bind(bigint(commit.block_number)?)
        .bind(format!("{:#x}", commit.block_hash))
        .fetch_all(&self.pool)
        .await?;
        for row in touched {
            if let Some(job) = row.unsigned_or_null(0)?
                && let Some(row) = self.job(job).await?
            {
                applied.jobs.insert(job, row);
            }
            if let Some(node) = row.unsigned_or_null(1)?
                && let Some(row) = self.node(node).await?
            {
                applied.nodes.insert(node, row);
            }
        }
        Ok(applied)
    }

    /// Undoes the orphaned blocks: their events and the policies they announced go, and
    /// every job, node and account they touched is refolded from the events that remain.
    /// Moves the checkpoint to `seq`. (Nothing when another projector has done it.)
    pub async fn retract(&self, retraction: &Retraction, seq: u64) -> Result<(), StoreError> {
        let parameters = Parameters::of(self.sqlite);
        let mut tx = self.pool.begin().await?;
        if !self.claim_chain(&mut tx, seq, seq).await? {
            tx.rollback().await?;
            self.documents.forget_all();
            return Ok(());
        }
        let mut jobs = std::collections::BTreeSet::new();
        let mut nodes = std::collections::BTreeSet::new();
        let mut accounts = std::collections::BTreeSet::new();
        for block in &retraction.orphaned {
            let number = bigint(block.number)?;
            let hash = format!("{:#x}", block.hash);
            let touched = sqlx::query(
                "SELECT job_id, node_id, account FROM events \
                 WHERE block_number = $1 AND block_hash = $2",
            )
            .bind(number)
            .bind(&hash)
            .fetch_all(&mut *tx)
            .await?;
            for row in touched {
                if let Some(job) = row.unsigned_or_null(0)? {
                    jobs.insert(job);
                }
                if let Some(node) = row.unsigned_or_null(1)? {
                    nodes.insert(node);
                }
                if let Some(account) = row.get::<Option<String>, _>(2) {
                    accounts.insert(account);
                }
            }
            for delete in [
                "DELETE FROM events WHERE block_number = $1 AND block_hash = $2",
                "DELETE FROM policies WHERE block_number = $1 AND block_hash = $2",
                "DELETE FROM blocks WHERE number = $1 AND hash = $2",
            ] {
                sqlx::query(delete)
                    .bind(number)
                    .bind(&hash)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        for job in jobs {
            let mut row = None;
            for event in events_of(&mut tx, &RowOf::Job(job)).await? {
                let typed = typed(&event)?;
                let policy = policy_for(&mut tx, &typed).await?;
                let treasury = treasury_for(&mut tx, &event, &typed).await?;
                row = apply_job(row, &event, &typed, policy.as_ref(), treasury.as_deref());
            }
            save_job(&mut tx, parameters, job, row.as_ref()).await?;
        }
        for node in nodes {
            let mut row = None;
            let events = events_of(&mut tx, &RowOf::Node(node)).await?;
            for (i, event) in events.iter().enumerate() {
                let previous = i.checked_sub(1).map(|p| &events[p]);
                row = apply_node(row, event, &typed(event)?, previous);
            }
            save_node(&mut tx, parameters, node, row.as_ref()).await?;
        }
        for account in accounts {
            let mut row = None;
            for event in events_of(&mut tx, &RowOf::Account(account.clone())).await? {
                row = Some(apply_account(row, &account, &event, &typed(&event)?));
            }
            save_account(&mut tx, parameters, row.as_ref(), &account).await?;
        }
        tx.commit().await?;
        self.documents.forget_all();
        Ok(())
    }

    /// Moves the checkpoint past messages with no effect (finality watermarks).
    pub async fn advance(&self, seq: u64) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        self.claim_chain(&mut tx, seq, seq).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Claims the chain checkpoint for the messages `first..=last` under this store's
    /// epoch: moves it to `last` unless it is at `first` or past it already (another
    /// projector applied some of them: false); an error when the projection was emptied
    /// and started again under a newer epoch (this projector's reading is of the old one).
    async fn claim_chain(
        &self,
        tx: &mut Tx<'_>,
        first: u64,
        last: u64,
    ) -> Result<bool, StoreError> {
        let epoch = self.epoch.load(std::sync::atomic::Ordering::SeqCst);
        sqlx::query(
            "INSERT INTO checkpoint (id, stream_seq, epoch) VALUES (1, 0, $1) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(bigint(epoch)?)
        .execute(&mut **tx)
        .await?;
        let moved = sqlx::query(
            "UPDATE checkpoint SET stream_seq = $1 WHERE id = 1 AND stream_seq < $2 AND epoch = $3",
        )
        .bind(bigint(last)?)
        .bind(bigint(first)?)
        .bind(bigint(epoch)?)
        .execute(&mut **tx)
        .await?
        .rows_affected();
        if moved == 1 {
            return Ok(true);
        }
        let row = sqlx::query("SELECT epoch FROM checkpoint WHERE id = 1")
            .fetch_one(&mut **tx)
            .await?;
        match row.unsigned(0)? {
            stored if stored != epoch => Err(StoreError::Superseded(stored)),
            _ => Ok(false),
        }
    }

    pub async fn job(&self, job_id: u64) -> Result<Option<JobRow>, StoreError> {
        body_by_id(&self.pool, JOB_BODY, job_id).await
    }

    pub async fn node(&self, node_id: u64) -> Result<Option<NodeRow>, StoreError> {
        body_by_id(&self.pool, NODE_BODY, node_id).await
    }

    /// Every job, by id (for tests and rebuild checks).
    pub async fn all_jobs(&self) -> Result<Vec<JobRow>, StoreError> {
        self.all_bodies("SELECT body FROM jobs ORDER BY job_id")
            .await
    }

    /// Every node, by id.
    pub async fn all_nodes(&self) -> Result<Vec<NodeRow>, StoreError> {
        self.all_bodies("SELECT body FROM nodes ORDER BY node_id")
            .await
    }

    /// The JSON bodies a query without parameters selects.
    async fn all_bodies<T: serde::de::DeserializeOwned>(
        &self,
        sql: &'static str,
    ) -> Result<Vec<T>, StoreError> {
        bodies(&sqlx::query(sql).fetch_all(&self.pool).await?)
    }

    /// Network figures: jobs and nodes by status, GPUs on active nodes, GPU-hours run,
    /// and the money: volume posted, paid to providers, fees, refunds, slashes, the
    /// treasury, stake (token base units); the policy in force and the pause.
    pub async fn stats(&self) -> Result<Stats, StoreError> {
        let mut stats = Stats::default();
        for row in sqlx::query("SELECT status, COUNT(*) FROM jobs GROUP BY status")
            .fetch_all(&self.pool)
            .await?
        {
            stats.jobs_by_status.insert(row.get(0), row.unsigned(1)?);
        }
        for row in sqlx::query("SELECT status, COUNT(*) FROM nodes GROUP BY status")
            .fetch_all(&self.pool)
            .await?
        {
            stats.nodes_by_status.insert(row.get(0), row.unsigned(1)?);
        }
        stats.active_nodes = stats.nodes_by_status.get("active").copied().unwrap_or(0);
        // Amounts are uint96 and do not fit BIGINT: summed here, exactly.
        let sum = |total: &mut U256, text: Option<String>| {
            *total = total.saturating_add(text.as_deref().map_or(U256::ZERO, amount));
        };
        let (mut volume, mut paid, mut fees, mut refunded) =
            (U256::ZERO, U256::ZERO, U256::ZERO, U256::ZERO);
        let mut gpu_seconds = 0u64;
        for row in sqlx::query("SELECT bounty, payout, fee, refund, gpu_seconds FROM jobs")
            .fetch_all(&self.pool)
            .await?
        {
            sum(&mut volume, row.get(0));
            sum(&mut paid, row.get(1));
            sum(&mut fees, row.get(2));
            sum(&mut refunded, row.get(3));
            gpu_seconds += row.unsigned(4)?;
        }
        let (mut stake, mut locked, mut slashed, mut swept) =
            (U256::ZERO, U256::ZERO, U256::ZERO, U256::ZERO);
        for node in self.all_bodies::<NodeRow>("SELECT body FROM nodes").await? {
            if node.status == NodeStatus::Active {
                stats.active_gpus += node.gpu_count;
            }
            sum(&mut stake, Some(node.stake));
            sum(&mut locked, Some(node.locked_stake));
            sum(&mut slashed, Some(node.slashed));
            sum(&mut swept, Some(node.fees_swept));
        }
        let market = self.market_figures().await?;
        stats.volume = volume.to_string();
        stats.paid_to_providers = paid.to_string();
        stats.fees = fees.to_string();
        stats.refunded = refunded.to_string();
        stats.slashed = slashed.to_string();
        // Slashes and reject charges go to the treasury at once, fees when swept.
        stats.treasury = slashed
            .saturating_add(swept)
            .saturating_sub(market.treasury_withdrawn)
            .to_string();
        stats.stake = stake.to_string();
        stats.locked_stake = locked.to_string();
        stats.gpu_hours = gpu_seconds as f64 / 3600.0;
        stats.policy_version = market.policy_version;
        stats.paused = market.paused;
        Ok(stats)
    }

    /// The network minute by minute over the `minutes` before `now` (unix seconds):
    /// jobs posted, completed and failed (chain time), and from the workers' progress
    /// reports the GPUs in use and their mean utilisation. Oldest first, every minute.
    pub async fn history(&self, minutes: u32, now: u64) -> Result<Vec<Minute>, StoreError> {
        let end = now / 60;
        let start = (end + 1).saturating_sub(u64::from(minutes));
        let mut buckets: Vec<Minute> = (start..=end)
            .map(|m| Minute {
                at: m * 60,
                ..Minute::default()
            })
            .collect();
        let index = |minute: u64| usize::try_from(minute.checked_sub(start)?).ok();
        let rows = sqlx::query(
            "SELECT block_timestamp / 60, name, COUNT(*) FROM events WHERE \
             name IN ('JobPosted', 'JobCompleted', 'JobFailed', 'JobExpired') \
             AND block_timestamp >= $1 GROUP BY block_timestamp / 60, name",
        )
        .bind(bigint(start * 60)?)
        .fetch_all(&self.pool)
        .await?;
        for row in rows {
            let Some(bucket) = index(row.unsigned(0)?).and_then(|i| buckets.get_mut(i)) else {
                continue;
            };
            let count = row.unsigned(2)?;
            let name: String = row.get(1);
            if name == event_name::<JobMarket::JobPosted>() {
                bucket.posted += count;
            } else if name == event_name::<JobMarket::JobCompleted>() {
                bucket.completed += count;
            } else {
                bucket.failed += count;
            }
        }
        let rows = sqlx::query(
            "SELECT d.minute, SUM(j.gpus) FROM (SELECT DISTINCT at_ms / 60000 AS minute, job_id \
             FROM progress_samples WHERE at_ms >= $1) d JOIN jobs j ON j.job_id = d.job_id \
             GROUP BY d.minute",
        )
        .bind(bigint(start * 60_000)?)
        .fetch_all(&self.pool)
        .await?;
        for row in rows {
            if let Some(bucket) = index(row.unsigned(0)?).and_then(|i| buckets.get_mut(i)) {
                bucket.gpus_in_use = row.unsigned_or_null(1)?.unwrap_or(0);
            }
        }
        let rows = sqlx::query(
            "SELECT at_ms / 60000, AVG(gpu_utilization) FROM progress_samples \
             WHERE at_ms >= $1 AND gpu_utilization IS NOT NULL GROUP BY at_ms / 60000",
        )
        .bind(bigint(start * 60_000)?)
        .fetch_all(&self.pool)
        .await?;
        for row in rows {
            if let Some(bucket) = index(row.unsigned(0)?).and_then(|i| buckets.get_mut(i)) {
                bucket.gpu_utilization = row.get(1);
            }
        }
        Ok(buckets)
    }

    /// The jobs running on a node (assigned, submitted or disputed), newest first.
    pub async fn node_jobs(&self, node_id: u64) -> Result<Vec<JobRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT body FROM jobs WHERE node_id = $1 AND status IN ($2, $3, $4) \
             ORDER BY job_id DESC LIMIT 1000",
        )
        .bind(bigint(node_id)?)
        .bind("assigned")
        .bind("submitted")
        .bind("disputed")
        .fetch_all(&self.pool)
        .await?;
        bodies(&rows)
    }

    /// The market's minimum stake now, base units: what its last `MarketParamsUpdated`
    /// said (`None`: none projected yet).
    pub async fn min_stake(&self) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE name = $1 ORDER BY block_number DESC, log_index DESC LIMIT 1"
        ))
        .bind(event_name::<JobMarket::MarketParamsUpdated>())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let params = stored_event(&row)?;
        Ok(match crate::model::typed(&params)? {
            GantryEvent::Market(JobMarket::JobMarketEvents::MarketParamsUpdated(e)) => {
                Some(e.params.minStake.to_string())
            }
            _ => None,
        })
    }

    /// The newest block's timestamp (0: none).
    pub async fn head_time(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT MAX(timestamp) FROM blocks")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.unsigned_or_null(0)?.unwrap_or(0))
    }

    /// `GET /v1/jobs/{id}`'s document, built by the database in one statement: the job's
    /// row with `timeline` (its events in chain order), `progress` (the latest report or
    /// null), `completions` (by attempt) and `pending: null` added, as JSON text, and the
    /// job's status. Only a job with a worker's report of an error is read back here, for
    /// its attempts to take the failure reports in (`model::with_failure_reports`); the
    /// handler adds the explanation of an open job; nothing else is parsed or serialised
    /// on the way out.
    pub async fn job_document(&self, job_id: u64) -> Result<Option<JobDocument>, StoreError> {
        if let Some(document) = self.documents.get(job_id) {
            return Ok(Some(document));
        }
        let ticket = self.documents.ticket();
        let document = self.build_job_document(job_id).await?;
        if let Some(document) = &document {
            self.documents.keep(job_id, ticket, document.clone());
        }
        Ok(document)
    }

    /// The job's document as the database builds it (what [`Store::job_document`] keeps).
    pub async fn build_job_document(&self, job_id: u64) -> Result<Option<JobDocument>, StoreError> {
        let sql = if self.sqlite {
            // json(): a subquery's result loses its JSON subtype, and json_set would embed
            // it as a string.
            "SELECT j.status, json_set(j.body, \
             '$.timeline', json((SELECT json_group_array(json_object('block', block_number, \
               'logIndex', log_index, 'at', block_timestamp, 'tx', tx_hash, 'name', name, \
               'data', json(CASE WHEN spec IS NULL THEN data \
                 ELSE json_set(data, '$.spec', '0x' || lower(hex(spec))) END)) \
               ORDER BY block_number, log_index) \
               FROM events WHERE job_id = j.job_id)), \
             '$.progress', json((SELECT body FROM progress WHERE job_id = j.job_id)), \
             '$.completions', json((SELECT json_group_array(json(body) ORDER BY attempt) \
               FROM completions WHERE job_id = j.job_id)), \
             '$.pending', NULL), \
             (SELECT COUNT(*) FROM completions WHERE job_id = j.job_id \
               AND body ->> '$.error' IS NOT NULL) \
             FROM jobs j WHERE j.job_id = $1"
        } else {
            // `jsonb` takes no `\u0000`, which a node's strings (a result's URI, a reject's
            // reason, its reports) may hold: shown as U+FFFD there, the text kept as it is.
            "SELECT j.status, (replace(j.body, '\\u0000', '\\uFFFD')::jsonb || jsonb_build_object( \
             'timeline', COALESCE((SELECT jsonb_agg(jsonb_build_object('block', block_number, \
               'logIndex', log_index, 'at', block_timestamp, 'tx', tx_hash, 'name', name, \
               'data', CASE WHEN spec IS NULL THEN replace(data, '\\u0000', '\\uFFFD')::jsonb \
                 ELSE jsonb_set(replace(data, '\\u0000', '\\uFFFD')::jsonb, '{spec}', to_jsonb('0x' || encode(spec, 'hex'))) END) \
               ORDER BY block_number, log_index) \
               FROM events WHERE job_id = j.job_id), '[]'::jsonb), \
             'progress', (SELECT replace(body, '\\u0000', '\\uFFFD')::jsonb FROM progress WHERE job_id = j.job_id), \
             'completions', COALESCE((SELECT jsonb_agg(replace(body, '\\u0000', '\\uFFFD')::jsonb ORDER BY attempt) \
               FROM completions WHERE job_id = j.job_id), '[]'::jsonb), \
             'pending', NULL))::text, \
             (SELECT COUNT(*) FROM completions WHERE job_id = j.job_id \
               AND replace(body, '\\u0000', '\\uFFFD')::jsonb ->> 'error' IS NOT NULL) \
             FROM jobs j WHERE j.job_id = $1"
        };
        let row = sqlx::query(sql)
            .bind(bigint(job_id)?)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| {
            let json: String = row.get(1);
            Ok(JobDocument {
                status: row.get::<String, _>(0).parse()?,
                json: if row.unsigned(2)? > 0 {
                    failure_reports_read(&json)?
                } else {
                    json
                }
                .into(),
            })
        })
        .transpose()
    }

    /// The job's events in chain order: (block, log index, tx hash, name, data JSON).
    pub async fn timeline(&self, job_id: u64) -> Result<Vec<TimelineEntry>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE job_id = $1 ORDER BY block_number, log_index"
        ))
        .bind(bigint(job_id)?)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let event = stored_event(row)?;
                Ok(TimelineEntry {
                    block: event.block_number,
                    log_index: event.log_index,
                    at: event.block_timestamp,
                    tx: format!("{:#x}", event.tx_hash),
                    name: event.event.name,
                    data: event.event.data,
                })
            })
            .collect()
    }
}

/// Which jobs a list holds: only the filters given go into the SQL (`($1 IS NULL OR
/// status = $1)` would keep the planner from using the indexes: a full scan of the jobs
/// for a rare status).
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub status: Option<JobStatus>,
    /// Lowercase 0x address.
    pub submitter: Option<String>,
    pub node: Option<u64>,
    /// Posted at or after (unix seconds).
    pub since: Option<u64>,
    /// Job ids below this one (the cursor: the last id of the previous page).
    pub before: Option<u64>,
    pub limit: u32,
}

/// What a list read: the ids the indexes gave (they page the list), and the jobs of them
/// still there and in the filter, each its id and its summary as JSON.
#[derive(Debug, Clone, Default)]
pub struct JobsRead {
    pub ids: Vec<u64>,
    pub items: Vec<(u64, Bytes)>,
}

/// A value bound to a query built from the filters given.
enum Bind {
    Text(String),
    Int(i64),
}

impl Store {
    /// Jobs, newest first, with their latest progress: each its id and its summary as JSON
    /// (`JobSummary`). The ids come from the indexes; each summary is kept ready in memory
    /// (forgotten with the job's document) or put together from the texts stored beside
    /// the row (the summary, the progress), never parsed. A kept summary that no longer
    /// fits the filter (its job changed in a commit whose forgetting is under way) is read
    /// again.
    pub async fn list_jobs(&self, filter: &JobFilter) -> Result<JobsRead, StoreError> {
        let ticket = self.documents.ticket();
        let ids = self.list_job_ids(filter).await?;
        let fits = |summary: &SummaryText| {
            filter.status.is_none_or(|s| s == summary.status)
                && filter.node.is_none_or(|n| Some(n) == summary.node_id)
        };
        let mut page: Vec<(u64, Option<Bytes>)> = ids
            .iter()
            .map(|&id| {
                let kept = self.documents.summary(id).filter(fits);
                (id, kept.map(|s| s.json))
            })
            .collect();
        let missing: Vec<u64> = page
            .iter()
            .filter(|(_, json)| json.is_none())
            .map(|(id, _)| *id)
            .collect();
        if !missing.is_empty() {
            let sql = format!(
                "SELECT j.job_id, j.status, j.node_id, j.summary, p.body FROM jobs j \
                 LEFT JOIN progress p ON p.job_id = j.job_id WHERE j.job_id IN ({})",
                Parameters::of(self.sqlite).list(1, missing.len())
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for id in &missing {
                query = query.bind(bigint(*id)?);
            }
            let mut read = std::collections::HashMap::new();
            for row in query.fetch_all(&self.pool).await? {
                let id = row.unsigned(0)?;
                let progress: Option<String> = row.get(4);
                let summary = SummaryText {
                    status: row.get::<String, _>(1).parse()?,
                    node_id: row.unsigned_or_null(2)?,
                    json: with_progress(row.get(3), progress.as_deref())?.into(),
                };
                self.documents.keep_summary(id, ticket, summary.clone());
                // A job that changed since its id was read, out of the filter now: left
                // out.
                if fits(&summary) {
                    read.insert(id, summary.json);
                }
            }
            for (id, json) in &mut page {
                if json.is_none() {
                    // A job gone since its id was read (a retraction): left out.
                    *json = read.remove(id);
                }
            }
        }
        Ok(JobsRead {
            ids,
            items: page
                .into_iter()
                .filter_map(|(id, json)| json.map(|json| (id, json)))
                .collect(),
        })
    }

    /// The ids of the jobs a list holds, newest first (from the indexes on status,
    /// submitter and node, each ending with the job id).
    async fn list_job_ids(&self, filter: &JobFilter) -> Result<Vec<u64>, StoreError> {
        let mut sql = String::from("SELECT j.job_id FROM jobs j WHERE 1 = 1");
        let mut binds: Vec<Bind> = Vec::new();
        let mut condition = |condition: &str, value: Bind| {
            binds.push(value);
            sql.push_str(&format!(" AND {condition} ${}", binds.len()));
        };
        if let Some(status) = filter.status {
            condition("j.status =", Bind::Text(status.as_str().to_owned()));
        }
        if let Some(submitter) = &filter.submitter {
            condition("j.submitter =", Bind::Text(submitter.clone()));
        }
        if let Some(node) = filter.node {
            condition("j.node_id =", Bind::Int(bigint(node)?));
        }
        if let Some(since) = filter.since {
            condition("j.posted_at >=", Bind::Int(bigint(since)?));
        }
        if let Some(before) = filter.before {
            condition("j.job_id <", Bind::Int(bigint(before)?));
        }
        binds.push(Bind::Int(i64::from(filter.limit)));
        sql.push_str(&format!(" ORDER BY j.job_id DESC LIMIT ${}", binds.len()));
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for value in binds {
            query = match value {
                Bind::Text(text) => query.bind(text),
                Bind::Int(int) => query.bind(int),
            };
        }
        let rows = query.fetch_all(&self.pool).await?;
        rows.iter().map(|row| row.unsigned(0)).collect()
    }

    /// Nodes by id, after `after`, in `status` if given.
    pub async fn list_nodes(
        &self,
        status: Option<NodeStatus>,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<NodeRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT body FROM nodes WHERE ($1 IS NULL OR status = $1) \
             AND ($2 IS NULL OR node_id > $2) ORDER BY node_id LIMIT $3",
        )
        .bind(status.map(|s| s.as_str()))
        .bind(after.map(bigint).transpose()?)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        bodies(&rows)
    }
}

/// A job's summary (a JSON object, as stored) with `"progress"` added: the latest report,
/// also stored as JSON, or null.
fn with_progress(mut summary: String, progress: Option<&str>) -> Result<String, StoreError> {
    if summary.pop() != Some('}') {
        return Err(StoreError::Corrupt(format!(
            "a job's summary is not a JSON object: {summary}"
        )));
    }
    summary.push_str(",\"progress\":");
    summary.push_str(progress.unwrap_or("null"));
    summary.push('}');
    Ok(summary)
}

/// A job's document with its `attemptRows` completed by its `completions` (the workers'
/// failure reports).
fn failure_reports_read(json: &str) -> Result<String, StoreError> {
    let mut detail: serde_json::Map<String, serde_json::Value> = serde_json::from_str(json)?;
    let list = |name: &str| {
        detail
            .get(name)
            .cloned()
            .unwrap_or_else(|| serde_json::Value::Array(Vec::new()))
    };
    let reports: Vec<CompletionReport> = serde_json::from_value(list("completions"))?;
    let mut attempts: Vec<AttemptRow> = serde_json::from_value(list("attemptRows"))?;
    with_failure_reports(&mut attempts, &reports);
    detail.insert("attemptRows".into(), serde_json::to_value(attempts)?);
    Ok(serde_json::to_string(&detail)?)
}

/// A committed block as [`Store::apply_blocks`] takes it: its events, its commit and the
/// commit's stream sequence.
#[derive(Debug, Clone, Copy)]
pub struct CommittedBlock<'a> {
    pub events: &'a [EventEnvelope],
    pub commit: &'a BlockCommit,
    pub seq: u64,
}

/// Events inserted by one statement at most ([`events::EVENT_VALUES`] values each), and
/// values one statement binds at most elsewhere. sqlx's SQLite driver asks SQLite for
/// every parameter's name, which SQLite finds by walking the statement's list of named
/// parameters (`$1` is one): a cost that grows with the square of their count. Anonymous
/// `?` parameters have no name and are bound in order, so on SQLite the multi-row
/// statements use them ([`Parameters`]) and their size is set by the round trips they
/// save.
const EVENTS_PER_INSERT: usize = 256;
const ROWS_PER_STATEMENT: usize = 2_048;

/// How a statement built here names its parameters: SQLite's anonymous `?` (bound in
/// order, see [`EVENTS_PER_INSERT`]) or PostgreSQL's `$1`, `$2`, ….
#[derive(Debug, Clone, Copy)]
enum Parameters {
    Anonymous,
    Numbered,
}

impl Parameters {
    fn of(sqlite: bool) -> Self {
        if sqlite {
            Self::Anonymous
        } else {
            Self::Numbered
        }
    }

    /// `$first, $first+1, …` or `?, ?, …` (`count` of them).
    fn list(self, first: usize, count: usize) -> String {
        let mut sql = String::with_capacity(count * 6);
        for i in first..first + count {
            if i > first {
                sql.push_str(", ");
            }
            match self {
                Self::Anonymous => sql.push('?'),
                Self::Numbered => {
                    sql.push('$');
                    sql.push_str(&i.to_string());
                }
            }
        }
        sql
    }

    /// `($1, …, $columns), ($columns+1, …), …` (or with `?`) for `rows` rows.
    fn rows(self, columns: usize, rows: usize) -> String {
        (0..rows)
            .map(|row| format!("({})", self.list(row * columns + 1, columns)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Where the fold of a range of blocks stands: the next event, and what each block
/// folded so far changed.
struct Fold<'a, 'b> {
    blocks: &'a [CommittedBlock<'b>],
    typed: Vec<Vec<GantryEvent>>,
    /// The next event: its block's index and its own there.
    block: usize,
    event: usize,
    /// The block's hash, as stored.
    block_hash: String,
    applied: Vec<Applied>,
}

/// Why [`Fold::run`] stopped.
enum Stop {
    /// A statement's events wait to be inserted.
    Full,
    /// The next event needs the database ([`Fold::step_reading`]).
    Reads,
    /// Every block is folded.
    End,
}

impl<'a, 'b> Fold<'a, 'b> {
    fn new(blocks: &'a [CommittedBlock<'b>], typed: Vec<Vec<GantryEvent>>) -> Self {
        Self {
            block_hash: blocks
                .first()
                .map(|block| format!("{:#x}", block.commit.block_hash))
                .unwrap_or_default(),
            blocks,
            typed,
            block: 0,
            event: 0,
            applied: vec![Applied::default()],
        }
    }

    /// Folds the events that need no database, until a full insert waits, an event
    /// needs the database, or the range ends.
    fn run(&mut self, batch: &mut Batch) -> Result<Stop, StoreError> {
        loop {
            let Some(block) = self.blocks.get(self.block) else {
                return Ok(Stop::End);
            };
            let Some(typed) = self.typed[self.block].get(self.event) else {
                self.next_block(batch)?;
                continue;
            };
            if batch.events.len() >= batch.events_per_insert {
                return Ok(Stop::Full);
            }
            if !batch.ready(typed) {
                return Ok(Stop::Reads);
            }
            self.fold(batch, block, None)?;
        }
    }

    /// Folds the next event, reading from (or writing to) the database what it needs.
    async fn step_reading(&mut self, batch: &mut Batch, tx: &mut Tx<'_>) -> Result<(), StoreError> {
        let block = &self.blocks[self.block];
        let (event, typed) = (
            &block.events[self.event],
            &self.typed[self.block][self.event],
        );
        let treasury = batch.prepare(tx, event, typed).await?;
        self.fold(batch, block, treasury.as_deref())
    }

    fn fold(
        &mut self,
        batch: &mut Batch,
        block: &CommittedBlock<'_>,
        treasury: Option<&str>,
    ) -> Result<(), StoreError> {
        let previous = self.event.checked_sub(1).map(|i| &block.events[i]);
        batch.fold(
            &block.events[self.event],
            &self.typed[self.block][self.event],
            &self.block_hash,
            treasury,
            previous,
            self.applied.last_mut().expect("a block's"),
        )?;
        self.event += 1;
        Ok(())
    }

    /// The block is folded: its row in `blocks`, then the next block.
    fn next_block(&mut self, batch: &mut Batch) -> Result<(), StoreError> {
        let commit = self.blocks[self.block].commit;
        batch.blocks.push((
            bigint(commit.block_number)?,
            std::mem::take(&mut self.block_hash),
            bigint(commit.block_timestamp)?,
            bigint(self.blocks[self.block].seq)?,
        ));
        self.block += 1;
        self.event = 0;
        if let Some(next) = self.blocks.get(self.block) {
            self.block_hash = format!("{:#x}", next.commit.block_hash);
            self.applied.push(Applied::default());
        }
        Ok(())
    }
}

/// What one transaction of blocks has read and will write: each row read once (`None`:
/// no such row) and written once at the end, the events and blocks buffered.
struct Batch {
    parameters: Parameters,
    jobs: std::collections::HashMap<u64, Option<JobRow>>,
    nodes: std::collections::HashMap<u64, Option<NodeRow>>,
    accounts: std::collections::HashMap<String, Option<AccountRow>>,
    changed_jobs: std::collections::BTreeSet<u64>,
    changed_nodes: std::collections::BTreeSet<u64>,
    changed_accounts: std::collections::BTreeSet<String>,
    policies: std::collections::HashMap<u32, Option<JobPolicy>>,
    /// The specs the range's postings read.
    specs: Specs,
    /// Each event's values, in insert order.
    events: Vec<EventValues>,
    /// Events inserted while the fold goes on, a statement at most.
    events_per_insert: usize,
    /// (number, hash, timestamp, stream sequence).
    blocks: Vec<(i64, String, i64, i64)>,
}

impl Batch {
    fn new(parameters: Parameters, specs: Specs, events_per_insert: usize) -> Self {
        Self {
            parameters,
            jobs: Default::default(),
            nodes: Default::default(),
            accounts: Default::default(),
            changed_jobs: Default::default(),
            changed_nodes: Default::default(),
            changed_accounts: Default::default(),
            policies: Default::default(),
            specs,
            events: Vec::new(),
            events_per_insert,
            blocks: Vec::new(),
        }
    }

    /// Reads the rows of `jobs` not read yet, [`ROWS_PER_STATEMENT`] a query.
    async fn fetch_jobs(
        &mut self,
        tx: &mut Tx<'_>,
        jobs: &std::collections::BTreeSet<u64>,
    ) -> Result<(), StoreError> {
        let select = "SELECT job_id, body FROM jobs WHERE job_id IN";
        fetch_rows(tx, self.parameters, select, jobs, &mut self.jobs).await
    }

    /// Reads the rows of `nodes` and `accounts` not read yet, [`ROWS_PER_STATEMENT`] a
    /// query (those an event names only through its job's row are read as they come).
    async fn fetch_nodes_and_accounts(
        &mut self,
        tx: &mut Tx<'_>,
        nodes: &std::collections::BTreeSet<u64>,
        accounts: &std::collections::BTreeSet<String>,
    ) -> Result<(), StoreError> {
        let select = "SELECT node_id, body FROM nodes WHERE node_id IN";
        fetch_rows(tx, self.parameters, select, nodes, &mut self.nodes).await?;
        let select = "SELECT account, body FROM accounts WHERE account IN";
        fetch_rows(tx, self.parameters, select, accounts, &mut self.accounts).await
    }

    fn set_job(&mut self, job: u64, row: Option<JobRow>) {
        self.jobs.insert(job, row);
        self.changed_jobs.insert(job);
    }

    fn set_node(&mut self, node: u64, row: Option<NodeRow>) {
        self.nodes.insert(node, row);
        self.changed_nodes.insert(node);
    }

    fn set_account(&mut self, account: &str, row: AccountRow) {
        match self.accounts.get_mut(account) {
            Some(slot) => *slot = Some(row),
            None => {
                self.accounts.insert(account.to_owned(), Some(row));
            }
        }
        if !self.changed_accounts.contains(account) {
            self.changed_accounts.insert(account.to_owned());
        }
    }

    /// The insert of the first `events_per_insert` events buffered, once that many are.
    fn full_insert(&mut self) -> Result<Option<Statement>, StoreError> {
        if self.events.len() < self.events_per_insert {
            return Ok(None);
        }
        let rest = self.events.split_off(self.events_per_insert);
        let chunk = std::mem::replace(&mut self.events, rest);
        event_inserts(self.parameters, chunk).next().transpose()
    }

    /// Whether `typed` folds from what the batch holds, without the database: its rows
    /// read, its policy known; not a slash (which reads the events before it) nor a
    /// policy's announcement (which writes it).
    fn ready(&self, typed: &GantryEvent) -> bool {
        if is_slash(typed)
            || matches!(
                typed,
                GantryEvent::Market(JobMarket::JobMarketEvents::MarketParamsUpdated(_))
            )
        {
            return false;
        }
        let job = match job_of(typed) {
            Some(job) => match self.jobs.get(&job) {
                Some(row) => row.as_ref(),
                None => return false,
            },
            None => None,
        };
        let touched = touches(typed, job);
        touched.job.is_none_or(|_| {
            posted_policy(typed).is_none_or(|version| self.policies.contains_key(&version))
        }) && touched
            .node
            .is_none_or(|node| self.nodes.contains_key(&node))
            && touched
                .account
                .is_none_or(|account| self.accounts.contains_key(&account))
    }

    /// Reads (and, for a policy's announcement, writes) what `typed` needs from the
    /// database, so that it folds from the batch: its rows, its policy; for a slash, the
    /// treasury it paid (returned).
    async fn prepare(
        &mut self,
        tx: &mut Tx<'_>,
        event: &EventEnvelope,
        typed: &GantryEvent,
    ) -> Result<Option<String>, StoreError> {
        if let Some(job) = job_of(typed)
            && !self.jobs.contains_key(&job)
        {
            let row = load_job(tx, job).await?;
            self.jobs.insert(job, row);
        }
        if let GantryEvent::Market(JobMarket::JobMarketEvents::MarketParamsUpdated(e)) = typed {
            let policy = policy_of(e);
            save_policy(tx, event, &policy).await?;
            self.policies.insert(policy.version as u32, Some(policy));
        }
        let touched = touches(
            typed,
            job_of(typed).and_then(|job| self.jobs[&job].as_ref()),
        );
        let mut treasury = None;
        if touched.job.is_some() {
            self.policy(tx, typed).await?;
            treasury = self.treasury(tx, event, typed).await?;
        }
        if let Some(node) = touched.node
            && !self.nodes.contains_key(&node)
        {
            let row = load_node(tx, node).await?;
            self.nodes.insert(node, row);
        }
        if let Some(account) = touched.account
            && !self.accounts.contains_key(&account)
        {
            let row = load_account(tx, &account).await?;
            self.accounts.insert(account, row);
        }
        Ok(treasury)
    }

    /// Folds one event whose rows and policy the batch holds ([`Batch::prepare`]);
    /// `previous` is the block's event before it, `applied` what its block changed.
    fn fold(
        &mut self,
        event: &EventEnvelope,
        typed: &GantryEvent,
        block_hash: &str,
        treasury: Option<&str>,
        previous: Option<&EventEnvelope>,
        applied: &mut Applied,
    ) -> Result<(), StoreError> {
        let job_before = job_of(typed).and_then(|job| self.jobs.get_mut(&job)?.take());
        let touched = touches(typed, job_before.as_ref());
        self.event(event, block_hash, &touched)?;
        if let Some(job) = touched.job {
            let policy = posted_policy(typed).and_then(|version| self.policies[&version].clone());
            let row = apply_job_reading(
                job_before,
                event,
                typed,
                policy.as_ref(),
                treasury,
                &mut self.specs,
            );
            if let Some(row) = &row {
                applied.jobs.insert(job, row.clone());
            }
            self.set_job(job, row);
        }
        if let Some(node) = touched.node {
            let before = self.nodes.get_mut(&node).and_then(Option::take);
            let row = apply_node(before, event, typed, previous);
            if let Some(row) = &row {
                applied.nodes.insert(node, row.clone());
            }
            self.set_node(node, row);
        }
        if let Some(account) = &touched.account {
            let before = self.accounts.get_mut(account).and_then(Option::take);
            let row = apply_account(before, account, event, typed);
            self.set_account(account, row);
        }
        Ok(())
    }

    /// The policy a job posting names (announced in this batch or before).
    async fn policy(
        &mut self,
        tx: &mut Tx<'_>,
        typed: &GantryEvent,
    ) -> Result<Option<JobPolicy>, StoreError> {
        let Some(version) = posted_policy(typed) else {
            return Ok(None);
        };
        if let Some(policy) = self.policies.get(&version) {
            return Ok(policy.clone());
        }
        let policy = policy_for(tx, typed).await?;
        self.policies.insert(version, policy.clone());
        Ok(policy)
    }

    /// The treasury a slash pays (the events before it written first: it is read from
    /// the market parameters announced before the slash).
    async fn treasury(
        &mut self,
        tx: &mut Tx<'_>,
        event: &EventEnvelope,
        typed: &GantryEvent,
    ) -> Result<Option<String>, StoreError> {
        if !is_slash(typed) {
            return Ok(None);
        }
        self.write_events(tx).await?;
        treasury_for(tx, event, typed).await
    }

    fn event(
        &mut self,
        event: &EventEnvelope,
        block_hash: &str,
        touched: &Touches,
    ) -> Result<(), StoreError> {
        self.events
            .push(EventValues::of(event, block_hash, touched)?);
        Ok(())
    }

    /// Inserts the buffered events, up to [`EVENTS_PER_INSERT`] a statement.
    async fn write_events(&mut self, tx: &mut Tx<'_>) -> Result<(), StoreError> {
        let statements = event_inserts(self.parameters, std::mem::take(&mut self.events));
        execute_overlapped(tx, statements).await
    }

    /// Writes everything: the events, each changed row once, the blocks.
    async fn write(mut self, tx: &mut Tx<'_>) -> Result<(), StoreError> {
        let parameters = self.parameters;
        let mut kept = Vec::new();
        for job in &self.changed_jobs {
            match &self.jobs[job] {
                Some(row) => kept.push((*job, row)),
                None => save_job(tx, parameters, *job, None).await?,
            }
        }
        let events = event_inserts(parameters, std::mem::take(&mut self.events));
        let jobs = kept
            .chunks(ROWS_PER_STATEMENT / JOB_VALUES)
            .map(|chunk| upsert_jobs(parameters, chunk));
        execute_overlapped(tx, events.chain(jobs)).await?;
        let mut kept = Vec::new();
        for node in &self.changed_nodes {
            match &self.nodes[node] {
                Some(row) => kept.push((*node, row)),
                None => save_node(tx, parameters, *node, None).await?,
            }
        }
        for chunk in kept.chunks(ROWS_PER_STATEMENT / 3) {
            upsert_nodes(parameters, chunk)?.execute(&mut **tx).await?;
        }
        let mut kept = Vec::new();
        for account in &self.changed_accounts {
            match &self.accounts[account] {
                Some(row) => kept.push((account.as_str(), row)),
                None => save_account(tx, parameters, None, account).await?,
            }
        }
        for chunk in kept.chunks(ROWS_PER_STATEMENT / 2) {
            upsert_accounts(parameters, chunk)?
                .execute(&mut **tx)
                .await?;
        }
        // One row a number, the last block given it (as one statement each would leave
        // it): a multi-row upsert may not touch a row twice.
        let blocks: Vec<_> = self
            .blocks
            .iter()
            .map(|(number, hash, timestamp, seq)| (*number, (hash, *timestamp, *seq)))
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .collect();
        for chunk in blocks.chunks(ROWS_PER_STATEMENT / 4) {
            let sql = format!(
                "INSERT INTO blocks (number, hash, timestamp, stream_seq) VALUES {} \
                 ON CONFLICT (number) DO UPDATE SET hash = excluded.hash, \
                 timestamp = excluded.timestamp, stream_seq = excluded.stream_seq",
                parameters.rows(4, chunk.len())
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (number, (hash, timestamp, seq)) in chunk {
                query = query
                    .bind(*number)
                    .bind((*hash).clone())
                    .bind(*timestamp)
                    .bind(*seq);
            }
            query.execute(&mut **tx).await?;
        }
        Ok(())
    }
}

/// A row's key as a batch reads it: bound as its column's type, read back from column 0.
trait RowKey: Clone + Eq + std::hash::Hash {
    fn bind(&self, query: Statement) -> Result<Statement, StoreError>;
    fn read(row: &sqlx::any::AnyRow) -> Result<Self, StoreError>;
}

impl RowKey for u64 {
    fn bind(&self, query: Statement) -> Result<Statement, StoreError> {
        Ok(query.bind(bigint(*self)?))
    }

    fn read(row: &sqlx::any::AnyRow) -> Result<Self, StoreError> {
        row.unsigned(0)
    }
}

impl RowKey for String {
    fn bind(&self, query: Statement) -> Result<Statement, StoreError> {
        Ok(query.bind(self.clone()))
    }

    fn read(row: &sqlx::any::AnyRow) -> Result<Self, StoreError> {
        Ok(row.get(0))
    }
}

/// Reads into `rows` the bodies of the `keys` it lacks, `select` (`SELECT key, body FROM
/// table WHERE key IN`) [`ROWS_PER_STATEMENT`] keys a query; a key with no row is kept as
/// `None`.
async fn fetch_rows<K: RowKey, T: serde::de::DeserializeOwned>(
    tx: &mut Tx<'_>,
    parameters: Parameters,
    select: &str,
    keys: &std::collections::BTreeSet<K>,
    rows: &mut std::collections::HashMap<K, Option<T>>,
) -> Result<(), StoreError> {
    let missing: Vec<&K> = keys.iter().filter(|key| !rows.contains_key(*key)).collect();
    rows.reserve(missing.len());
    for chunk in missing.chunks(ROWS_PER_STATEMENT) {
        let sql = format!("{select} ({})", parameters.list(1, chunk.len()));
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for key in chunk {
            query = key.bind(query)?;
            rows.insert((*key).clone(), None);
        }
        for row in query.fetch_all(&mut **tx).await? {
            rows.insert(K::read(&row)?, Some(row.json(1)?));
        }
    }
    Ok(())
}

/// A statement built here, its values bound.
type Statement = sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments>;

/// Runs `statements` in order, each built while the one before runs: the database
/// (SQLite's worker thread, PostgreSQL's server) executes one while this thread binds and
/// serialises the next one's rows, so that the two use both cores rather than taking
/// turns. (The first poll of an execution sends it; the builder then runs to its end.)
async fn execute_overlapped(
    tx: &mut Tx<'_>,
    mut statements: impl Iterator<Item = Result<Statement, StoreError>>,
) -> Result<(), StoreError> {
    let mut next = statements.next().transpose()?;
    while let Some(statement) = next {
        let (done, built) = tokio::join!(statement.execute(&mut **tx), async {
            statements.next().transpose()
        });
        done?;
        next = built?;
    }
    Ok(())
}

/// The inserts of `events`, up to [`EVENTS_PER_INSERT`] a statement, each built when
/// asked for.
fn event_inserts(
    parameters: Parameters,
    events: Vec<EventValues>,
) -> impl Iterator<Item = Result<Statement, StoreError>> {
    let mut events = events.into_iter().peekable();
    std::iter::from_fn(move || {
        events.peek()?;
        let chunk: Vec<EventValues> = events.by_ref().take(EVENTS_PER_INSERT).collect();
        let sql = format!(
            "{INSERT_EVENTS}{}",
            parameters.rows(EVENT_VALUES, chunk.len())
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for event in chunk {
            query = query
                .bind(event.block_number)
                .bind(event.log_index)
                .bind(event.block_hash)
                .bind(event.block_timestamp)
                .bind(event.tx_hash)
                .bind(event.name)
                .bind(event.key)
                .bind(event.job)
                .bind(event.node)
                .bind(event.account)
                .bind(event.contract)
                .bind(event.chain_id)
                .bind(event.data)
                .bind(event.spec);
        }
        Some(Ok(query))
    })
}

/// What a block changed: the rows as they are after it, by id.
#[derive(Debug, Default)]
pub struct Applied {
    pub jobs: std::collections::BTreeMap<u64, JobRow>,
    pub nodes: std::collections::BTreeMap<u64, NodeRow>,
}

/// Which stream's checkpoint (the chain's is claimed under its epoch:
/// `Store::claim_chain`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Checkpoint {
    /// The workers' reports (`reports_checkpoint`).
    Reports,
}

/// Claims stream sequence `seq` for this transaction: moves the checkpoint to it, unless
/// it is there or past already, because another projector sharing the database applied
/// it (then `false`, and the caller backs out). Run first in each transaction, so that
/// projectors sharing a PostgreSQL queue on the checkpoint's row and the later ones back
/// out before writing anything: every message is applied once, by whoever comes first.
pub(crate) async fn claim(
    tx: &mut Tx<'_>,
    checkpoint: Checkpoint,
    seq: u64,
) -> Result<bool, StoreError> {
    let (insert, update) = match checkpoint {
        Checkpoint::Reports => (
            "INSERT INTO reports_checkpoint (id, stream_seq) VALUES (1, 0) \
             ON CONFLICT (id) DO NOTHING",
            "UPDATE reports_checkpoint SET stream_seq = $1 WHERE id = 1 AND stream_seq < $1",
        ),
    };
    sqlx::query(insert).execute(&mut **tx).await?;
    let moved = sqlx::query(update)
        .bind(bigint(seq)?)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    Ok(moved == 1)
}

/// Which row's events: a job's, a node's, an account's (lowercase 0x).
#[derive(Debug, Clone)]
enum RowOf {
    Job(u64),
    Node(u64),
    Account(String),
}

/// The events of one job, node or account, in chain order.
async fn events_of(tx: &mut Tx<'_>, row: &RowOf) -> Result<Vec<EventEnvelope>, StoreError> {
    let query = match row {
        RowOf::Job(id) => sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE job_id = $1 ORDER BY block_number, log_index"
        ))
        .bind(bigint(*id)?),
        RowOf::Node(id) => sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE node_id = $1 ORDER BY block_number, log_index"
        ))
        .bind(bigint(*id)?),
        RowOf::Account(account) => sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE account = $1 ORDER BY block_number, log_index"
        ))
        .bind(account.clone()),
    };
    query
        .fetch_all(&mut **tx)
        .await?
        .iter()
        .map(stored_event)
        .collect()
}

/// The policy a `JobPosted` names, if announced (other events read none).
async fn policy_for(tx: &mut Tx<'_>, typed: &GantryEvent) -> Result<Option<JobPolicy>, StoreError> {
    let Some(version) = posted_policy(typed) else {
        return Ok(None);
    };
    let row = sqlx::query("SELECT body FROM policies WHERE version = $1")
        .bind(i64::from(version))
        .fetch_optional(&mut **tx)
        .await?;
    let policy = body(row)?;
    if policy.is_none() {
        tracing::warn!(version, "a job posted under a policy never announced");
    }
    Ok(policy)
}

/// The market's treasury account when a `NodeSlashed` was emitted (where its slash
/// went): the one the last `MarketParamsUpdated` before it set. Other events read none.
async fn treasury_for(
    tx: &mut Tx<'_>,
    event: &EventEnvelope,
    typed: &GantryEvent,
) -> Result<Option<String>, StoreError> {
    if !is_slash(typed) {
        return Ok(None);
    }
    let row = sqlx::query(concat!(
        "SELECT ",
        event_columns!(),
        " FROM events WHERE name = $1 \
         AND (block_number < $2 OR (block_number = $2 AND log_index < $3)) \
         ORDER BY block_number DESC, log_index DESC LIMIT 1"
    ))
    .bind(event_name::<JobMarket::MarketParamsUpdated>())
    .bind(bigint(event.block_number)?)
    .bind(bigint(event.log_index)?)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else {
        tracing::warn!(
            block = event.block_number,
            "a slash before any market parameters"
        );
        return Ok(None);
    };
    let params = stored_event(&row)?;
    Ok(match crate::model::typed(&params)? {
        GantryEvent::Market(JobMarket::JobMarketEvents::MarketParamsUpdated(e)) => {
            Some(e.params.treasury.to_string())
        }
        _ => None,
    })
}

fn is_slash(typed: &GantryEvent) -> bool {
    matches!(
        typed,
        GantryEvent::Registry(NodeRegistry::NodeRegistryEvents::NodeSlashed(_))
            | GantryEvent::Market(JobMarket::JobMarketEvents::NodeSlashed(_))
    )
}

async fn save_policy(
    tx: &mut Tx<'_>,
    event: &EventEnvelope,
    policy: &JobPolicy,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO policies (version, block_number, block_hash, body) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (version) DO UPDATE SET block_number = $2, block_hash = $3, body = $4",
    )
    .bind(bigint(policy.version)?)
    .bind(bigint(event.block_number)?)
    .bind(format!("{:#x}", event.block_hash))
    .bind(serde_json::to_string(policy)?)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn load_account(tx: &mut Tx<'_>, account: &str) -> Result<Option<AccountRow>, StoreError> {
    let row = sqlx::query("SELECT body FROM accounts WHERE account = $1")
        .bind(account.to_owned())
        .fetch_optional(&mut **tx)
        .await?;
    body(row)
}

async fn save_account(
    tx: &mut Tx<'_>,
    parameters: Parameters,
    row: Option<&AccountRow>,
    account: &str,
) -> Result<(), StoreError> {
    let Some(row) = row else {
        sqlx::query("DELETE FROM accounts WHERE account = $1")
            .bind(account.to_owned())
            .execute(&mut **tx)
            .await?;
        return Ok(());
    };
    upsert_accounts(parameters, &[(account, row)])?
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Inserts or updates the accounts' rows, one statement.
fn upsert_accounts(
    parameters: Parameters,
    rows: &[(&str, &AccountRow)],
) -> Result<Statement, StoreError> {
    let sql = format!(
        "INSERT INTO accounts (account, body) VALUES {} \
         ON CONFLICT (account) DO UPDATE SET body = excluded.body",
        parameters.rows(2, rows.len())
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for (account, row) in rows {
        query = query
            .bind((*account).to_owned())
            .bind(serde_json::to_string(row)?);
    }
    Ok(query)
}

const JOB_BODY: &str = "SELECT body FROM jobs WHERE job_id = $1";
const NODE_BODY: &str = "SELECT body FROM nodes WHERE node_id = $1";

/// The JSON body `sql` (one id parameter) selects, if any.
async fn body_by_id<'e, T, E>(
    executor: E,
    sql: &'static str,
    id: u64,
) -> Result<Option<T>, StoreError>
where
    T: serde::de::DeserializeOwned,
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    body(
        sqlx::query(sql)
            .bind(bigint(id)?)
            .fetch_optional(executor)
            .await?,
    )
}

async fn load_job(tx: &mut Tx<'_>, job: u64) -> Result<Option<JobRow>, StoreError> {
    body_by_id(&mut **tx, JOB_BODY, job).await
}

/// Deletes the row `sql` (one id parameter) names.
async fn delete_by_id(tx: &mut Tx<'_>, sql: &'static str, id: u64) -> Result<(), StoreError> {
    sqlx::query(sql)
        .bind(bigint(id)?)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Columns an upsert of jobs binds, each row.
const JOB_VALUES: usize = 15;

/// The insert or update of the jobs' rows, one statement (`rows` not empty).
fn upsert_jobs(parameters: Parameters, rows: &[(u64, &JobRow)]) -> Result<Statement, StoreError> {
    let sql = format!(
        "INSERT INTO jobs (job_id, body, summary, submitter, status, node_id, priority, \
         posted_at, updated_at, gpus, gpu_seconds, bounty, payout, fee, refund) VALUES {} \
         ON CONFLICT (job_id) DO UPDATE \
         SET body = excluded.body, summary = excluded.summary, submitter = excluded.submitter, status = excluded.status, \
         node_id = excluded.node_id, priority = excluded.priority, \
         posted_at = excluded.posted_at, updated_at = excluded.updated_at, gpus = excluded.gpus, \
         gpu_seconds = excluded.gpu_seconds, bounty = excluded.bounty, \
         payout = excluded.payout, fee = excluded.fee, refund = excluded.refund",
        parameters.rows(JOB_VALUES, rows.len())
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for (job, row) in rows {
        query = query
            .bind(bigint(*job)?)
            .bind(serde_json::to_string(row)?)
            .bind(serde_json::to_string(&JobBrief::from(*row))?)
            .bind(row.submitter.to_lowercase())
            .bind(row.status.as_str())
            .bind(row.node_id.map(bigint).transpose()?)
            .bind(bigint(row.priority)?)
            .bind(bigint(row.posted_at)?)
            .bind(bigint(row.updated_at)?)
            .bind(bigint(row.gpus)?)
            .bind(bigint(row.gpu_seconds)?)
            .bind(row.bounty.clone())
            .bind(row.payout.clone())
            .bind(row.fee.clone())
            .bind(row.refund.clone());
    }
    Ok(query)
}

async fn save_job(
    tx: &mut Tx<'_>,
    parameters: Parameters,
    job: u64,
    row: Option<&JobRow>,
) -> Result<(), StoreError> {
    let Some(row) = row else {
        return delete_by_id(tx, "DELETE FROM jobs WHERE job_id = $1", job).await;
    };
    upsert_jobs(parameters, &[(job, row)])?
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn load_node(tx: &mut Tx<'_>, node: u64) -> Result<Option<NodeRow>, StoreError> {
    body_by_id(&mut **tx, NODE_BODY, node).await
}

async fn save_node(
    tx: &mut Tx<'_>,
    parameters: Parameters,
    node: u64,
    row: Option<&NodeRow>,
) -> Result<(), StoreError> {
    let Some(row) = row else {
        return delete_by_id(tx, "DELETE FROM nodes WHERE node_id = $1", node).await;
    };
    upsert_nodes(parameters, &[(node, row)])?
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Inserts or updates the nodes' rows, one statement.
fn upsert_nodes(parameters: Parameters, rows: &[(u64, &NodeRow)]) -> Result<Statement, StoreError> {
    let sql = format!(
        "INSERT INTO nodes (node_id, body, status) VALUES {} \
         ON CONFLICT (node_id) DO UPDATE SET body = excluded.body, status = excluded.status",
        parameters.rows(3, rows.len())
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for (node, row) in rows {
        query = query
            .bind(bigint(*node)?)
            .bind(serde_json::to_string(row)?)
            .bind(row.status.as_str());
    }
    Ok(query)
}
