//! Running a node on the native platform: [`run`] mirrors
//! `ebb_hosted::run` (the application's `main` is core 0's first event; the
//! node's exit code comes back), [`run_other_core`] is every other core's
//! life after its CPU setup (the hook `smp` calls), and the panic handler
//! reports and exits.

use alloc::boxed::Box;
use alloc::rc::Rc;
use core::arch::asm;
use core::fmt;
use core::sync::atomic::{AtomicBool, Ordering};

use ebb_core::{CoreId, Node};
use ebb_event::{run_core, start_node, CoreDriver, EventError, Instant, Platform};
use spin::Once;

use ebb_boot_abi::{PlatformOptions, EXIT_PANIC};

use crate::arch::x86_64::debug_exit::exit;
use crate::arch::x86_64::start_info::StartInfo;
use crate::arch::x86_64::{apic, clock, console, cpu, paging, smp};
use crate::mm::memory;
use crate::runtime::crash;
use crate::runtime::net::{self, InterruptHook};

static OPTIONS: Once<PlatformOptions> = Once::new();
static RAN: AtomicBool = AtomicBool::new(false);
/// The LAPIC id of each running core (index = core number), set at boot.
static CORES: Once<Box<[u32]>> = Once::new();
/// The node, once [`run`] started it: the other cores wait for it.
static NODE: Once<&'static Node> = Once::new();

/// The platform options from the command line.
pub fn options() -> PlatformOptions {
    OPTIONS.get().copied().unwrap_or_default()
}

/// The LAPIC id of core `core`, if it runs.
pub fn apic_id(core: usize) -> Option<u32> {
    match CORES.get() {
        Some(cores) => cores.get(core).copied(),
        None => (core == 0).then(apic::id),
    }
}

/// Records which cores run (boot, after `smp::start_cores`).
pub fn set_cores(apic_ids: Box<[u32]>) {
    CORES.call_once(|| apic_ids);
}

/// Records the platform options from the command line (boot).
pub fn set_options(options: PlatformOptions) {
    OPTIONS.call_once(|| options);
}

/// Why a native node could not run.
#[derive(Debug)]
pub enum NativeError {
    /// The event layer refused.
    Event(EventError),
    /// [`run`] was called a second time: a native image runs one node.
    AlreadyRan,
}

impl fmt::Display for NativeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NativeError::Event(error) => error.fmt(f),
            NativeError::AlreadyRan => write!(f, "a native image runs one node, once"),
        }
    }
}

/// The node-wide half of the platform: the TSC clock and wake-up IPIs.
struct NativePlatform {
    /// LAPIC id of each core.
    apic_ids: Box<[u32]>,
}

impl Platform for NativePlatform {
    fn now(&self) -> Instant {
        Instant(clock::nanos())
    }

    fn notify(&self, core: CoreId) {
        if let Some(&id) = self.apic_ids.get(core.0) {
            x86_64::instructions::interrupts::without_interrupts(|| apic::send_wake(id));
        }
    }

    fn memory_bytes(&self) -> Option<usize> {
        Some(crate::mm::memory::usable_bytes())
    }
}

/// One core's half: device interrupts, halting until an interrupt or the
/// next deadline.
struct NativeCore {
    /// The driver that takes device interrupts on this core (its
    /// virtio-net queue pair's), set by `net::install`.
    on_interrupt: InterruptHook,
    /// This core's LAPIC id (which device-interrupt flag is its own).
    apic_id: u32,
}

impl CoreDriver for NativeCore {
    fn dispatch(&self) {
        // The timer and wake-up IPIs only end a halt; a device interrupt
        // (MSI-X, `apic::DEVICE_VECTOR`) was recorded by its handler, and
        // its driver runs here, in the loop, with interrupts off.
        if apic::take_device_interrupt(self.apic_id) {
            if let Some(hook) = self.on_interrupt.borrow_mut().as_mut() {
                hook();
            }
        }
    }

    fn halt(&self, deadline: Option<Instant>) {
        memory::flush_remote_frees();
        if let Some(deadline) = deadline {
            let now = clock::nanos();
            if deadline.0 <= now {
                return;
            }
            apic::arm(deadline.0 - now);
        }
        // The loop runs with interrupts off; `sti` takes effect after `hlt`
        // begins, so an interrupt after the loop's checks still ends the halt.
        // SAFETY: the handler (timer or wake-up EOI) returns here, and
        // interrupts go off again at once.
        unsafe { asm!("sti", "hlt", "cli", options(nomem, nostack)) };
        apic::disarm();
        // A C program's periodic tick (`start_ticks`) shares the timer.
        apic::resume_tick();
    }
}

/// Runs this image's node on every core started at boot (`cores=N`):
/// `main` is the first event on core 0; returns when the node shuts down
/// (`ebb_event::shutdown(code)`), with its code.
pub fn run(main: impl FnOnce() + Send + 'static) -> Result<i32, NativeError> {
    if RAN.swap(true, Ordering::Relaxed) {
        return Err(NativeError::AlreadyRan);
    }
    let options = options();
    let apic_ids: Box<[u32]> = match CORES.get() {
        Some(cores) => cores.clone(),
        None => Box::new([apic::id()]),
    };
    let node = Node::standalone(apic_ids.len());
    let platform: &'static NativePlatform = Box::leak(Box::new(NativePlatform {
        apic_ids: apic_ids.clone(),
    }));
    start_node(node, platform).map_err(NativeError::Event)?;
    // The other cores are halted in `run_other_core`: let them in.
    NODE.call_once(|| node);
    for &id in &apic_ids[1..] {
        apic::send_wake(id);
    }
    let on_interrupt = InterruptHook::default();
    let hook = Rc::clone(&on_interrupt);
    let init: Box<dyn FnOnce()> = Box::new(move || {
        net::install(0, &options, &hook);
        if let Some(crash) = options.crash {
            ebb_event::spawn(move || crash::crash_now(crash));
        }
        main();
    });
    let code = run_core(
        CoreId(0),
        node,
        Box::new(NativeCore {
            on_interrupt,
            apic_id: apic::id(),
        }),
        Some(init),
    )
    .map_err(NativeError::Event)?;
    if options.verbose {
        net::report();
    }
    net::report_queues();
    Ok(code)
}

/// The rest of the life of core `core` (not 0), after its CPU setup:
/// waits until [`run`] starts the node, then runs its event loop until
/// the node shuts down, then halts for good (core 0 ends QEMU).
pub fn run_other_core(core: usize) -> ! {
    let node = loop {
        if let Some(node) = NODE.get() {
            break *node;
        }
        smp::halt_until_interrupt();
    };
    let on_interrupt = InterruptHook::default();
    let hook = Rc::clone(&on_interrupt);
    let options = options();
    let init: Box<dyn FnOnce()> = Box::new(move || net::install(core, &options, &hook));
    let driver = Box::new(NativeCore {
        on_interrupt,
        apic_id: apic::id(),
    });
    if let Err(error) = run_core(CoreId(core), node, driver, Some(init)) {
        log::error!("core {core} cannot run its event loop: {error}");
    }
    loop {
        // SAFETY: halting with interrupts off stops this core for good.
        unsafe { asm!("cli", "hlt", options(nomem, nostack)) };
    }
}

/// Prints what the platform found at boot (`verbose`).
pub fn describe_boot(info: &StartInfo) {
    let (free, used) = memory::stats();
    if let Some(plan) = paging::plan() {
        let usable: u64 = plan.usable.as_slice().iter().map(|r| r.end - r.start).sum();
        log::debug!(
            "{} MiB usable RAM after the image, identity mapped with {} pages up to {:#x}",
            usable >> 20,
            if plan.huge_pages {
                "1 GiB and 2 MiB"
            } else {
                "2 MiB"
            },
            plan.mapped.end()
        );
    }
    log::debug!(
        "heap: ebb-mem over {} MiB of pages ({} KiB used), TSC {} kHz, LAPIC timer {} ticks/ms, ACPI RSDP at {:#x}",
        (free + used) >> 20,
        used >> 10,
        clock::tsc_khz(),
        apic::ticks_per_ms(),
        info.rsdp
    );
    log::debug!(
        "large allocations: {} KiB mapped in their window",
        crate::mm::large::mapped_bytes() >> 10
    );
    if let Some(cores) = CORES.get() {
        log::debug!("{} cores, LAPIC ids {:?}", cores.len(), cores);
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    x86_64::instructions::interrupts::disable();
    console::emergency(format_args!("\nebbflow: PANIC: {info}\n"));
    cpu::backtrace(None, cpu::current_rbp());
    exit(i32::from(EXIT_PANIC))
}
