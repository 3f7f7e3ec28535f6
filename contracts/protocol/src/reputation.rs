//! A node's reputation as the matcher scores it and the API shows it: its Laplace-smoothed
//! success rate over the registry's counters, so a new node starts at 0.5.

/// `(completed + 1) / (completed + failed + 2)`, in 0..1.
pub fn reputation(completed_jobs: u64, failed_jobs: u64) -> f64 {
    (completed_jobs as f64 + 1.0) / (completed_jobs as f64 + failed_jobs as f64 + 2.0)
}

#[cfg(test)]
mod tests {
    use super::reputation;

    #[test]
    fn a_new_node_starts_at_a_half_and_moves_with_its_record() {
        assert_eq!(reputation(0, 0), 0.5);
        assert_eq!(reputation(8, 0), 0.9);
        assert_eq!(reputation(0, 8), 0.1);
    }
}
