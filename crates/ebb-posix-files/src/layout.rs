//! The structures Linux x86_64 fills for the files group: `struct stat`
//! (`arch/x86/include/uapi/asm/stat.h`, 144 bytes) and `struct
//! linux_dirent64` (getdents64(2)), written as bytes.

use ebb_posix::errno::EINVAL;

/// What a `struct stat` says, here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFields {
    /// The device number.
    pub dev: u64,
    /// The inode number.
    pub ino: u64,
    /// The type bits (`S_IFREG`, `S_IFDIR`, `S_IFCHR`) and permissions.
    pub mode: u32,
    /// Links.
    pub nlink: u64,
    /// Size in bytes.
    pub size: u64,
}

/// `S_IFREG`, `S_IFDIR`, `S_IFCHR` (inode(7)).
pub const S_IFREG: u32 = 0o100_000;
/// A directory.
pub const S_IFDIR: u32 = 0o040_000;
/// A character device (the standard streams: the console).
pub const S_IFCHR: u32 = 0o020_000;
/// A socket.
pub const S_IFSOCK: u32 = 0o140_000;
/// A pipe (FIFO).
pub const S_IFIFO: u32 = 0o010_000;

/// The size of `struct stat`.
pub const STAT_SIZE: usize = 144;

/// `fields` as a `struct stat`: uid/gid 0, times 0, blocks of 512
/// bytes rounded up, I/O block size 4096.
#[must_use]
pub fn stat_bytes(fields: &StatFields) -> [u8; STAT_SIZE] {
    let mut out = [0u8; STAT_SIZE];
    out[0..8].copy_from_slice(&fields.dev.to_le_bytes());
    out[8..16].copy_from_slice(&fields.ino.to_le_bytes());
    out[16..24].copy_from_slice(&fields.nlink.to_le_bytes());
    out[24..28].copy_from_slice(&fields.mode.to_le_bytes());
    out[48..56].copy_from_slice(&fields.size.to_le_bytes());
    out[56..64].copy_from_slice(&4096u64.to_le_bytes());
    out[64..72].copy_from_slice(&fields.size.div_ceil(512).to_le_bytes());
    out
}

/// `d_type` values (dirent.h).
pub const DT_DIR: u8 = 4;
/// A regular file.
pub const DT_REG: u8 = 8;

/// Appends one `linux_dirent64` for `name` to `out` at `used`: the
/// record's length, or `None` when it does not fit. `next` is `d_off`, the
/// position of the entry after it.
pub fn put_dirent(
    out: &mut [u8],
    used: usize,
    ino: u64,
    next: u64,
    kind: u8,
    name: &[u8],
) -> Option<usize> {
    // d_ino 8, d_off 8, d_reclen 2, d_type 1, the name and its NUL,
    // padded to 8 bytes.
    let len = (19 + name.len() + 1).next_multiple_of(8);
    let record = out.get_mut(used..used + len)?;
    record.fill(0);
    record[0..8].copy_from_slice(&ino.to_le_bytes());
    record[8..16].copy_from_slice(&next.to_le_bytes());
    record[16..18].copy_from_slice(&u16::try_from(len).ok()?.to_le_bytes());
    record[18] = kind;
    record[19..19 + name.len()].copy_from_slice(name);
    Some(len)
}

/// getdents64's answer when not even one entry fits the buffer.
pub const TOO_SMALL: isize = EINVAL;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_puts_each_field_at_its_offset() {
        let bytes = stat_bytes(&StatFields {
            dev: 1,
            ino: 7,
            mode: S_IFREG | 0o644,
            nlink: 1,
            size: 1000,
        });
        assert_eq!(bytes[8], 7);
        assert_eq!(
            u32::from_le_bytes(bytes[24..28].try_into().unwrap()),
            0o100_644
        );
        assert_eq!(u64::from_le_bytes(bytes[48..56].try_into().unwrap()), 1000);
        assert_eq!(u64::from_le_bytes(bytes[64..72].try_into().unwrap()), 2);
    }

    #[test]
    fn dirents_are_padded_and_refused_when_they_do_not_fit() {
        let mut out = [0xffu8; 48];
        assert_eq!(put_dirent(&mut out, 0, 3, 1, DT_REG, b"abc"), Some(24));
        assert_eq!(u16::from_le_bytes([out[16], out[17]]), 24);
        assert_eq!(&out[19..23], b"abc\0");
        assert_eq!(
            put_dirent(&mut out, 24, 4, 2, DT_DIR, b"a-longer-name"),
            None
        );
    }
}
