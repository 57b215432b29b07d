//! The Internet checksum (RFC 1071), over slices and across the segments of
//! an [`IoChain`], so that a header buffer chained in front of payload
//! buffers can be checksummed without gathering the bytes into one place.

use core::net::Ipv4Addr;

use ebb_iobuf::IoChain;

/// A running one's-complement sum (RFC 1071 §4.1) that accepts data in
/// pieces of any length: an odd byte at the end of one piece pairs with the
/// first byte of the next, as if the pieces were contiguous.
#[derive(Clone, Copy, Debug, Default)]
pub struct Checksum {
    sum: u64,
    odd: Option<u8>,
}

impl Checksum {
    /// An empty sum.
    #[must_use]
    pub const fn new() -> Self {
        Checksum { sum: 0, odd: None }
    }

    /// Adds `data`, continuing where the previous piece ended.
    pub fn add(&mut self, mut data: &[u8]) {
        if let Some(high) = self.odd.take() {
            match data.split_first() {
                Some((&low, rest)) => {
                    self.sum += u64::from(u16::from_be_bytes([high, low]));
                    data = rest;
                }
                None => {
                    self.odd = Some(high);
                    return;
                }
            }
        }
        let mut words = data.chunks_exact(2);
        for word in &mut words {
            self.sum += u64::from(u16::from_be_bytes([word[0], word[1]]));
        }
        if let [last] = words.remainder() {
            self.odd = Some(*last);
        }
    }

    /// Adds every segment of `chain`.
    pub fn add_chain(&mut self, chain: &IoChain) {
        for segment in chain.segments() {
            self.add(segment);
        }
    }

    /// Adds the IPv4 pseudo-header of UDP (RFC 768) and TCP: source,
    /// destination, zero, protocol and the upper-layer length.
    pub fn add_pseudo_header(&mut self, src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: u16) {
        let mut header = [0u8; 12];
        header[0..4].copy_from_slice(&src.octets());
        header[4..8].copy_from_slice(&dst.octets());
        header[9] = protocol;
        header[10..12].copy_from_slice(&len.to_be_bytes());
        // The pseudo-header is 12 bytes: it never leaves an odd byte behind,
        // but it must be added on an even boundary.
        debug_assert!(self.odd.is_none());
        self.add(&header);
    }

    /// The folded one's-complement sum, not yet complemented.
    #[must_use]
    pub fn sum(&self) -> u16 {
        let mut sum = self.sum;
        if let Some(high) = self.odd {
            sum += u64::from(u16::from_be_bytes([high, 0]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        u16::try_from(sum).unwrap_or(0xffff)
    }

    /// The checksum to put in a header: the complement of [`sum`](Self::sum).
    #[must_use]
    pub fn finish(&self) -> u16 {
        !self.sum()
    }

    /// Whether data that includes its own checksum field sums correctly
    /// (to all ones).
    #[must_use]
    pub fn verifies(&self) -> bool {
        self.sum() == 0xffff
    }
}

/// The folded, uncomplemented sum of the IPv4 pseudo-header: what a
/// partial TCP or UDP checksum field holds for a device that completes it
/// ([`crate::device::ChecksumCapabilities::tx_partial`]).
#[must_use]
pub fn pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: u16) -> u16 {
    let mut sum = Checksum::new();
    sum.add_pseudo_header(src, dst, protocol, len);
    sum.sum()
}

/// Where the partial checksum of an Ethernet frame carrying IPv4 TCP or
/// UDP is: the offset of the transport header in the frame and of the
/// checksum field in that header — virtio-net's `csum_start` and
/// `csum_offset` (virtio 1.2 §5.1.6.2). `None` for other frames, or if
/// `headers` (the frame's first bytes) ends before the checksum field.
#[must_use]
pub fn partial_offsets(headers: &[u8]) -> Option<(usize, usize)> {
    const ETHERNET: usize = 14;
    let ip = headers.get(ETHERNET..)?;
    if headers[12..14] != [0x08, 0x00] || ip.len() < 20 || ip[0] >> 4 != 4 {
        return None;
    }
    let start = ETHERNET + usize::from(ip[0] & 0x0f) * 4;
    let offset = match ip[9] {
        6 => 16,
        17 => 6,
        _ => return None,
    };
    (start >= ETHERNET + 20 && headers.len() >= start + offset + 2).then_some((start, offset))
}

/// Completes the partial TCP or UDP checksum of `frame` in software, as a
/// device with transmit checksum offload does: sums from the transport
/// header to the end (the field holds the pseudo-header sum) and stores
/// the complement. Returns whether the frame had one to complete.
pub fn complete_partial(frame: &mut [u8]) -> bool {
    let Some((start, offset)) = partial_offsets(frame) else {
        return false;
    };
    let mut sum = Checksum::new();
    sum.add(&frame[start..]);
    let mut checksum = sum.finish();
    // RFC 768: a UDP checksum that computes to zero is sent as all ones.
    if checksum == 0 && offset == 6 {
        checksum = 0xffff;
    }
    frame[start + offset..start + offset + 2].copy_from_slice(&checksum.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_iobuf::IoBuf;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        let mut c = Checksum::new();
        c.add(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]);
        assert_eq!(c.sum(), 0xddf2);
    }

    #[test]
    fn pieces_of_odd_length_sum_like_one_slice() {
        let data: alloc::vec::Vec<u8> = (0..=255u8).cycle().take(301).collect();
        let mut whole = Checksum::new();
        whole.add(&data);
        for cut in [1, 3, 100, 299] {
            let mut chain = IoChain::new();
            chain.push_back(IoBuf::copy_from_slice(&data[..cut]));
            chain.push_back(IoBuf::copy_from_slice(&data[cut..cut + 1]));
            chain.push_back(IoBuf::copy_from_slice(&data[cut + 1..]));
            let mut pieces = Checksum::new();
            pieces.add_chain(&chain);
            assert_eq!(pieces.sum(), whole.sum(), "cut at {cut}");
        }
    }
}
