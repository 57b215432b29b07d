//! Adding a program built here to the cached guest image without
//! rebuilding it: the kernel unpacks an initramfs made of several
//! concatenated compressed cpio archives, the later ones adding files
//! (`Documentation/driver-api/early-userspace/buffer-format.rst`), so the
//! overlay is a second gzip member appended to a copy of `initrd.gz`.
//!
//! Used for Ebbflow's hosted netpipe application, so that the Linux guest
//! can serve the same ping-pong and sink as our native image, and for any
//! hosted program with its own start script ([`with_program`]).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use super::cpio::CpioWriter;
use super::debian::run_captured;
use super::image::GuestImage;
use super::init::{init_script, NETPIPE_BINARY, PROGRAM_BINARY, PROGRAM_SCRIPT};
use super::libs::parse_ld_list;

/// The shared libraries the image carries (its manifest's `library` lines).
pub fn image_libraries(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .filter_map(|line| line.strip_prefix("library "))
        .map(str::to_owned)
        .collect()
}

/// The modules the image loads, in order (its manifest's `modules` line).
pub fn image_modules(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .find_map(|line| line.strip_prefix("modules "))
        .map(|names| names.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The libraries `needed` (as `ldd` names them) that `carried` lacks; the
/// vDSO needs no file.
pub fn missing_libraries(needed: &[String], carried: &[String]) -> Vec<String> {
    needed
        .iter()
        .filter(|name| !carried.contains(name))
        .cloned()
        .collect()
}

/// `image` with the netpipe binary `program` added at `/usr/bin/netpipe`:
/// the initrd `initrd-netpipe.gz` next to the image's, made anew on every
/// call (it is cheap, and the program changes with the code).
pub fn with_netpipe(image: &GuestImage, program: &Path) -> Result<GuestImage, String> {
    overlay(image, "netpipe", (NETPIPE_BINARY, program), None)
}

/// `image` with the hosted program `program` at `/usr/bin/ebb-program`
/// and `script` (a shell script that starts it: `exec /usr/bin/ebb-program
/// ARGS...`) at `/usr/bin/ebb-program.sh`, which `/init` runs for
/// [`super::GuestService::Program`]: the initrd `initrd-NAME.gz` next to
/// the image's, made anew on every call.
pub fn with_program(
    image: &GuestImage,
    name: &str,
    program: &Path,
    script: &str,
) -> Result<GuestImage, String> {
    overlay(
        image,
        name,
        (PROGRAM_BINARY, program),
        Some((PROGRAM_SCRIPT, script)),
    )
}

/// A copy of `image`'s initrd, `initrd-NAME.gz`, with `program` (its
/// path in the image, the file here) and `script` appended; the program's
/// shared libraries must be in the image. The overlay carries this code's
/// `/init` too, so that an image cached before a service was added knows
/// it.
fn overlay(
    image: &GuestImage,
    name: &str,
    (path, program): (&str, &Path),
    script: Option<(&str, &str)>,
) -> Result<GuestImage, String> {
    overlay_files(image, name, &[(path, program)], script)
}

/// `image` with the Linux programs `programs` (each: its path in the
/// image, the file here) and `script` at `/usr/bin/ebb-program.sh`, which
/// `/init` runs once for [`super::GuestService::Batch`]: the initrd
/// `initrd-NAME.gz` next to the image's, made anew on every call.
pub fn with_batch(
    image: &GuestImage,
    name: &str,
    programs: &[(&str, &Path)],
    script: &str,
) -> Result<GuestImage, String> {
    overlay_files(image, name, programs, Some((PROGRAM_SCRIPT, script)))
}

/// A copy of `image`'s initrd with `programs` and `script` appended (see
/// [`overlay`]).
fn overlay_files(
    image: &GuestImage,
    name: &str,
    programs: &[(&str, &Path)],
    script: Option<(&str, &str)>,
) -> Result<GuestImage, String> {
    let manifest = std::fs::read_to_string(&image.manifest)
        .map_err(|e| format!("cannot read {}: {e}", image.manifest.display()))?;
    let mut cpio = CpioWriter::new();
    cpio.file(
        "init",
        0o755,
        init_script(&image_modules(&manifest)).as_bytes(),
    );
    for &(path, program) in programs {
        let listing = run_captured(Command::new("ldd").arg(program))?;
        let needed: Vec<String> = parse_ld_list(&listing)
            .into_iter()
            .map(|lib| lib.name)
            .collect();
        let missing = missing_libraries(&needed, &image_libraries(&manifest));
        if !missing.is_empty() {
            return Err(format!(
                "{} needs {} which the guest image lacks (rebuild it: ./ebb bench linux-guest -- --rebuild)",
                program.display(),
                missing.join(", ")
            ));
        }
        cpio.file(
            path,
            0o755,
            &std::fs::read(program)
                .map_err(|e| format!("cannot read {}: {e}", program.display()))?,
        );
    }
    if let Some((path, script)) = script {
        cpio.file(path, 0o755, script.as_bytes());
    }
    let mut initrd = std::fs::read(&image.initrd)
        .map_err(|e| format!("cannot read {}: {e}", image.initrd.display()))?;
    initrd.extend(gzip(&cpio.finish())?);
    let path = image.initrd.with_file_name(format!("initrd-{name}.gz"));
    std::fs::write(&path, initrd).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(GuestImage {
        initrd: path,
        ..image.clone()
    })
}

/// `data` compressed by `gzip -n`.
fn gzip(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut child = Command::new("gzip")
        .args(["-n", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run gzip: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = data.to_vec();
    // Written from another thread: gzip's output pipe could fill up first.
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().map_err(|e| format!("gzip: {e}"))?;
    writer
        .join()
        .map_err(|_| "the gzip writer panicked".to_owned())?
        .map_err(|e| format!("writing to gzip: {e}"))?;
    if !out.status.success() {
        return Err(format!("gzip failed ({})", out.status));
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_are_compared_with_the_manifest() {
        let manifest = "built x\npackage libc6 2.36\nlibrary libc.so.6\nlibrary libgcc_s.so.1\n\
                        library /lib64/ld-linux-x86-64.so.2\n";
        assert_eq!(image_modules(manifest), Vec::<String>::new());
        assert_eq!(
            image_modules("built x\nmodules virtio_ring virtio virtio_net\n"),
            ["virtio_ring", "virtio", "virtio_net"]
        );
        let carried = image_libraries(manifest);
        assert_eq!(
            carried,
            ["libc.so.6", "libgcc_s.so.1", "/lib64/ld-linux-x86-64.so.2"]
        );
        let needed = [
            "libgcc_s.so.1",
            "libc.so.6",
            "libm.so.6",
            "/lib64/ld-linux-x86-64.so.2",
        ]
        .map(String::from);
        assert_eq!(missing_libraries(&needed, &carried), ["libm.so.6"]);
    }

    #[test]
    fn gzip_output_is_a_gzip_member() {
        let packed = gzip(b"hello").expect("gzip");
        assert_eq!(&packed[..2], [0x1f, 0x8b]);
    }
}
