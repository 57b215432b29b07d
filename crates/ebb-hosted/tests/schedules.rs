//! Property test: random mixes of local events, cross-core events, timers,
//! tasks and stackful events all complete, each exactly once.

mod common;

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{on_node, BACKENDS};
use ebb_core::CoreId;
use ebb_event::{
    block_on, sleep, spawn, spawn_on, spawn_stackful, spawn_task, spawn_task_on, timer_after,
};
use proptest::prelude::*;

const CORES: usize = 3;

#[derive(Clone, Debug)]
enum Step {
    Local,
    On(usize),
    Timer(u64),
    Task(usize),
    Stackful,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Local),
        (0..CORES).prop_map(Step::On),
        (0..3u64).prop_map(Step::Timer),
        (0..CORES).prop_map(Step::Task),
        Just(Step::Stackful),
    ]
}

/// One item: a chain of steps; the item counts once when its last step ran.
type Item = Vec<Step>;

struct Tally {
    counts: Vec<AtomicU32>,
    left: AtomicUsize,
}

fn run_chain(tally: Arc<Tally>, index: usize, mut steps: Item) {
    let Some(step) = steps.pop() else {
        tally.counts[index].fetch_add(1, Ordering::SeqCst);
        tally.left.fetch_sub(1, Ordering::SeqCst);
        return;
    };
    let next = move || run_chain(tally, index, steps);
    match step {
        Step::Local => spawn(next),
        Step::On(core) => spawn_on(CoreId(core), next).unwrap(),
        Step::Timer(ms) => {
            timer_after(Duration::from_millis(ms), next);
        }
        Step::Task(core) => {
            let handle = spawn_task_on(CoreId(core), async move {
                sleep(Duration::from_micros(50)).await;
                next();
            })
            .unwrap();
            drop(handle);
        }
        Step::Stackful => {
            drop(spawn_stackful(move || {
                block_on(sleep(Duration::from_micros(50))).unwrap();
                next();
            }));
        }
    }
}

fn run_schedule(items: Vec<Item>, backend: ebb_hosted::Backend) -> Vec<u32> {
    let tally = Arc::new(Tally {
        counts: (0..items.len()).map(|_| AtomicU32::new(0)).collect(),
        left: AtomicUsize::new(items.len()),
    });
    let watched = Arc::clone(&tally);
    on_node(CORES, backend, move || async move {
        for (index, item) in items.into_iter().enumerate() {
            run_chain(Arc::clone(&tally), index, item);
        }
        let done = spawn_task(async move {
            while tally.left.load(Ordering::SeqCst) > 0 {
                sleep(Duration::from_micros(200)).await;
            }
        });
        done.await.unwrap();
    });
    // The node is gone: nothing can count any more.
    watched
        .counts
        .iter()
        .map(|count| count.load(Ordering::SeqCst))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_item_completes_exactly_once(
        items in proptest::collection::vec(proptest::collection::vec(step(), 0..6), 1..40),
        epoll in any::<bool>(),
    ) {
        let backend = BACKENDS[usize::from(epoll)];
        let counts = run_schedule(items, backend);
        prop_assert!(counts.iter().all(|&count| count == 1), "counts: {counts:?}");
    }
}
