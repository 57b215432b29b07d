//! Size classes of the general-purpose allocator.
//!
//! Eight classes 8, 16, ..., 64 bytes, then four per power of two
//! (`2^k * {1.25, 1.5, 1.75, 2}`) up to [`MAX_SMALL`] = 32 KiB: 44 classes,
//! at most 25% internal fragmentation above 64 bytes (jemalloc and mimalloc
//! use the same spacing). Each class is served by a slab allocator whose slab
//! size is a power of two of at least 64 KiB, chosen per class in
//! [`SLAB_ORDER`].
//!
//! The lookup is a table for the common case (`size <= 1024`, `align <= 8`)
//! and arithmetic otherwise. All functions are `const fn`, so when the layout
//! is known at compile time ([`ClassOf`]) the class is too; when inlined with
//! a constant `Layout`, the table load folds away as well.

use crate::PAGE_SIZE;

/// Number of size classes.
pub const NUM_CLASSES: usize = 44;
/// The largest request (in bytes) served by a slab allocator.
pub const MAX_SMALL: usize = 32 * 1024;
/// Minimum alignment of every object (all class sizes are multiples of it).
pub const MIN_ALIGN: usize = 8;
/// Bytes reserved at the start of each slab for its header.
pub const SLAB_HEADER_BYTES: usize = 128;

/// Size in bytes of class `i`.
pub const CLASS_SIZE: [usize; NUM_CLASSES] = {
    let mut t = [0usize; NUM_CLASSES];
    let mut i = 0;
    while i < 8 {
        t[i] = 8 * (i + 1);
        i += 1;
    }
    let mut k = 6;
    while i < NUM_CLASSES {
        let mut j = 1;
        while j <= 4 {
            t[i] = (1 << k) + j * (1 << (k - 2));
            i += 1;
            j += 1;
        }
        k += 1;
    }
    t
};

/// Slab size of each class, as a page order: slabs are `PAGE_SIZE << order`
/// bytes, at least 64 KiB and large enough for about eight objects.
pub const SLAB_ORDER: [usize; NUM_CLASSES] = {
    let mut t = [0usize; NUM_CLASSES];
    let mut i = 0;
    while i < NUM_CLASSES {
        let mut order = 4; // 64 KiB
        while (PAGE_SIZE << order) < 8 * CLASS_SIZE[i] {
            order += 1;
        }
        t[i] = order;
        i += 1;
    }
    t
};

/// Alignment every object of class `i` has: the largest power of two
/// dividing its size, capped at the page size (objects sit at
/// `first_offset + n * size` from a slab base aligned to at least 64 KiB).
pub const CLASS_ALIGN: [usize; NUM_CLASSES] = {
    let mut t = [0usize; NUM_CLASSES];
    let mut i = 0;
    while i < NUM_CLASSES {
        let low = 1usize << CLASS_SIZE[i].trailing_zeros();
        t[i] = if low > PAGE_SIZE { PAGE_SIZE } else { low };
        i += 1;
    }
    t
};

/// Offset of the first object in a slab of class `i`.
pub const FIRST_OFFSET: [usize; NUM_CLASSES] = {
    let mut t = [0usize; NUM_CLASSES];
    let mut i = 0;
    while i < NUM_CLASSES {
        let a = CLASS_ALIGN[i];
        t[i] = SLAB_HEADER_BYTES.div_ceil(a) * a;
        i += 1;
    }
    t
};

/// Objects per slab of class `i`.
pub const CAPACITY: [usize; NUM_CLASSES] = {
    let mut t = [0usize; NUM_CLASSES];
    let mut i = 0;
    while i < NUM_CLASSES {
        t[i] = ((PAGE_SIZE << SLAB_ORDER[i]) - FIRST_OFFSET[i]) / CLASS_SIZE[i];
        i += 1;
    }
    t
};

/// Class of every size up to 1024 bytes, indexed by `(size + 7) / 8`.
static SMALL_LOOKUP: [u8; 129] = {
    let mut t = [0u8; 129];
    let mut i = 0;
    while i < 129 {
        let c = class_of_size(if i == 0 { 1 } else { i * 8 });
        // Class indices are below NUM_CLASSES = 44: they fit a byte.
        #[allow(clippy::cast_possible_truncation)]
        let c = match c {
            Some(c) => c as u8,
            None => 0,
        };
        t[i] = c;
        i += 1;
    }
    t
};

/// The smallest class that holds `size` bytes (alignment 8), if any.
pub const fn class_of_size(size: usize) -> Option<usize> {
    if size <= 64 {
        return Some(if size == 0 { 0 } else { (size - 1) / 8 });
    }
    if size > MAX_SMALL {
        return None;
    }
    // 2^k < size <= 2^(k+1); classes in that range are 2^k + j * 2^(k-2).
    let k = (usize::BITS - 1 - (size - 1).leading_zeros()) as usize;
    let step = 1usize << (k - 2);
    let j = (size - (1 << k)).div_ceil(step);
    Some(8 + (k - 6) * 4 + (j - 1))
}

/// The class serving a request of `size` bytes aligned to `align`, or `None`
/// when it must go to a virtual region (too big, or aligned beyond a page).
#[inline(always)]
pub fn class_for(size: usize, align: usize) -> Option<usize> {
    if align <= MIN_ALIGN && size <= 1024 {
        return Some(SMALL_LOOKUP[size.div_ceil(8)] as usize);
    }
    class_for_aligned(size, align)
}

/// [`class_for`] without the table: usable in constant evaluation.
pub const fn class_for_aligned(size: usize, align: usize) -> Option<usize> {
    if align > PAGE_SIZE {
        return None;
    }
    let size = if size == 0 { 1 } else { size };
    let rounded = match size.checked_add(align - 1) {
        Some(s) => s / align * align,
        None => return None,
    };
    let mut c = match class_of_size(rounded) {
        Some(c) => c,
        None => return None,
    };
    while c < NUM_CLASSES && CLASS_ALIGN[c] < align {
        c += 1;
    }
    if c < NUM_CLASSES {
        Some(c)
    } else {
        None
    }
}

/// The bytes an allocation of `size` bytes aligned to `align` really takes
/// from memory: its class's size when a slab serves it, otherwise the
/// virtual region's pages (the size rounded up to whole pages, plus the
/// leading page that holds the region's header, or the alignment if larger:
/// see `vmem::AddressSpace::reserve`). Zero bytes take nothing (Rust does
/// not allocate them). For callers that charge memory to a budget as the
/// allocator will use it (memcached's `-m`).
pub const fn footprint(size: usize, align: usize) -> usize {
    if size == 0 {
        return 0;
    }
    match class_for_aligned(size, align) {
        Some(class) => CLASS_SIZE[class],
        None => {
            let lead = if align > PAGE_SIZE { align } else { PAGE_SIZE };
            size.div_ceil(PAGE_SIZE)
                .saturating_mul(PAGE_SIZE)
                .saturating_add(lead)
        }
    }
}

/// The class of a type, computed at compile time.
///
/// `ClassOf::<T>::CLASS` is a constant: typed allocation
/// ([`crate::GeneralPurposeAllocator::alloc_typed`]) uses it so that no size
/// arithmetic happens at run time.
pub struct ClassOf<T>(core::marker::PhantomData<T>);

impl<T> ClassOf<T> {
    /// The size class of `T`, or `None` if `T` is served by virtual regions.
    pub const CLASS: Option<usize> =
        class_for_aligned(core::mem::size_of::<T>(), core::mem::align_of::<T>());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprint_is_the_class_or_the_pages_with_their_header() {
        assert_eq!(footprint(0, 1), 0);
        assert_eq!(footprint(10, 1), 16);
        assert_eq!(footprint(65, 8), 80);
        assert_eq!(footprint(MAX_SMALL, 8), MAX_SMALL);
        // A virtual region: whole pages and the header's page.
        assert_eq!(footprint(MAX_SMALL + 1, 8), MAX_SMALL + 2 * PAGE_SIZE);
        assert_eq!(footprint(1_000_000, 1), 245 * PAGE_SIZE + PAGE_SIZE);
    }

    #[test]
    fn classes_are_increasing_and_cover_max() {
        for i in 1..NUM_CLASSES {
            assert!(CLASS_SIZE[i] > CLASS_SIZE[i - 1]);
        }
        assert_eq!(CLASS_SIZE[NUM_CLASSES - 1], MAX_SMALL);
    }

    #[test]
    fn smallest_fitting_class() {
        for size in 0..=MAX_SMALL + 1 {
            let c = class_of_size(size);
            if size > MAX_SMALL {
                assert_eq!(c, None);
                continue;
            }
            let c = c.unwrap();
            assert!(CLASS_SIZE[c] >= size, "size {size}");
            assert!(c == 0 || CLASS_SIZE[c - 1] < size.max(1), "size {size}");
            assert_eq!(class_for(size, 1), Some(c));
            assert_eq!(class_for(size, 8), Some(c));
        }
    }

    #[test]
    fn aligned_classes_respect_alignment() {
        let mut align = 1;
        while align <= 2 * PAGE_SIZE {
            for size in [
                0, 1, 7, 8, 24, 100, 1000, 4000, 4096, 5000, 20000, MAX_SMALL,
            ] {
                match class_for(size, align) {
                    Some(c) => {
                        assert!(CLASS_SIZE[c] >= size);
                        assert!(CLASS_ALIGN[c] >= align);
                        assert_eq!(FIRST_OFFSET[c] % align, 0);
                    }
                    None => assert!(align > PAGE_SIZE || size.next_multiple_of(align) > MAX_SMALL),
                }
            }
            align *= 2;
        }
    }

    #[test]
    fn slabs_hold_several_objects() {
        for (c, &cap) in CAPACITY.iter().enumerate() {
            assert!(cap >= 7, "class {c}");
            assert!(cap <= u32::MAX as usize);
        }
        assert_eq!(ClassOf::<u64>::CLASS, Some(0));
        assert_eq!(ClassOf::<[u8; 40000]>::CLASS, None);
    }
}
