//! A C compiler command for programs with their own build system (Redis's
//! Makefile, issue 19): a small shell script that runs gcc against
//! Ebbflow's musl, as `musl-gcc` does for a stock musl, and links static
//! executables with musl and a POSIX personality (hosted, or the
//! user-space stack's). A Makefile takes it as `CC=` and builds
//! unchanged.
//!
//! - Compiling (`-c`, `-S`, `-E`, `-M`, `-MM`): musl's headers only, and
//!   gcc's own (`stdarg.h`, intrinsics), with musl's code generation
//!   flags first, so that the program's own flags win.
//! - Linking: `-static -nostdlib` and the personality's flags, musl's
//!   start files around the program's objects, then musl's `libc.a`,
//!   the personality's libraries and `libgcc.a` in one group (they need
//!   each other).
//! - `-lm`, `-lpthread`, `-ldl`, `-lrt`, `-lutil`, `-lcrypt` and `-lc` are
//!   dropped: musl keeps all of them in `libc.a`, and the linker would
//!   otherwise find glibc's in the host's default paths. `-rdynamic` is
//!   dropped too: a static executable exports nothing.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::c_program::{gcc_print, Personality, ProgramError};
use crate::musl::{MuslBuild, MuslFlags};

/// The libraries musl's `libc.a` holds, and flags a static link ignores.
const DROPPED: &[&str] = &[
    "-lm",
    "-lpthread",
    "-ldl",
    "-lrt",
    "-lutil",
    "-lcrypt",
    "-lc",
    "-rdynamic",
];

/// Writes the compiler command for `musl` and `personality` to `path`
/// (executable); `path` again.
///
/// # Errors
///
/// gcc cannot say where its headers and `libgcc.a` are, or the script
/// cannot be written.
pub fn write_wrapper(
    musl: &MuslBuild,
    personality: &Personality,
    path: &Path,
) -> Result<PathBuf, ProgramError> {
    let gcc_include = gcc_print("-print-file-name=include")?;
    let libgcc = gcc_print("-print-libgcc-file-name")?;
    let script = wrapper_script(&WrapperPaths {
        include: &musl.include_dir,
        gcc_include: Path::new(&gcc_include),
        crt1: &musl.crt1,
        crti: &musl.crti,
        crtn: &musl.crtn,
        libc: &musl.libc_a,
        personality,
        libgcc: Path::new(&libgcc),
    });
    // Written aside and renamed: a build running at the same time never
    // runs a half-written compiler.
    let temporary = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = fs::write(&temporary, script)
        .and_then(|()| fs::set_permissions(&temporary, fs::Permissions::from_mode(0o755)))
        .and_then(|()| fs::rename(&temporary, path));
    written.map_err(|error| {
        let _ = fs::remove_file(&temporary);
        ProgramError::Io {
            what: format!("writing {}", path.display()),
            error,
        }
    })?;
    Ok(path.to_owned())
}

/// Where the script's files are.
struct WrapperPaths<'a> {
    include: &'a Path,
    gcc_include: &'a Path,
    crt1: &'a Path,
    crti: &'a Path,
    crtn: &'a Path,
    libc: &'a Path,
    personality: &'a Personality,
    libgcc: &'a Path,
}

/// The script (POSIX sh).
fn wrapper_script(paths: &WrapperPaths<'_>) -> String {
    let q = |path: &Path| quote(&path.to_string_lossy());
    let cflags = MuslFlags::default().cflags;
    let dropped = DROPPED.join("|");
    // Written out in each command: quotes inside a shell variable would
    // be taken literally when it is expanded.
    let headers = format!(
        "-nostdinc -isystem {} -isystem {}",
        q(paths.include),
        q(paths.gcc_include)
    );
    format!(
        "#!/bin/sh\n\
         # gcc against Ebbflow's musl, written by ebb-cbuild (crates/ebb-cbuild/src/musl_cc.rs).\n\
         link=yes\n\
         for arg do\n\
         \x20   shift\n\
         \x20   case \"$arg\" in\n\
         \x20       -c|-S|-E|-M|-MM) link=no ;;\n\
         \x20   esac\n\
         \x20   case \"$arg\" in\n\
         \x20       {dropped}) ;;\n\
         \x20       *) set -- \"$@\" \"$arg\" ;;\n\
         \x20   esac\n\
         done\n\
         if [ \"$link\" = yes ]; then\n\
         \x20   exec gcc {cflags} {headers} -static -nostdlib{flags} {crt1} {crti} \"$@\" \
         -Wl,--start-group {libc} {personality} {libgcc} -Wl,--end-group {crtn}\n\
         fi\n\
         exec gcc {cflags} {headers} \"$@\"\n",
        headers = headers,
        crt1 = q(paths.crt1),
        crti = q(paths.crti),
        crtn = q(paths.crtn),
        libc = q(paths.libc),
        flags = paths
            .personality
            .link_flags
            .iter()
            .map(|flag| format!(" {}", quote(flag)))
            .collect::<String>(),
        personality = paths
            .personality
            .libraries
            .iter()
            .map(|library| q(library))
            .collect::<Vec<_>>()
            .join(" "),
        libgcc = q(paths.libgcc),
    )
}

/// `text` as one shell word: single-quoted, a quote inside closed,
/// escaped and reopened.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosted() -> Personality {
        Personality::hosted("/p/it's.a".into())
    }

    fn paths(personality: &Personality) -> WrapperPaths<'_> {
        WrapperPaths {
            include: Path::new("/m/include"),
            gcc_include: Path::new("/g/include"),
            crt1: Path::new("/m/crt1.o"),
            crti: Path::new("/m/crti.o"),
            crtn: Path::new("/m/crtn.o"),
            libc: Path::new("/m/libc.a"),
            personality,
            libgcc: Path::new("/g/libgcc.a"),
        }
    }

    #[test]
    fn a_path_is_one_shell_word_whatever_it_holds() {
        assert_eq!(quote("/a b"), "'/a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
    }

    /// What the script runs for `args`, by running it with a `gcc` that
    /// prints its arguments.
    fn gcc_args(test: &str, personality: &Personality, args: &[&str]) -> Vec<String> {
        let dir = std::env::temp_dir().join(format!("ebb-musl-cc-{test}-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let fake_gcc = dir.join("gcc");
        fs::write(&fake_gcc, "#!/bin/sh\nfor a do echo \"$a\"; done\n").unwrap();
        fs::set_permissions(&fake_gcc, fs::Permissions::from_mode(0o755)).unwrap();
        let script = dir.join("cc");
        fs::write(&script, wrapper_script(&paths(personality))).unwrap();
        let output = std::process::Command::new("/bin/sh")
            .arg(&script)
            .args(args)
            .env("PATH", &dir)
            .output()
            .unwrap();
        let _ = fs::remove_dir_all(&dir);
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn compiling_sees_musls_headers_and_the_programs_flags_last() {
        let args = gcc_args("compile", &hosted(), &["-O3", "-c", "a b.c", "-o", "a.o"]);
        let at = |word: &str| args.iter().position(|arg| arg == word).unwrap();
        assert!(at("-mno-red-zone") < at("-O3"), "the program's flags win");
        assert!(args.contains(&"/m/include".to_owned()));
        assert!(args.contains(&"a b.c".to_owned()), "one word: {args:?}");
        assert!(!args.contains(&"/m/libc.a".to_owned()), "no link");
    }

    #[test]
    fn linking_is_static_with_musl_and_the_personality_and_drops_glibcs_libraries() {
        let args = gcc_args(
            "link",
            &hosted(),
            &["-o", "prog", "a.o", "-lm", "-rdynamic", "-lpthread", "-lz"],
        );
        let at = |word: &str| args.iter().position(|arg| arg == word).unwrap();
        assert!(args.contains(&"-static".to_owned()));
        assert!(at("/m/crt1.o") < at("a.o") && at("a.o") < at("/m/libc.a"));
        assert!(at("/m/libc.a") < at("/p/it's.a") && at("/p/it's.a") < at("/m/crtn.o"));
        for dropped in ["-lm", "-rdynamic", "-lpthread"] {
            assert!(!args.contains(&dropped.to_owned()), "{dropped}: {args:?}");
        }
        assert!(args.contains(&"-lz".to_owned()), "other libraries stay");
    }

    #[test]
    fn the_user_space_stacks_personality_links_its_libraries_and_flags() {
        let personality = Personality {
            libraries: vec!["/p/a.a".into(), "/p/unwind.a".into()],
            link_flags: vec!["-Wl,--wrap=main".to_owned()],
        };
        let args = gcc_args("userstack", &personality, &["-o", "prog", "a.o"]);
        let at = |word: &str| args.iter().position(|arg| arg == word).unwrap();
        assert!(at("-Wl,--wrap=main") < at("/m/crt1.o"));
        assert!(at("/m/libc.a") < at("/p/a.a") && at("/p/a.a") < at("/p/unwind.a"));
        assert!(at("/p/unwind.a") < at("/g/libgcc.a"));
    }
}
