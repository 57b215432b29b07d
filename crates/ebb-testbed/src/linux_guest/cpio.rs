//! Writer for the cpio "newc" format, the one the Linux kernel unpacks as an
//! initramfs (`Documentation/driver-api/early-userspace/buffer-format.rst`).
//!
//! Writing the archive ourselves, rather than running `cpio`, lets the image
//! hold root-owned files and device nodes (`/dev/console`) without building it
//! as root, and needs no extra host package.

/// File-type bits of `st_mode` (`<sys/stat.h>`).
const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;
const S_IFCHR: u32 = 0o020_000;

/// The magic of the "new ASCII" format without checksums.
const MAGIC: &str = "070701";
/// The name of the entry that ends an archive.
const TRAILER: &str = "TRAILER!!!";

/// An archive being built in memory; entries are owned by root (uid 0,
/// gid 0) and have modification time 0, so the same inputs give the same
/// bytes.
#[derive(Debug, Default)]
pub struct CpioWriter {
    out: Vec<u8>,
    next_inode: u32,
}

impl CpioWriter {
    /// An empty archive.
    pub fn new() -> Self {
        CpioWriter {
            out: Vec::new(),
            next_inode: 1,
        }
    }

    /// Adds a directory (`path` without a leading `/`, e.g. `"usr/bin"`);
    /// `permissions` such as `0o755`.
    pub fn directory(&mut self, path: &str, permissions: u32) {
        self.entry(path, S_IFDIR | permissions, 2, (0, 0), &[]);
    }

    /// Adds a regular file with `data`.
    pub fn file(&mut self, path: &str, permissions: u32, data: &[u8]) {
        self.entry(path, S_IFREG | permissions, 1, (0, 0), data);
    }

    /// Adds a symbolic link at `path` pointing to `target`.
    pub fn symlink(&mut self, path: &str, target: &str) {
        self.entry(path, S_IFLNK | 0o777, 1, (0, 0), target.as_bytes());
    }

    /// Adds a character device node with the device numbers `major:minor`.
    pub fn char_device(&mut self, path: &str, permissions: u32, major: u32, minor: u32) {
        self.entry(path, S_IFCHR | permissions, 1, (major, minor), &[]);
    }

    /// Ends the archive with the trailer entry and returns its bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.header(TRAILER, 0, 1, (0, 0), 0, 0);
        self.out
    }

    fn entry(&mut self, path: &str, mode: u32, links: u32, rdev: (u32, u32), data: &[u8]) {
        let inode = self.next_inode;
        self.next_inode += 1;
        let size = u32::try_from(data.len()).expect("a cpio newc member is below 4 GiB");
        self.header(path.trim_start_matches('/'), mode, links, rdev, size, inode);
        self.out.extend_from_slice(data);
        self.pad();
    }

    /// The 110-byte header (13 eight-digit hex fields after the magic), the
    /// NUL-terminated name, and padding to a multiple of four bytes.
    fn header(
        &mut self,
        name: &str,
        mode: u32,
        links: u32,
        rdev: (u32, u32),
        size: u32,
        inode: u32,
    ) {
        let name_size = u32::try_from(name.len() + 1).expect("a short name");
        let fields = [
            inode, mode, 0, // uid
            0, // gid
            links, 0, // mtime
            size, 0, // devmajor
            0, // devminor
            rdev.0, rdev.1, name_size, 0, // check
        ];
        self.out.extend_from_slice(MAGIC.as_bytes());
        for field in fields {
            self.out
                .extend_from_slice(format!("{field:08x}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.out.len().is_multiple_of(4) {
            self.out.push(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One member parsed back: (name, mode, rdev major, rdev minor, data).
    type Member = (String, u32, u32, u32, Vec<u8>);

    /// A minimal newc reader, to check the writer against the format.
    fn parse(mut bytes: &[u8]) -> Vec<Member> {
        let mut members = Vec::new();
        let align = |n: usize| n.div_ceil(4) * 4;
        loop {
            assert_eq!(&bytes[..6], MAGIC.as_bytes());
            let field = |i: usize| {
                let text = std::str::from_utf8(&bytes[6 + 8 * i..14 + 8 * i]).expect("ascii");
                u32::from_str_radix(text, 16).expect("hex")
            };
            let (mode, size, major, minor, name_size) =
                (field(1), field(6), field(9), field(10), field(11));
            let name_end = 110 + name_size as usize - 1;
            let name = std::str::from_utf8(&bytes[110..name_end])
                .expect("utf-8")
                .to_owned();
            assert_eq!(bytes[name_end], 0, "names end with NUL");
            let data_start = align(110 + name_size as usize);
            let data = bytes[data_start..data_start + size as usize].to_vec();
            bytes = &bytes[align(data_start + size as usize)..];
            if name == TRAILER {
                assert!(bytes.is_empty(), "nothing after the trailer");
                return members;
            }
            members.push((name, mode, major, minor, data));
        }
    }

    #[test]
    fn members_round_trip_with_types_and_alignment() {
        let mut cpio = CpioWriter::new();
        cpio.directory("dev", 0o755);
        cpio.char_device("dev/console", 0o600, 5, 1);
        cpio.file("/init", 0o755, b"#!/bin/sh\n");
        cpio.file("odd", 0o644, b"abcde");
        cpio.symlink("bin/sh", "busybox");
        let bytes = cpio.finish();
        assert_eq!(bytes.len() % 4, 0);
        let members = parse(&bytes);
        let names: Vec<&str> = members.iter().map(|m| m.0.as_str()).collect();
        assert_eq!(names, ["dev", "dev/console", "init", "odd", "bin/sh"]);
        assert_eq!(members[0].1, S_IFDIR | 0o755);
        assert_eq!(
            (members[1].1, members[1].2, members[1].3),
            (S_IFCHR | 0o600, 5, 1)
        );
        assert_eq!(members[2].4, b"#!/bin/sh\n");
        assert_eq!(members[3].4, b"abcde");
        assert_eq!(
            (members[4].1, members[4].4.as_slice()),
            (S_IFLNK | 0o777, &b"busybox"[..])
        );
    }

    #[test]
    fn the_same_inputs_give_the_same_bytes() {
        let build = || {
            let mut cpio = CpioWriter::new();
            cpio.file("a", 0o644, b"x");
            cpio.finish()
        };
        assert_eq!(build(), build());
        assert_eq!(parse(&CpioWriter::new().finish()), Vec::<Member>::new());
    }
}
