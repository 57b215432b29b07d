//! The component model on plain threads standing in for cores.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use ebb_core::{
    ebb_key, enter_core, CoreId, Ebb, EbbError, EbbId, EbbRef, FaultContext, GlobalIdMap,
    InProcessGlobalIdMap, MapError, Multicore, MulticoreEbb, MulticoreRoot, Node, NodeId, Shared,
    FIRST_GLOBAL_ID, MAX_EBB_IDS,
};

/// Runs `body(core)` on `cores` threads, each entered as that core of `node`.
fn on_cores(node: &'static Node, body: impl Fn(CoreId) + Send + Sync + 'static) {
    let body = Arc::new(body);
    let handles: Vec<_> = (0..node.cores())
        .map(|core| {
            let body = Arc::clone(&body);
            thread::spawn(move || {
                let _core = enter_core(CoreId(core), node).expect("enter core");
                body(CoreId(core));
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("core thread panicked");
    }
}

struct Counter {
    core: CoreId,
    calls: Cell<u64>,
}

struct CounterRoot {
    faults: Vec<AtomicUsize>,
}

impl MulticoreEbb for Counter {
    type Root = CounterRoot;

    fn create_rep(root: &'static MulticoreRoot<Self>, core: CoreId) -> Result<Self, EbbError> {
        root.shared().faults[core.0].fetch_add(1, Ordering::SeqCst);
        Ok(Counter {
            core,
            calls: Cell::new(0),
        })
    }
}

#[test]
fn fault_handler_runs_once_per_core_and_reps_are_distinct() {
    let node = Node::standalone(4);
    let root = CounterRoot {
        faults: (0..4).map(|_| AtomicUsize::new(0)).collect(),
    };
    let counter = Multicore::<Counter>::create_on(node, root).unwrap();
    let addresses = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&addresses);
    on_cores(node, move |core| {
        for _ in 0..1000 {
            let rep = counter.get().unwrap();
            assert_eq!(rep.core, core, "a core resolved another core's rep");
            rep.calls.set(rep.calls.get() + 1);
        }
        assert_eq!(counter.get().unwrap().calls.get(), 1000);
        seen.lock()
            .unwrap()
            .push(counter.get().unwrap() as *const Counter as usize);
        let root = Multicore::root(counter).unwrap();
        assert_eq!(root.shared().faults[core.0].load(Ordering::SeqCst), 1);
    });
    let mut addresses = addresses.lock().unwrap().clone();
    addresses.sort_unstable();
    addresses.dedup();
    assert_eq!(
        addresses.len(),
        4,
        "representatives must be distinct per core"
    );
}

#[test]
fn multicore_root_reaches_thread_safe_reps() {
    struct Total(AtomicUsize);
    impl MulticoreEbb for Total {
        type Root = ();
        fn create_rep(_: &'static MulticoreRoot<Self>, core: CoreId) -> Result<Self, EbbError> {
            Ok(Total(AtomicUsize::new(core.0 * 10)))
        }
    }
    let node = Node::standalone(3);
    let total = Multicore::<Total>::create_on(node, ()).unwrap();
    on_cores(node, move |core| {
        if core.0 != 1 {
            total.get().unwrap();
        }
    });
    let root = node
        .local_ids()
        .get::<MulticoreRoot<Total>>(total.id())
        .unwrap();
    let cores: Vec<_> = root.cores_with_reps().collect();
    assert_eq!(
        cores,
        vec![CoreId(0), CoreId(2)],
        "reps exist only where used"
    );
    assert_eq!(root.rep_on(CoreId(2)).unwrap().0.load(Ordering::SeqCst), 20);
    assert!(root.rep_on(CoreId(1)).is_none());
}

struct Failing;

impl Ebb for Failing {
    type Rep = u64;

    fn fault(ctx: &FaultContext<'_>) -> Result<&'static u64, EbbError> {
        Err(EbbError::Fault {
            id: ctx.id,
            reason: "no representative on purpose",
        })
    }
}

#[test]
fn failing_fault_handler_returns_err_every_time() {
    let node = Node::standalone(1);
    let id = node.allocator().allocate_local().unwrap();
    let failing = EbbRef::<Failing>::bind(id).unwrap();
    on_cores(node, move |_| {
        for _ in 0..3 {
            let error = failing.get().unwrap_err();
            assert_eq!(
                error,
                EbbError::Fault {
                    id,
                    reason: "no representative on purpose"
                }
            );
            assert!(error.to_string().contains("no representative on purpose"));
        }
    });
}

#[test]
fn unregistered_id_and_plain_threads_get_clear_errors() {
    let node = Node::standalone(1);
    let id = node.allocator().allocate_local().unwrap();
    let stats = EbbRef::<Shared<AtomicUsize>>::bind(id).unwrap();
    // Not a core: no representatives at all.
    assert_eq!(stats.get().unwrap_err(), EbbError::NotOnCore);
    on_cores(node, move |_| {
        let error = stats.get().unwrap_err();
        assert_eq!(error, EbbError::Unregistered(id));
        assert_eq!(
            error.to_string(),
            format!("Ebb {} was never registered on this node", id.raw())
        );
    });
}

#[test]
fn shared_ebb_has_one_rep_for_all_cores() {
    let node = Node::standalone(3);
    let hits = Shared::create_on(node, AtomicUsize::new(0)).unwrap();
    let addresses = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&addresses);
    on_cores(node, move |_| {
        let rep = hits.get().unwrap();
        rep.fetch_add(1, Ordering::SeqCst);
        seen.lock()
            .unwrap()
            .push(rep as *const AtomicUsize as usize);
    });
    let addresses = addresses.lock().unwrap();
    assert!(addresses.windows(2).all(|pair| pair[0] == pair[1]));
    let root = node.local_ids().get::<AtomicUsize>(hits.id()).unwrap();
    assert_eq!(root.load(Ordering::SeqCst), 3);
}

#[test]
fn an_id_is_bound_to_one_type() {
    let node = Node::standalone(1);
    let id = node.allocator().allocate_local().unwrap();
    EbbRef::<Shared<AtomicUsize>>::bind(id).unwrap();
    let error = EbbRef::<Shared<String>>::bind(id).unwrap_err();
    assert!(matches!(error, EbbError::TypeMismatch { .. }), "{error:?}");
    assert!(error.to_string().contains("is bound to type"));
}

#[test]
fn ids_outside_the_table_and_bad_cores_are_rejected() {
    assert_eq!(
        EbbId::new(MAX_EBB_IDS),
        Err(EbbError::IdOutOfRange(MAX_EBB_IDS))
    );
    let node = Node::standalone(2);
    let error = enter_core(CoreId(2), node).err().unwrap();
    assert_eq!(
        error,
        EbbError::NoSuchCore {
            core: CoreId(2),
            cores: 2
        }
    );
    let _core = enter_core(CoreId(0), node).unwrap();
    assert_eq!(
        enter_core(CoreId(1), node).err().unwrap(),
        EbbError::AlreadyCore(CoreId(0))
    );
}

#[test]
fn install_puts_a_rep_in_place_without_a_fault() {
    let node = Node::standalone(1);
    let id = node.allocator().allocate_local().unwrap();
    let ebb = EbbRef::<Failing>::bind(id).unwrap();
    assert_eq!(
        ebb.install(Box::leak(Box::new(9))),
        Err(EbbError::NotOnCore)
    );
    on_cores(node, move |_| {
        ebb.install(Box::leak(Box::new(7))).unwrap();
        assert_eq!(*ebb.get().unwrap(), 7);
        assert_eq!(
            ebb.install(Box::leak(Box::new(8))),
            Err(EbbError::AlreadyInstalled(id))
        );
    });
}

#[test]
fn leaving_a_core_forgets_its_reps() {
    let node = Node::standalone(1);
    let hits = Shared::create_on(node, AtomicUsize::new(0)).unwrap();
    {
        let _core = enter_core(CoreId(0), node).unwrap();
        hits.get().unwrap();
    }
    assert_eq!(hits.get().unwrap_err(), EbbError::NotOnCore);
}

/// The in-process map's futures are ready at once.
fn now<T>(future: impl std::future::Future<Output = T>) -> T {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(future).poll(&mut cx) {
        std::task::Poll::Ready(value) => value,
        std::task::Poll::Pending => panic!("an in-process map future was pending"),
    }
}

#[test]
fn global_id_ranges_never_overlap_across_nodes() {
    let global: &'static InProcessGlobalIdMap = Box::leak(Box::new(InProcessGlobalIdMap::new()));
    let nodes: Vec<&'static Node> = (0..8).map(|n| Node::new(NodeId(n), 1, global)).collect();
    let start = Arc::new(Barrier::new(nodes.len()));
    let handles: Vec<_> = nodes
        .iter()
        .map(|&node| {
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                (0..200)
                    .map(|_| now(node.allocator().allocate_global(global)).unwrap().raw())
                    .collect::<Vec<u32>>()
            })
        })
        .collect();
    let mut all: Vec<u32> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert!(all
        .iter()
        .all(|&id| (FIRST_GLOBAL_ID..MAX_EBB_IDS).contains(&id)));
    let count = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), count, "two nodes were handed the same global id");

    let a = now(global.reserve_range(NodeId(100), 10)).unwrap();
    let b = now(global.reserve_range(NodeId(101), 10)).unwrap();
    assert!(a.end <= b.start || b.end <= a.start);
    assert!(matches!(
        now(global.reserve_range(NodeId(1), MAX_EBB_IDS)),
        Err(MapError::IdsExhausted {
            wanted: MAX_EBB_IDS,
            ..
        })
    ));
}

#[test]
fn global_id_map_stores_values() {
    let global = InProcessGlobalIdMap::new();
    let key = ebb_key(EbbId::new(FIRST_GLOBAL_ID + 1).unwrap());
    assert_eq!(now(global.get(&key)), Ok(None));
    now(global.set(&key, b"node 3".to_vec(), None)).unwrap();
    assert_eq!(
        now(global.get(&key)).unwrap().as_deref(),
        Some(&b"node 3"[..])
    );
    now(global.set(&key, b"node 4".to_vec(), None)).unwrap();
    assert_eq!(
        now(global.get(&key)).unwrap().as_deref(),
        Some(&b"node 4"[..])
    );
}

#[test]
fn local_ids_are_unique_across_nodes() {
    let a = Node::standalone(1);
    let b = Node::standalone(1);
    let ids: Vec<u32> = (0..100)
        .flat_map(|_| {
            [
                a.allocator().allocate_local().unwrap().raw(),
                b.allocator().allocate_local().unwrap().raw(),
            ]
        })
        .collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());
}
