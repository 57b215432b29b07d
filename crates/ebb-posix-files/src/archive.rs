//! Loading a directory the launcher packed into the in-memory file
//! system (issue 18: the native file system is populated at boot from a
//! directory `./ebb run ... --files DIR` packs). The pack is a cpio
//! archive in the "newc" format, the one Linux unpacks as an initramfs
//! (Linux `Documentation/driver-api/early-userspace/buffer-format.rst`):
//! per entry a 110-byte header (`070701` and 13 fields of 8 hex digits),
//! the NUL-terminated name padded to 4 bytes, the data padded to 4 bytes;
//! the entry `TRAILER!!!` ends it.
//!
//! The archive comes from outside the image, so every field is checked:
//! a bad header, a name that climbs out (`..`) or a kind the file system
//! does not hold (only directories and regular files) is an error naming
//! the entry, and nothing after it is loaded.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use ebb_posix::errno::{EEXIST, EFBIG, ENOTDIR};

use crate::memfs::{Kind, MemFs, ROOT};

/// The magic of "newc" (no checksums).
const MAGIC: &[u8; 6] = b"070701";
/// The header: the magic and 13 fields of 8 hex digits.
const HEADER: usize = 6 + 13 * 8;
/// The name of the entry that ends an archive.
const TRAILER: &[u8] = b"TRAILER!!!";
/// File-type bits of `st_mode` (`<sys/stat.h>`).
const S_IFMT: u32 = 0o170_000;
const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
/// Linux's longest path and name (`include/uapi/linux/limits.h`).
const PATH_MAX: usize = 4096;
const NAME_MAX: usize = 255;

/// Why an archive was not loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArchiveError {
    /// The bytes at `offset` are not a newc header.
    BadHeader {
        /// Where the header starts.
        offset: usize,
    },
    /// The archive ends inside the entry starting at `offset`, or has no
    /// trailer.
    Truncated {
        /// Where the entry starts.
        offset: usize,
    },
    /// A name with an empty, `.` or `..` component, or a NUL.
    BadName {
        /// The name, lossily.
        name: String,
    },
    /// An entry that is neither a directory nor a regular file.
    Unsupported {
        /// The name.
        name: String,
        /// Its `st_mode`.
        mode: u32,
    },
    /// The file system refused the entry (errno: e.g. `EEXIST` for a name
    /// given twice, `EFBIG` past the largest file).
    Refused {
        /// The name.
        name: String,
        /// Linux's errno.
        errno: isize,
    },
}

impl fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArchiveError::BadHeader { offset } => {
                write!(
                    f,
                    "the packed files have no cpio newc header at byte {offset}"
                )
            }
            ArchiveError::Truncated { offset } => write!(
                f,
                "the packed files end inside the entry at byte {offset} (no trailer)"
            ),
            ArchiveError::BadName { name } => write!(
                f,
                "the packed files name '{name}', which is empty or has a '.' or '..' component"
            ),
            ArchiveError::Unsupported { name, mode } => write!(
                f,
                "the packed file '{name}' (mode {mode:o}) is neither a directory nor a regular file"
            ),
            ArchiveError::Refused { name, errno } => write!(
                f,
                "the in-memory file system refused the packed '{name}': {}",
                errno_text(*errno)
            ),
        }
    }
}

impl core::error::Error for ArchiveError {}

/// What the file system's refusals mean.
fn errno_text(errno: isize) -> &'static str {
    match errno {
        EEXIST => "the name is given twice (EEXIST)",
        ENOTDIR => "a file stands where a directory is needed (ENOTDIR)",
        EFBIG => "the file is larger than the file system holds (EFBIG)",
        _ => "an error the loader has no words for",
    }
}

/// What an archive held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Directories made.
    pub dirs: usize,
    /// Regular files made.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// One entry of an archive.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Its name as packed (without a leading `./` or `/`).
    pub name: &'a [u8],
    /// Its `st_mode`.
    pub mode: u32,
    /// Its data.
    pub data: &'a [u8],
}

/// The entries of `archive` up to its trailer, each checked as a newc
/// entry (not yet its name or kind).
///
/// # Errors
///
/// [`ArchiveError::BadHeader`] or [`ArchiveError::Truncated`].
pub fn entries(archive: &[u8]) -> Result<Vec<Entry<'_>>, ArchiveError> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let truncated = ArchiveError::Truncated { offset };
        let header = archive
            .get(offset..offset + HEADER)
            .ok_or(truncated.clone())?;
        if &header[..6] != MAGIC {
            return Err(ArchiveError::BadHeader { offset });
        }
        let field = |index: usize| -> Result<usize, ArchiveError> {
            let digits = &header[6 + index * 8..6 + (index + 1) * 8];
            // Hex digits only: `from_str_radix` alone would take a `+`.
            if !digits.iter().all(u8::is_ascii_hexdigit) {
                return Err(ArchiveError::BadHeader { offset });
            }
            let text =
                core::str::from_utf8(digits).map_err(|_| ArchiveError::BadHeader { offset })?;
            let value =
                u32::from_str_radix(text, 16).map_err(|_| ArchiveError::BadHeader { offset })?;
            usize::try_from(value).map_err(|_| ArchiveError::BadHeader { offset })
        };
        // Every field must be hex, even those the file system ignores
        // (inode, owner, times, devices, checksum).
        let mut fields = [0usize; 13];
        for (index, value) in fields.iter_mut().enumerate() {
            *value = field(index)?;
        }
        let (mode, file_size, name_size) = (fields[1], fields[6], fields[11]);
        let name_start = offset + HEADER;
        let name_end = name_start.checked_add(name_size).ok_or(truncated.clone())?;
        let with_nul = archive.get(name_start..name_end).ok_or(truncated.clone())?;
        // The name's size counts its NUL, which must be its last byte.
        let Some((&0, name)) = with_nul.split_last() else {
            return Err(ArchiveError::BadHeader { offset });
        };
        let data_start = name_end.next_multiple_of(4);
        let data_end = data_start.checked_add(file_size).ok_or(truncated.clone())?;
        let data = archive.get(data_start..data_end).ok_or(truncated)?;
        if name == TRAILER {
            return Ok(out);
        }
        let name = name
            .strip_prefix(b"./")
            .or_else(|| name.strip_prefix(b"/"))
            .unwrap_or(name);
        out.push(Entry {
            name,
            mode: u32::try_from(mode).unwrap_or(u32::MAX),
            data,
        });
        offset = data_end.next_multiple_of(4);
    }
}

fn lossy(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// The components of a packed name: `None` for `.` (the root itself),
/// an error for an empty component, `.`, `..`, a NUL, a name longer than
/// Linux's `PATH_MAX` or a component longer than its `NAME_MAX` (which
/// also bounds the work a hostile name can ask for).
fn components(name: &[u8]) -> Result<Option<Vec<&[u8]>>, ArchiveError> {
    if name == b"." {
        return Ok(None);
    }
    if name.len() >= PATH_MAX {
        return Err(ArchiveError::BadName {
            name: lossy(&name[..64]),
        });
    }
    let parts: Vec<&[u8]> = name.split(|&byte| byte == b'/').collect();
    let bad = |part: &&[u8]| {
        part.is_empty()
            || *part == b"."
            || *part == b".."
            || part.contains(&0)
            || part.len() > NAME_MAX
    };
    if parts.iter().any(bad) {
        return Err(ArchiveError::BadName { name: lossy(name) });
    }
    Ok(Some(parts))
}

/// Loads `archive` into `fs` under its root: directories (and any
/// missing parents) and regular files with their permission bits. A
/// directory given again is kept; a file given twice is refused.
///
/// # Errors
///
/// The first bad entry's [`ArchiveError`]; entries before it stay loaded.
pub fn load(fs: &mut MemFs, archive: &[u8]) -> Result<Loaded, ArchiveError> {
    let mut loaded = Loaded::default();
    for entry in entries(archive)? {
        let Some(parts) = components(entry.name)? else {
            // `.`: the root itself, which must be said to be a directory.
            if entry.mode & S_IFMT != S_IFDIR {
                return Err(ArchiveError::Unsupported {
                    name: lossy(entry.name),
                    mode: entry.mode,
                });
            }
            continue;
        };
        let refused = |errno| ArchiveError::Refused {
            name: lossy(entry.name),
            errno,
        };
        let mut dir = ROOT;
        for depth in 1..parts.len() {
            dir = match fs.lookup(&parts[..depth]) {
                Ok(ino) if fs.kind(ino) == Ok(Kind::Dir) => ino,
                Ok(_) => return Err(refused(ENOTDIR)),
                Err(_) => {
                    loaded.dirs += 1;
                    fs.mkdir(dir, parts[depth - 1], 0o755).map_err(refused)?
                }
            };
        }
        let last = parts[parts.len() - 1];
        let permissions = entry.mode & 0o7777;
        match entry.mode & S_IFMT {
            S_IFDIR => match fs.lookup(&parts) {
                Ok(existing) if fs.kind(existing) == Ok(Kind::Dir) => {}
                Ok(_) => return Err(refused(EEXIST)),
                Err(_) => {
                    fs.mkdir(dir, last, permissions).map_err(refused)?;
                    loaded.dirs += 1;
                }
            },
            S_IFREG => {
                let ino = fs.create(dir, last, permissions).map_err(refused)?;
                fs.write_at(ino, 0, entry.data).map_err(refused)?;
                loaded.files += 1;
                loaded.bytes += entry.data.len() as u64;
            }
            _ => {
                return Err(ArchiveError::Unsupported {
                    name: lossy(entry.name),
                    mode: entry.mode,
                })
            }
        }
    }
    Ok(loaded)
}
