//! The pure core of reorg handling: the recent canonical blocks the stream holds, and what
//! a new block means for them.

use std::collections::VecDeque;

use alloy::primitives::B256;
use gantry_protocol::envelope::OrphanedBlock;

/// A block as the stream committed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRef {
    pub number: u64,
    pub hash: B256,
}

/// The last committed blocks, oldest first, at most `capacity` of them. Block numbers
/// increase but need not be contiguous (a backfill commits only blocks with events and the
/// end of each range).
#[derive(Debug, Clone)]
pub struct Window {
    blocks: VecDeque<BlockRef>,
    capacity: usize,
}

/// How a new block relates to the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continuity {
    /// The window is empty or the block's parent is the newest committed block.
    Extends,
    /// The block follows a gap (the newest committed block is older than its parent): the
    /// parent cannot be checked against the window.
    Unchecked,
    /// The block's parent is not the newest committed block at that height: a reorg.
    Forked,
}

impl Window {
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "a window holds at least one block");
        Self {
            blocks: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    pub fn newest(&self) -> Option<BlockRef> {
        self.blocks.back().copied()
    }

    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Newest first, for walking back to a common ancestor.
    pub fn iter_newest_first(&self) -> impl Iterator<Item = BlockRef> + '_ {
        self.blocks.iter().rev().copied()
    }

    /// Records a committed block; it must be newer than the newest.
    pub fn push(&mut self, block: BlockRef) {
        debug_assert!(
            self.newest()
                .is_none_or(|newest| newest.number < block.number)
        );
        if self.blocks.len() == self.capacity {
            self.blocks.pop_front();
        }
        self.blocks.push_back(block);
    }

    /// Checks a block (`number`, whose parent is `parent_hash`) against the window.
    pub fn continuity(&self, number: u64, parent_hash: B256) -> Continuity {
        match self.newest() {
            None => Continuity::Extends,
            Some(newest) if newest.number + 1 == number => {
                if newest.hash == parent_hash {
                    Continuity::Extends
                } else {
                    Continuity::Forked
                }
            }
            Some(newest) if newest.number + 1 < number => Continuity::Unchecked,
            // A block at or below the newest height: the chain went back.
            Some(_) => Continuity::Forked,
        }
    }

    /// Drops the blocks above `ancestor` and returns them newest first: what a
    /// retraction names.
    pub fn retract_above(&mut self, ancestor: u64) -> Vec<OrphanedBlock> {
        let mut orphaned = Vec::new();
        while let Some(newest) = self.newest().filter(|b| b.number > ancestor) {
            orphaned.push(OrphanedBlock {
                number: newest.number,
                hash: newest.hash,
            });
            self.blocks.pop_back();
        }
        orphaned
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn block(number: u64, tag: u8) -> BlockRef {
        BlockRef {
            number,
            hash: B256::repeat_byte(tag),
        }
    }

    #[test]
    fn a_child_of_the_newest_block_extends() {
        let mut window = Window::new(4);
        assert_eq!(
            window.continuity(10, B256::ZERO),
            Continuity::Extends,
            "empty window"
        );
        window.push(block(10, 1));
        assert_eq!(
            window.continuity(11, B256::repeat_byte(1)),
            Continuity::Extends
        );
        assert_eq!(
            window.continuity(11, B256::repeat_byte(9)),
            Continuity::Forked
        );
        assert_eq!(
            window.continuity(13, B256::repeat_byte(9)),
            Continuity::Unchecked
        );
        assert_eq!(
            window.continuity(10, B256::repeat_byte(1)),
            Continuity::Forked,
            "same height again"
        );
    }

    #[test]
    fn retracting_returns_orphans_newest_first() {
        let mut window = Window::new(8);
        for n in 1..=5 {
            window.push(block(n, n as u8));
        }
        let orphaned = window.retract_above(2);
        assert_eq!(
            orphaned.iter().map(|b| b.number).collect::<Vec<_>>(),
            [5, 4, 3]
        );
        assert_eq!(window.newest(), Some(block(2, 2)));
        assert!(window.retract_above(7).is_empty());
    }

    proptest! {
        #[test]
        fn window_keeps_the_newest_blocks_in_order(count in 1usize..64, capacity in 1usize..16) {
            let mut window = Window::new(capacity);
            for n in 0..count as u64 {
                window.push(block(n, 0));
            }
            prop_assert_eq!(window.len(), count.min(capacity));
            let numbers: Vec<u64> = window.iter_newest_first().map(|b| b.number).collect();
            prop_assert!(numbers.windows(2).all(|w| w[0] == w[1] + 1));
            prop_assert_eq!(numbers[0], count as u64 - 1);
        }
    }
}
