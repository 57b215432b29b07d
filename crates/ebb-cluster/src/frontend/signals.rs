//! SIGINT, SIGTERM, SIGHUP and SIGQUIT while a frontend runs: caught with
//! `signal_hook` (a handler that sets a flag, process-wide, so it does not
//! matter which thread the kernel picks), and turned by a watcher thread
//! into `EventRoot::shutdown(128 + signal)`.
//!
//! The first such signal starts the teardown; a second one, during the
//! teardown, takes the signal's default action at once (the process ends:
//! its QEMUs get their parent-death signal, and a namespace left behind is
//! swept by the next cluster or `./ebb cluster down`). When the frontend
//! is over ([`Signals`] dropped, also on an early error), every later
//! signal takes its default action again.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};

use super::Wiring;

/// How often the signal watcher looks at the flag (and the spawner at its
/// queue).
pub(super) const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// The signals a frontend catches. SIGHUP (the terminal closed) and
/// SIGQUIT (Ctrl-\\) too: their default action would end the frontend and
/// leave its namespace.
const CAUGHT: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

/// Whether the next caught signal takes its default action: true while no
/// frontend runs, and once one signal has come during a run. Its handlers
/// are registered once per process, before any frontend's, so they run
/// first (`signal_hook` runs a signal's actions in registration order).
fn default_action() -> &'static Arc<AtomicBool> {
    static DEFAULT_ACTION: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    DEFAULT_ACTION.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(true));
        for signal in CAUGHT {
            if let Err(e) =
                signal_hook::flag::register_conditional_default(signal, Arc::clone(&flag))
            {
                eprintln!("warning: cannot restore signal {signal}'s default action ({e})");
            }
        }
        flag
    })
}

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT, caught while the frontend runs;
/// dropping it gives them back their default action.
pub(super) struct Signals {
    received: Arc<AtomicUsize>,
    ids: Vec<signal_hook::SigId>,
}

impl Signals {
    pub(super) fn catch() -> Signals {
        let default_action = default_action();
        default_action.store(false, Ordering::SeqCst);
        let received = Arc::new(AtomicUsize::new(0));
        let mut ids = Vec::new();
        for signal in CAUGHT {
            let number = usize::try_from(signal).unwrap_or_default();
            let caught = signal_hook::flag::register_usize(signal, Arc::clone(&received), number)
                // The first signal arms the default action for a second.
                .and_then(|id| {
                    ids.push(id);
                    signal_hook::flag::register(signal, Arc::clone(default_action))
                });
            match caught {
                Ok(id) => ids.push(id),
                Err(e) => eprintln!(
                    "warning: cannot catch signal {signal} ({e}): it would end the frontend \
                     before it stops its nodes"
                ),
            }
        }
        Signals { received, ids }
    }

    /// Watches for a caught signal: the loop is stopped with 128 + it.
    pub(super) fn watch(self, wiring: Arc<Wiring>) -> SignalWatch {
        let done = Arc::new(AtomicBool::new(false));
        let received = Arc::clone(&self.received);
        let thread = {
            let done = Arc::clone(&done);
            std::thread::spawn(move || loop {
                if done.load(Ordering::SeqCst) {
                    return;
                }
                let signal = received.load(Ordering::SeqCst);
                if signal != 0 {
                    if let Some(events) = wiring.events.get() {
                        let code = 128 + i32::try_from(signal).unwrap_or(0);
                        if events.shutdown(code).is_ok() {
                            eprintln!(
                                "ebb: signal {signal}: stopping the frontend and its nodes \
                                 (a second one ends it at once)"
                            );
                        }
                        return;
                    }
                }
                std::thread::sleep(SIGNAL_POLL);
            })
        };
        SignalWatch {
            signals: self,
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for &id in &self.ids {
            signal_hook::low_level::unregister(id);
        }
        default_action().store(true, Ordering::SeqCst);
    }
}

/// The watcher thread and the signals it watches (caught until dropped).
pub(super) struct SignalWatch {
    signals: Signals,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SignalWatch {
    /// Stops watching (a signal still starts no second teardown, and a
    /// second signal still ends the process, until this is dropped); the
    /// signal that came, if one did.
    pub(super) fn finish(&mut self) -> Option<usize> {
        self.done.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        Some(self.signals.received.load(Ordering::SeqCst)).filter(|&signal| signal != 0)
    }
}
