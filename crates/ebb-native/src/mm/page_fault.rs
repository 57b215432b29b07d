//! `mm`'s page-fault handler, which the boot sequence registers with
//! `arch` (`cpu::set_page_fault_handler`): a first touch of a demand-zero
//! region is resolved; a fault in the regions' area or in the large
//! allocations' window is fatal, and says what the address is.

use ebb_mem::vmem::FaultError;

use crate::arch::x86_64::cpu::PageFaultOutcome;
use crate::mm::large;
use crate::mm::regions::{self, PageFault};

/// Called by the page-fault handler (interrupts off) with CR2 and whether
/// the access was a write.
pub fn handle(address: u64, write: bool) -> PageFaultOutcome {
    match regions::page_fault(address, write) {
        PageFault::Resolved => PageFaultOutcome::Resolved,
        PageFault::Fatal(FaultError::GuardPage) => {
            PageFaultOutcome::Fatal("in the guard page of a virtual region")
        }
        PageFault::Fatal(FaultError::Unmapped) => {
            PageFaultOutcome::Fatal("in the regions' area but in no region")
        }
        PageFault::Fatal(FaultError::Denied) => {
            PageFaultOutcome::Fatal("in a region that refused it (or no memory)")
        }
        PageFault::NotARegion if large::contains(address) => PageFaultOutcome::Fatal(
            "in the large allocations' window but in no live allocation (overrun or use after free)",
        ),
        PageFault::NotARegion => PageFaultOutcome::NotMine,
    }
}
