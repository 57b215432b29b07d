//! Ethernet II framing (IEEE 802.3 with an EtherType), through smoltcp's
//! `EthernetFrame` view.

use ebb_iobuf::IoBuf;
use smoltcp::wire::{EthernetAddress, EthernetFrame, EthernetProtocol};

use crate::RxError;

/// Length of an Ethernet II header: destination, source, EtherType.
pub const HEADER_LEN: usize = 14;

/// The broadcast address.
pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

/// A parsed Ethernet header with its payload, a view of the frame.
#[derive(Debug)]
pub struct Parsed {
    /// Destination address.
    pub dst: EthernetAddress,
    /// Source address.
    pub src: EthernetAddress,
    /// EtherType.
    pub ethertype: EthernetProtocol,
    /// Everything after the header (a view, not a copy; may include padding).
    pub payload: IoBuf,
}

/// Parses the header of `frame`; accepts frames addressed to `us`, to the
/// broadcast address or (when `us` is `None`) to anyone.
///
/// # Errors
///
/// [`RxError::Truncated`] if the frame is shorter than a header,
/// [`RxError::NotForUs`] if it is unicast to someone else.
pub fn parse(frame: &IoBuf, us: Option<EthernetAddress>) -> Result<Parsed, RxError> {
    let view = EthernetFrame::new_checked(frame.as_slice()).map_err(|_| RxError::Truncated)?;
    let dst = view.dst_addr();
    if let Some(us) = us {
        if dst != us && dst != BROADCAST {
            return Err(RxError::NotForUs);
        }
    }
    let payload = frame.slice(HEADER_LEN..).map_err(|_| RxError::Truncated)?;
    Ok(Parsed {
        dst,
        src: view.src_addr(),
        ethertype: view.ethertype(),
        payload,
    })
}

/// Writes an Ethernet header into `buf` (exactly [`HEADER_LEN`] bytes)
/// through the view's setters.
pub fn emit(
    buf: &mut [u8],
    src: EthernetAddress,
    dst: EthernetAddress,
    ethertype: EthernetProtocol,
) {
    let mut view = EthernetFrame::new_unchecked(buf);
    view.set_dst_addr(dst);
    view.set_src_addr(src);
    view.set_ethertype(ethertype);
}
