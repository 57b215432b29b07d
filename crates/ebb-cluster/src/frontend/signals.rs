//! SIGINT, SIGTERM, SIGHUP and SIGQUIT while a frontend runs: caught with
//! `signal_hook` (a handler that sets a flag, process-wide, so it does not
//! matter which thread the kernel picks), and turned by a watcher thread
//! into `EventRoot::shutdown(128 + signal)`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::Wiring;

/// How often the signal watcher looks at the flag (and the spawner at its
/// queue).
pub(super) const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT, caught while the frontend runs.
pub(super) struct Signals {
    received: Arc<AtomicUsize>,
    ids: Vec<signal_hook::SigId>,
}

impl Signals {
    pub(super) fn catch() -> Signals {
        let received = Arc::new(AtomicUsize::new(0));
        let mut ids = Vec::new();
        use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
        // SIGHUP (the terminal closed) and SIGQUIT (Ctrl-\\) too: their
        // default action would end the frontend and leave its namespace.
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] {
            let number = usize::try_from(signal).unwrap_or_default();
            match signal_hook::flag::register_usize(signal, Arc::clone(&received), number) {
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
                            eprintln!("ebb: signal {signal}: stopping the frontend and its nodes");
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
            thread,
        }
    }
}

pub(super) struct SignalWatch {
    signals: Signals,
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl SignalWatch {
    /// Stops watching and catching; the signal that came, if one did.
    pub(super) fn finish(self) -> Option<usize> {
        self.done.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
        for id in self.signals.ids {
            signal_hook::low_level::unregister(id);
        }
        Some(self.signals.received.load(Ordering::SeqCst)).filter(|&signal| signal != 0)
    }
}
