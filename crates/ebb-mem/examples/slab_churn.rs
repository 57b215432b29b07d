//! Allocation-heavy loops on an isolated slab heap, for instruction counts
//! of the slab allocator's paths under callgrind (`docs/benchmarks.md`,
//! "Slab allocator: instructions per operation"):
//!
//! ```text
//! cargo build --release -p ebb-mem --example slab_churn
//! valgrind --tool=callgrind target/release/examples/slab_churn local
//! valgrind --tool=callgrind target/release/examples/slab_churn remote
//! ```
//!
//! 2 000 rounds of 1 000 allocations of one class (rounds cycle through
//! classes 0..12) from one core cache, then 1 000 frees: all by the owner
//! (`local`), or every other round by a second cache (`remote`: remote
//! frees batched in magazines and drained by the owner on its refills).
use ebb_mem::hosted::MmapPages;
use ebb_mem::SlabAllocator;
use std::hint::black_box;

static PAGES: MmapPages = MmapPages;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let heap: &'static SlabAllocator = Box::leak(Box::new(SlabAllocator::new(&PAGES)));
    let a = heap.new_cache(0).unwrap().as_ptr();
    let b = heap.new_cache(0).unwrap().as_ptr();
    let mut objs = Vec::with_capacity(4096);
    for round in 0..2000usize {
        let class = round % 12;
        for _ in 0..1000 {
            // SAFETY: `a` is ours; valid class.
            objs.push(black_box(unsafe { heap.alloc(a, class) }));
        }
        let freer = if mode == "remote" && round % 2 == 1 {
            b
        } else {
            a
        };
        for p in objs.drain(..) {
            // SAFETY: live object of `class`, freed once.
            unsafe { heap.free(freer, p, class) };
        }
    }
    // SAFETY: the cache is ours.
    unsafe { heap.flush_cache(b) };
    // SAFETY: the cache is ours.
    unsafe { heap.flush_cache(a) };
    println!("{}", heap.used_pages());
}
