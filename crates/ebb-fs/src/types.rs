//! What the interface speaks in: an open file, how it is opened, what a
//! path is.

use alloc::string::String;
use core::fmt;

/// An open file, valid for the one who opened it on the file system that
/// gave it (a remote file system's handles are per node).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Handle(pub u32);

impl fmt::Display for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "handle {}", self.0)
    }
}

/// How a file is opened: open(2)'s flags, as bits of their own (each
/// backend maps them to what it has; the wire carries these bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFlags(u32);

impl OpenFlags {
    /// For reading.
    pub const READ: OpenFlags = OpenFlags(1);
    /// For writing.
    pub const WRITE: OpenFlags = OpenFlags(2);
    /// Create it if missing (O_CREAT).
    pub const CREATE: OpenFlags = OpenFlags(4);
    /// Cut it to zero length (O_TRUNC).
    pub const TRUNCATE: OpenFlags = OpenFlags(8);
    /// Every write goes to the end (O_APPEND).
    pub const APPEND: OpenFlags = OpenFlags(16);
    /// With [`OpenFlags::CREATE`]: fail if it exists (O_EXCL).
    pub const EXCLUSIVE: OpenFlags = OpenFlags(32);
    /// Every bit this version knows.
    pub const ALL: u32 = 63;

    /// The bits, if they are valid: only known bits, and read or write.
    #[must_use]
    pub fn from_bits(bits: u32) -> Option<OpenFlags> {
        let valid = bits & !Self::ALL == 0 && bits & (Self::READ.0 | Self::WRITE.0) != 0;
        valid.then_some(OpenFlags(bits))
    }

    /// The bits.
    #[must_use]
    pub fn bits(self) -> u32 {
        self.0
    }

    /// Whether every bit of `other` is set.
    #[must_use]
    pub fn contains(self, other: OpenFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for OpenFlags {
    type Output = OpenFlags;

    fn bitor(self, other: OpenFlags) -> OpenFlags {
        OpenFlags(self.0 | other.0)
    }
}

/// What a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only in directory listings: stat follows them).
    Symlink,
    /// A FIFO, socket, device, or a kind the backend did not say.
    Other,
}

/// What stat says of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Its kind.
    pub kind: FileKind,
    /// Its permission bits (0o7777).
    pub mode: u32,
    /// Its size in bytes.
    pub size: u64,
    /// Last modified: seconds since the Unix epoch (0 where the backend
    /// keeps no times, as the in-memory file system).
    pub modified_secs: i64,
    /// And nanoseconds (under 10⁹).
    pub modified_nanos: u32,
}

/// One entry of a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Its name (never `.` or `..`).
    pub name: String,
    /// Its kind (a symlink is listed as one).
    pub kind: FileKind,
}
