//! [`Segments`]: the segment list of an [`crate::IoChain`].
//!
//! Most chains are short: a request line in one receive buffer, or a
//! reply of a header, a value and a trailer. A heap-allocated list for
//! each of them cost an allocation per chain, several per request, and on
//! a lightly loaded server each allocation touches memory that went cold
//! while the core slept (memcached at a quarter of its peak spent a tenth
//! of its CPU in the allocator). So up to [`INLINE`] segments live in the
//! chain itself; only a longer chain moves them to a vector, and then
//! keeps that vector's capacity when emptied, as `VecDeque` did.
//!
//! The live segments are always one contiguous slice, `slots[start..end]`;
//! every slot outside it holds an empty [`IoBuf`], which owns no memory.
//! Removing from the front advances `start`; the vector is compacted when
//! its dead front grows past half of it, so a long chain consumed from the
//! front costs amortized O(1) per segment.

use alloc::vec::Vec;
use core::fmt;
use core::mem;

use crate::IoBuf;

/// Segments held in the chain itself before it spills to the heap: a
/// header, a value and a trailer, or a request spanning a few receive
/// buffers.
pub(crate) const INLINE: usize = 4;

/// A vector's dead front is compacted once it has at least this many
/// slots and half the vector.
const COMPACT_AT: usize = 16;

#[derive(Clone)]
enum Store {
    Inline([IoBuf; INLINE]),
    Heap(Vec<IoBuf>),
}

/// An ordered list of segments, front to back, without an allocation for
/// up to [`INLINE`] of them.
#[derive(Clone)]
pub(crate) struct Segments {
    store: Store,
    /// The first live slot.
    start: usize,
    /// One past the last live slot; for `Store::Heap`, also the vector's
    /// length.
    end: usize,
}

const EMPTY: IoBuf = IoBuf::new();

/// Puts `buf` into `slot`, which is outside the live range and so holds
/// an empty [`IoBuf`] (the invariant above). The empty one is forgotten
/// rather than dropped: it owns nothing (`Bytes::new()`'s static empty
/// slice), and its drop is an indirect call through `bytes`' vtable that
/// did nothing, on every push (`./ebb bench insns` counted it).
fn fill(slot: &mut IoBuf, buf: IoBuf) {
    forget_empty(mem::replace(slot, buf));
}

/// Lets go of an [`IoBuf`] from outside the live range, which owns
/// nothing, without the indirect no-op call its drop would make.
fn forget_empty(buf: IoBuf) {
    debug_assert!(buf.is_empty(), "a slot outside the live range held data");
    mem::forget(buf);
}

impl Segments {
    /// An empty list (no allocation).
    pub(crate) const fn new() -> Self {
        Self {
            store: Store::Inline([EMPTY; INLINE]),
            start: 0,
            end: 0,
        }
    }

    fn slots(&self) -> &[IoBuf] {
        match &self.store {
            Store::Inline(slots) => slots,
            Store::Heap(slots) => slots,
        }
    }

    fn slots_mut(&mut self) -> &mut [IoBuf] {
        match &mut self.store {
            Store::Inline(slots) => slots,
            Store::Heap(slots) => slots,
        }
    }

    /// The live segments, front to back.
    pub(crate) fn as_slice(&self) -> &[IoBuf] {
        &self.slots()[self.start..self.end]
    }

    fn as_mut_slice(&mut self) -> &mut [IoBuf] {
        let (start, end) = (self.start, self.end);
        &mut self.slots_mut()[start..end]
    }

    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    pub(crate) fn iter(&self) -> core::slice::Iter<'_, IoBuf> {
        self.as_slice().iter()
    }

    pub(crate) fn front(&self) -> Option<&IoBuf> {
        self.as_slice().first()
    }

    pub(crate) fn front_mut(&mut self) -> Option<&mut IoBuf> {
        self.as_mut_slice().first_mut()
    }

    pub(crate) fn back_mut(&mut self) -> Option<&mut IoBuf> {
        self.as_mut_slice().last_mut()
    }

    pub(crate) fn get(&self, index: usize) -> Option<&IoBuf> {
        self.as_slice().get(index)
    }

    /// Moves the live segments to a vector with room for `extra` more.
    /// Aborts if memory runs out, as `VecDeque::push_back` does; callers
    /// that must not abort call [`Segments::try_reserve`] first.
    fn spill(&mut self, extra: usize) {
        let mut heap = Vec::with_capacity((self.len() + extra).max(2 * INLINE));
        self.move_live_into(&mut heap);
    }

    fn move_live_into(&mut self, heap: &mut Vec<IoBuf>) {
        let (start, end) = (self.start, self.end);
        heap.extend(self.slots_mut()[start..end].iter_mut().map(mem::take));
        self.end = heap.len();
        self.start = 0;
        self.store = Store::Heap(mem::take(heap));
    }

    pub(crate) fn push_back(&mut self, buf: IoBuf) {
        if let Store::Inline(slots) = &mut self.store {
            if self.end == INLINE && self.start > 0 {
                // Slide the live segments to the front; the empty slots
                // rotate to the back.
                slots.rotate_left(self.start);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end < INLINE {
                fill(&mut slots[self.end], buf);
                self.end += 1;
                return;
            }
            self.spill(1);
        }
        if let Store::Heap(slots) = &mut self.store {
            slots.push(buf);
            self.end += 1;
        }
    }

    pub(crate) fn push_front(&mut self, buf: IoBuf) {
        if self.start > 0 {
            self.start -= 1;
            let start = self.start;
            fill(&mut self.slots_mut()[start], buf);
            return;
        }
        if let Store::Inline(slots) = &mut self.store {
            if self.end < INLINE {
                slots[..=self.end].rotate_right(1);
                fill(&mut slots[0], buf);
                self.end += 1;
                return;
            }
            self.spill(1);
        }
        if let Store::Heap(slots) = &mut self.store {
            slots.insert(0, buf);
            self.end += 1;
        }
    }

    pub(crate) fn pop_front(&mut self) -> Option<IoBuf> {
        if self.start == self.end {
            return None;
        }
        let start = self.start;
        let buf = mem::take(&mut self.slots_mut()[start]);
        self.start += 1;
        if self.start == self.end {
            self.clear();
        } else if let Store::Heap(slots) = &mut self.store {
            if self.start >= COMPACT_AT && 2 * self.start >= self.end {
                slots.drain(..self.start).for_each(forget_empty);
                self.end -= self.start;
                self.start = 0;
            }
        }
        Some(buf)
    }

    pub(crate) fn pop_back(&mut self) -> Option<IoBuf> {
        if self.start == self.end {
            return None;
        }
        self.end -= 1;
        let end = self.end;
        let buf = mem::take(&mut self.slots_mut()[end]);
        if let Store::Heap(slots) = &mut self.store {
            slots.drain(end..).for_each(forget_empty);
        }
        if self.start == self.end {
            self.clear();
        }
        Some(buf)
    }

    /// Drops every segment; a vector keeps its capacity. Inline, only the
    /// live slots hold anything (after the last `pop_front`, none).
    pub(crate) fn clear(&mut self) {
        let (start, end) = (self.start, self.end);
        match &mut self.store {
            Store::Inline(slots) => slots[start..end]
                .iter_mut()
                .for_each(|slot| *slot = IoBuf::new()),
            Store::Heap(slots) => {
                // The dead front holds only empty IoBufs; the live ones
                // are dropped.
                slots.drain(start..end).for_each(drop);
                slots.drain(..).for_each(forget_empty);
            }
        }
        self.start = 0;
        self.end = 0;
    }

    /// Empties a list whose every slot holds an empty [`IoBuf`] (its live
    /// ones were just taken), without dropping them one by one.
    fn forget_emptied(&mut self) {
        if let Store::Heap(slots) = &mut self.store {
            slots.drain(..).for_each(forget_empty);
        }
        self.start = 0;
        self.end = 0;
    }

    /// Makes room for `additional` more segments without aborting.
    ///
    /// # Errors
    ///
    /// The vector could not grow; the list is unchanged.
    pub(crate) fn try_reserve(
        &mut self,
        additional: usize,
    ) -> Result<(), alloc::collections::TryReserveError> {
        match &mut self.store {
            Store::Inline(_) => {
                let need = self.len().saturating_add(additional);
                if need > INLINE {
                    let mut heap = Vec::new();
                    heap.try_reserve_exact(need.max(2 * INLINE))?;
                    self.move_live_into(&mut heap);
                }
                Ok(())
            }
            Store::Heap(slots) => slots.try_reserve(additional),
        }
    }

    /// Moves all of `other`'s segments to the back of `self`.
    pub(crate) fn append(&mut self, other: &mut Segments) {
        if self.len() == 0 {
            // Take `other`'s storage whole; `other` gets ours, empty (and
            // a vector keeps its capacity for whoever reuses it).
            mem::swap(self, other);
            return;
        }
        if let Store::Heap(slots) = &mut self.store {
            slots.reserve(other.len());
        } else if self.len() + other.len() > INLINE {
            self.spill(other.len());
        }
        if let Store::Heap(slots) = &mut self.store {
            // One move of the whole run, not a pop and a push per
            // segment (`./ebb bench insns`: a memcached reply appended
            // to the send queue, a receive appended to the input).
            let (start, end) = (other.start, other.end);
            slots.extend(other.slots_mut()[start..end].iter_mut().map(mem::take));
            self.end = slots.len();
            other.forget_emptied();
            return;
        }
        while let Some(buf) = other.pop_front() {
            self.push_back(buf);
        }
    }
}

impl Default for Segments {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Segments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// The segments of a chain, moved out front to back.
#[derive(Debug)]
pub struct IntoSegments(Segments);

impl IntoSegments {
    pub(crate) fn new(segments: Segments) -> Self {
        Self(segments)
    }
}

impl Iterator for IntoSegments {
    type Item = IoBuf;

    fn next(&mut self) -> Option<IoBuf> {
        self.0.pop_front()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.0.len(), Some(self.0.len()))
    }
}

impl DoubleEndedIterator for IntoSegments {
    fn next_back(&mut self) -> Option<IoBuf> {
        self.0.pop_back()
    }
}

impl ExactSizeIterator for IntoSegments {}

#[cfg(test)]
mod tests {
    use super::{Segments, Store, INLINE};
    use crate::IoBuf;
    use alloc::collections::VecDeque;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    extern crate std;

    std::thread_local! {
        /// Buffers made by [`buf`] and not yet given back (per thread:
        /// tests run side by side).
        static LIVE: core::cell::Cell<isize> = const { core::cell::Cell::new(0) };
    }

    /// One byte, owned by a counter of live buffers: a segment forgotten
    /// rather than dropped stays counted.
    struct Counted([u8; 1]);

    impl AsRef<[u8]> for Counted {
        fn as_ref(&self) -> &[u8] {
            &self.0
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            LIVE.with(|live| live.set(live.get() - 1));
        }
    }

    fn buf(n: u8) -> IoBuf {
        LIVE.with(|live| live.set(live.get() + 1));
        IoBuf::from_owner(Counted([n]))
    }

    fn contents(segments: &Segments) -> Vec<u8> {
        segments.iter().map(|seg| seg[0]).collect()
    }

    #[test]
    fn a_short_chain_stays_inline() {
        assert_eq!(INLINE, 4, "this test fills exactly the inline slots");
        let mut segments = Segments::new();
        for n in 0..4 {
            segments.push_back(buf(n));
        }
        assert!(matches!(segments.store, Store::Inline(_)));
        segments.pop_front();
        segments.push_back(buf(9));
        assert!(matches!(segments.store, Store::Inline(_)));
        assert_eq!(contents(&segments), [1, 2, 3, 9]);
        segments.push_back(buf(10));
        assert!(matches!(segments.store, Store::Heap(_)));
        assert_eq!(contents(&segments), [1, 2, 3, 9, 10]);
    }

    #[test]
    fn appending_to_an_empty_list_takes_the_other_storage() {
        let mut long = Segments::new();
        for n in 0..10 {
            long.push_back(buf(n));
        }
        let mut empty = Segments::new();
        empty.append(&mut long);
        assert_eq!(long.len(), 0);
        assert_eq!(contents(&empty), (0..10).collect::<Vec<u8>>());
    }

    #[derive(Debug, Clone)]
    enum Op {
        PushBack(u8),
        PushFront(u8),
        PopFront,
        PopBack,
        Clear,
        Reserve(u8),
        Append(Vec<u8>),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<u8>().prop_map(Op::PushBack),
            2 => any::<u8>().prop_map(Op::PushFront),
            3 => Just(Op::PopFront),
            2 => Just(Op::PopBack),
            1 => Just(Op::Clear),
            1 => (0u8..12).prop_map(Op::Reserve),
            1 => proptest::collection::vec(any::<u8>(), 0..12).prop_map(Op::Append),
        ]
    }

    proptest! {
        // Miri runs the unsafe-code step's tests: a few cases there.
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { 256 },
            ..ProptestConfig::default()
        })]

        /// Every operation does to the list what it does to a `VecDeque`,
        /// every slot outside the live range stays empty, and every
        /// segment is dropped once: none forgotten, none leaked.
        #[test]
        fn behaves_like_a_vecdeque(
            ops in proptest::collection::vec(op(), 0..if cfg!(miri) { 40 } else { 200 })
        ) {
            let live_before = LIVE.with(core::cell::Cell::get);
            let mut segments = Segments::new();
            let mut model: VecDeque<u8> = VecDeque::new();
            for op in ops {
                match op {
                    Op::PushBack(n) => { segments.push_back(buf(n)); model.push_back(n); }
                    Op::PushFront(n) => { segments.push_front(buf(n)); model.push_front(n); }
                    Op::PopFront => {
                        prop_assert_eq!(segments.pop_front().map(|b| b[0]), model.pop_front());
                    }
                    Op::PopBack => {
                        prop_assert_eq!(segments.pop_back().map(|b| b[0]), model.pop_back());
                    }
                    Op::Clear => { segments.clear(); model.clear(); }
                    Op::Reserve(n) => { segments.try_reserve(usize::from(n)).unwrap(); }
                    Op::Append(values) => {
                        let mut other = Segments::new();
                        for &n in &values { other.push_back(buf(n)); }
                        segments.append(&mut other);
                        prop_assert_eq!(other.len(), 0);
                        model.extend(values);
                    }
                }
                prop_assert_eq!(contents(&segments), model.iter().copied().collect::<Vec<u8>>());
                let (start, end) = (segments.start, segments.end);
                prop_assert!(segments.slots()[..start].iter().all(IoBuf::is_empty));
                prop_assert!(segments.slots()[end..].iter().all(IoBuf::is_empty));
                if let Store::Heap(slots) = &segments.store {
                    prop_assert_eq!(slots.len(), end);
                }
                let held = isize::try_from(segments.len()).unwrap_or(isize::MAX);
                prop_assert_eq!(LIVE.with(core::cell::Cell::get) - live_before, held);
            }
            drop(segments);
            prop_assert_eq!(LIVE.with(core::cell::Cell::get), live_before);
        }
    }
}
