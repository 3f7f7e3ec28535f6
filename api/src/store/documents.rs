//! Jobs' documents (`GET /v1/jobs/{id}`) kept ready in memory: built by the database once
//! (`Store::build_job_document`), then answered from here until what they are made of
//! changes. The store forgets a job's document after every transaction that may have
//! changed it has committed — a block naming the job, a retraction, the projection
//! emptied, a worker's report on it — whether this store wrote it or another projector
//! sharing the database did (a claim that finds the range applied waits for that
//! projector's commit), so a document is never older than the stream this replica has
//! followed.
//!
//! A document built while such a change commits must not be kept: every forgetting moves
//! a generation first, and a document built under an older generation than the one in
//! force once it is kept is forgotten again ([`Documents::keep`]).
//!
//! So a store that serves must be the one that follows the streams (as `gantry-api` runs
//! them: its projections write through the store its router reads): a store reading a
//! database that others write keeps nothing (`Store::with_document_cache(0)`).
//!
//! Bounded by bytes (`--document-cache-mb`); what goes first when full is quick_cache's
//! choice (S3-FIFO: a document read once goes before one read again).

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use gantry_protocol::status::JobStatus;

/// What a job's document is, ready to answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobDocument {
    pub status: JobStatus,
    /// The JSON object `GET /v1/jobs/{id}` answers with.
    pub json: Bytes,
}

/// A job in a list, ready to answer with: its summary with its latest progress
/// (`JobSummary` as JSON), and what a list filters on that can change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SummaryText {
    pub status: JobStatus,
    pub node_id: Option<u64>,
    pub json: Bytes,
}

/// A kept text's weight: its bytes and what keeping it costs besides.
#[derive(Debug, Clone)]
struct Weight;

impl quick_cache::Weighter<u64, JobDocument> for Weight {
    fn weight(&self, _: &u64, document: &JobDocument) -> u64 {
        document.json.len() as u64 + 64
    }
}

impl quick_cache::Weighter<u64, SummaryText> for Weight {
    fn weight(&self, _: &u64, summary: &SummaryText) -> u64 {
        summary.json.len() as u64 + 64
    }
}

/// A cache of up to `bytes` (none: 0), its tables sized for items of `typical` bytes.
fn cache<V: Clone>(bytes: u64, typical: u64) -> Option<quick_cache::sync::Cache<u64, V, Weight>>
where
    Weight: quick_cache::Weighter<u64, V>,
{
    (bytes > 0).then(|| {
        let items = (bytes / typical).max(16) as usize;
        quick_cache::sync::Cache::with_weighter(items, bytes, Weight)
    })
}

/// The documents and summaries kept, and the generation of forgetting.
#[derive(Debug)]
pub(crate) struct Documents {
    kept: Option<quick_cache::sync::Cache<u64, JobDocument, Weight>>,
    summaries: Option<quick_cache::sync::Cache<u64, SummaryText, Weight>>,
    generation: AtomicU64,
}

/// The generation a document is built under ([`Documents::ticket`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket(u64);

/// An estimate of a document's size, and a summary's, to size the caches' tables.
const TYPICAL_DOCUMENT: u64 = 4 * 1024;
const TYPICAL_SUMMARY: u64 = 512;
/// The part of the bytes given that summaries take (the rest: documents).
const SUMMARIES_SHARE: u64 = 8;

impl Documents {
    /// Keeps up to `bytes` of documents and summaries (none: 0), an eighth of them
    /// summaries.
    pub(crate) fn new(bytes: u64) -> Self {
        let summaries = bytes / SUMMARIES_SHARE;
        let documents = bytes - summaries;
        Self {
            kept: cache(documents, TYPICAL_DOCUMENT),
            summaries: cache(summaries, TYPICAL_SUMMARY),
            generation: AtomicU64::new(0),
        }
    }

    pub(crate) fn get(&self, job: u64) -> Option<JobDocument> {
        self.kept.as_ref()?.get(&job)
    }

    pub(crate) fn summary(&self, job: u64) -> Option<SummaryText> {
        self.summaries.as_ref()?.get(&job)
    }

    /// As [`Documents::keep`], a summary.
    pub(crate) fn keep_summary(&self, job: u64, ticket: Ticket, summary: SummaryText) {
        self.keep_in(self.summaries.as_ref(), job, ticket, summary);
    }

    /// Taken before the database is read for a document.
    pub(crate) fn ticket(&self) -> Ticket {
        Ticket(self.generation.load(Ordering::SeqCst))
    }

    /// Keeps `document`, read from the database after `ticket` was taken, unless something
    /// was forgotten since (it may be of a state that just changed).
    pub(crate) fn keep(&self, job: u64, ticket: Ticket, document: JobDocument) {
        self.keep_in(self.kept.as_ref(), job, ticket, document);
    }

    fn keep_in<V: Clone>(
        &self,
        cache: Option<&quick_cache::sync::Cache<u64, V, Weight>>,
        job: u64,
        ticket: Ticket,
        value: V,
    ) where
        Weight: quick_cache::Weighter<u64, V>,
    {
        let Some(kept) = cache else { return };
        if self.generation.load(Ordering::SeqCst) != ticket.0 {
            return;
        }
        kept.insert(job, value);
        // A forgetting that moved the generation after the check above may have run
        // before the insert: undo it.
        if self.generation.load(Ordering::SeqCst) != ticket.0 {
            kept.remove(&job);
        }
    }

    /// Forgets the documents of `jobs` (after the transaction that changed them
    /// committed).
    pub(crate) fn forget(&self, jobs: impl IntoIterator<Item = u64>) {
        let mut jobs = jobs.into_iter().peekable();
        // Nothing to forget moves no generation (it would keep out documents built now).
        if jobs.peek().is_none() {
            return;
        }
        self.generation.fetch_add(1, Ordering::SeqCst);
        for job in jobs {
            if let Some(kept) = &self.kept {
                kept.remove(&job);
            }
            if let Some(summaries) = &self.summaries {
                summaries.remove(&job);
            }
        }
    }

    /// Forgets every document.
    pub(crate) fn forget_all(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        if let Some(kept) = &self.kept {
            kept.clear();
        }
        if let Some(summaries) = &self.summaries {
            summaries.clear();
        }
    }

    /// Bytes kept (for the metrics and tests).
    pub(crate) fn weight(&self) -> u64 {
        self.kept.as_ref().map_or(0, |k| k.weight())
            + self.summaries.as_ref().map_or(0, |k| k.weight())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(text: &str) -> JobDocument {
        JobDocument {
            status: JobStatus::Open,
            json: Bytes::from(text.to_owned()),
        }
    }

    #[test]
    fn a_document_built_before_a_forgetting_is_not_kept() {
        let documents = Documents::new(1 << 20);
        let ticket = documents.ticket();
        // The job changes (and is forgotten) while its old document is being built.
        documents.forget([7]);
        documents.keep(7, ticket, document("{\"old\":true}"));
        assert!(documents.get(7).is_none());
        // Built after: kept, until the job changes again.
        let ticket = documents.ticket();
        documents.keep(7, ticket, document("{\"new\":true}"));
        assert_eq!(&documents.get(7).unwrap().json[..], b"{\"new\":true}");
        documents.forget([7]);
        assert!(documents.get(7).is_none());
        let ticket = documents.ticket();
        documents.keep(8, ticket, document("{}"));
        let summary = SummaryText {
            status: JobStatus::Open,
            node_id: None,
            json: Bytes::from_static(b"{}"),
        };
        documents.keep_summary(8, ticket, summary.clone());
        assert_eq!(documents.summary(8), Some(summary.clone()));
        documents.forget([8]);
        assert!(
            documents.summary(8).is_none(),
            "a summary goes with its document"
        );
        let ticket = documents.ticket();
        documents.keep(8, ticket, document("{}"));
        documents.keep_summary(8, ticket, summary.clone());
        documents.forget([9]);
        documents.keep_summary(8, ticket, summary);
        assert!(documents.get(8).is_some(), "another job's forgetting");
        documents.forget_all();
        assert!(documents.get(8).is_none());
        assert!(documents.summary(8).is_none());
        // Forgetting nothing (a batch of log lines) keeps out no document built meanwhile.
        let ticket = documents.ticket();
        documents.forget([]);
        documents.keep(8, ticket, document("{}"));
        assert!(documents.get(8).is_some());
    }

    #[test]
    fn the_documents_kept_stay_within_their_bytes() {
        let documents = Documents::new(64 * 1024);
        let text = "x".repeat(1_000);
        for job in 0..1_000 {
            let ticket = documents.ticket();
            documents.keep(job, ticket, document(&text));
        }
        assert!(documents.weight() <= 64 * 1024, "{}", documents.weight());
        assert!(documents.weight() > 0);
        let none = Documents::new(0);
        let ticket = none.ticket();
        none.keep(1, ticket, document("{}"));
        assert!(none.get(1).is_none());
    }
}
