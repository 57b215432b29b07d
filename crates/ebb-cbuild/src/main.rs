//! `ebb-cbuild`: fetches Debian source packages and builds musl for
//! Ebbflow; prints what it did, the patch's changed lines included.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use ebb_cbuild::{debian_source, musl, posix_programs, qemu_plugin, redis, sqlite};

const USAGE: &str = "usage: ebb-cbuild fetch PACKAGE [--cache DIR]
       ebb-cbuild musl [--cache DIR] [--out DIR]
       ebb-cbuild posix-programs [--cache DIR] [--out DIR] [--target-dir DIR]
       ebb-cbuild posix-userstack [--cache DIR] [--out DIR] [--target-dir DIR]
       ebb-cbuild sqlite [--cache DIR] [--out DIR] [--target-dir DIR]
       ebb-cbuild redis [--cache DIR] [--out DIR] [--target-dir DIR]
       ebb-cbuild redis-userstack [--cache DIR] [--out DIR] [--target-dir DIR]
       ebb-cbuild redis-stock [--cache DIR] [--target-dir DIR]
       ebb-cbuild qemu-plugin [--cache DIR] [--target-dir DIR]
  fetch           unpacks Debian's source package PACKAGE into DIR/NAME-VERSION
  musl            builds musl (Debian's source package) with system calls as
                  calls to __ebb_syscall; prints the patch's changed lines and
                  the outputs
  posix-programs  builds musl, the hosted POSIX personality (cargo) and each
                  program of crates/ebb-posix/programs, with them and for
                  Linux; prints `program NAME EBBFLOW LINUX` and `native NAME
                  INPUTS` (for apps/c-program's EBB_C_PROGRAM) per program
  posix-userstack as posix-programs, and each program linked with the
                  user-space stack's personality too (cargo, musl target);
                  prints `userstack NAME PATH` per program
  sqlite          builds SQLite from Debian's sqlite3 source (unchanged:
                  prints 0 changed lines) and its programs speedtest1 and
                  sqlite-kv with musl and the hosted personality, and for
                  Linux; prints `program NAME EBBFLOW LINUX` and `native
                  NAME INPUTS` per program
  redis           builds Redis's server from Debian's redis source (unchanged:
                  prints 0 changed lines) with Redis's Makefile and a musl
                  compiler command, linked with the hosted personality;
                  prints `server PATH`
  redis-userstack as redis, and the same objects linked with the user-space
                  stack's personality (cargo, for x86_64-unknown-linux-musl);
                  prints `server PATH` and `userstack-server PATH`
  redis-stock     builds stock Redis from the same source, for comparisons:
                  Redis's Makefile, gcc and glibc (its malloc, as ours);
                  prints `stock-server PATH` and `source DIR` (the tree it
                  was built in, with Redis's own tests/)
  qemu-plugin     builds the TCG plugin insn_count (plugins/insn_count.c)
                  against the plugin header of QEMU's Debian source package;
                  prints `plugin PATH` (load it with -plugin PATH,sock=SOCKET)
  --cache DIR       where source packages go (default: target/debian-src)
  --out DIR         where musl builds go (default: target/musl)
  --target-dir DIR  cargo's target directory (default: target); programs
                    go to DIR/posix-programs
Run from the workspace's root. Exit status 3: apt cannot provide the source
(no deb-src entry, or no network); 1: any other failure.";

struct Options {
    command: String,
    package: Option<String>,
    cache: PathBuf,
    out: PathBuf,
    target_dir: PathBuf,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        command: String::new(),
        package: None,
        cache: PathBuf::from("target/debian-src"),
        out: PathBuf::from("target/musl"),
        target_dir: PathBuf::from("target"),
    };
    let mut args = args.iter();
    options.command = args.next().ok_or("no command")?.clone();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--cache" => options.cache = args.next().ok_or("--cache needs a directory")?.into(),
            "--out" => options.out = args.next().ok_or("--out needs a directory")?.into(),
            "--target-dir" => {
                options.target_dir = args.next().ok_or("--target-dir needs a directory")?.into();
            }
            other if other.starts_with('-') => return Err(format!("unknown option {other}")),
            other if options.package.is_none() => options.package = Some(other.to_owned()),
            other => return Err(format!("unexpected argument {other}")),
        }
    }
    match (options.command.as_str(), &options.package) {
        ("fetch", Some(_))
        | (
            "musl" | "posix-programs" | "posix-userstack" | "sqlite" | "redis" | "redis-userstack"
            | "redis-stock" | "qemu-plugin",
            None,
        ) => Ok(options),
        ("fetch", None) => Err("fetch needs a PACKAGE".to_owned()),
        (
            "musl" | "posix-programs" | "posix-userstack" | "sqlite" | "redis" | "redis-userstack"
            | "redis-stock" | "qemu-plugin",
            Some(extra),
        ) => Err(format!("unexpected argument {extra}")),
        (other, _) => Err(format!("unknown command {other}")),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "--help" || arg == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let options = match parse(&args) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("ebb-cbuild: {error}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match execute(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ebb-cbuild: error: {error}");
            if source_unavailable(error.as_ref()) {
                ExitCode::from(SOURCE_UNAVAILABLE)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// The exit status when apt cannot provide a source package at all (no
/// deb-src entry, no network): tests skip on it instead of failing.
const SOURCE_UNAVAILABLE: u8 = 3;

fn source_unavailable(error: &(dyn std::error::Error + 'static)) -> bool {
    use debian_source::SourceError;
    if let Some(prepare) = error.downcast_ref::<posix_programs::PrepareError>() {
        return prepare.is_unavailable_source();
    }
    if let Some(plugin) = error.downcast_ref::<qemu_plugin::PluginError>() {
        return matches!(plugin, qemu_plugin::PluginError::Unavailable(_));
    }
    matches!(
        error.downcast_ref::<SourceError>(),
        Some(SourceError::NoDebSrc(_) | SourceError::Download { .. })
    )
}

/// Takes the build lock, a file in the source cache that every command
/// uses (`--cache`): one `ebb-cbuild` at a time fetches and builds (tests
/// run in parallel, and two of them building the same programs at once
/// linked a half-written object). Held until the process exits; says so
/// when it has to wait.
fn lock_builds(cache: &std::path::Path) -> Result<std::fs::File, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(cache)
        .map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    let path = cache.join(".ebb-cbuild.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    if file.try_lock().is_err() {
        eprintln!(
            "ebb-cbuild: waiting for another ebb-cbuild using {}...",
            cache.display()
        );
        file.lock()
            .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    }
    Ok(file)
}

fn execute(options: &Options) -> Result<(), Box<dyn std::error::Error>> {
    let _building = lock_builds(&options.cache)?;
    if options.command == "sqlite" {
        eprintln!("ebb-cbuild: building musl, the hosted POSIX personality (cargo) and SQLite's programs (a few minutes the first time)...");
        let dirs = posix_programs::Dirs {
            workspace: std::env::current_dir()?,
            target_dir: std::path::absolute(&options.target_dir)?,
            source_cache: options.cache.clone(),
            musl_out: options.out.clone(),
        };
        for program in sqlite::prepare(&dirs, true)? {
            print_program(
                &program.name,
                &program.ebbflow,
                &program.linux,
                &program.native_inputs,
            );
        }
        return Ok(());
    }
    if options.command == "redis" || options.command == "redis-userstack" {
        eprintln!("ebb-cbuild: building musl, the hosted POSIX personality (cargo) and Redis (a few minutes the first time)...");
        let dirs = posix_programs::Dirs {
            workspace: std::env::current_dir()?,
            target_dir: std::path::absolute(&options.target_dir)?,
            source_cache: options.cache.clone(),
            musl_out: options.out.clone(),
        };
        let built = redis::prepare(&dirs, true)?;
        println!("server {}", built.server.display());
        if options.command == "redis-userstack" {
            eprintln!("ebb-cbuild: building the user-space stack's personality (cargo, musl target) and linking Redis with it...");
            let server = redis::link_userstack(&dirs, &built)?;
            println!("userstack-server {}", server.display());
        }
        return Ok(());
    }
    if options.command == "qemu-plugin" {
        let plugin = qemu_plugin::prepare(&options.cache, &options.target_dir)?;
        println!("plugin {}", plugin.path.display());
        println!("qemu-source {}", plugin.qemu_version);
        return Ok(());
    }
    if options.command == "redis-stock" {
        eprintln!(
            "ebb-cbuild: building stock Redis with gcc and glibc (a few minutes the first time)..."
        );
        let dirs = posix_programs::Dirs {
            workspace: std::env::current_dir()?,
            target_dir: std::path::absolute(&options.target_dir)?,
            source_cache: options.cache.clone(),
            musl_out: options.out.clone(),
        };
        let tree = redis::prepare_stock(&dirs)?;
        println!("stock-server {}", tree.join("src/redis-server").display());
        println!("source {}", tree.display());
        return Ok(());
    }
    if options.command == "posix-programs" {
        eprintln!(
            "ebb-cbuild: building musl, the hosted POSIX personality (cargo) and the programs..."
        );
        let dirs = posix_programs::Dirs {
            workspace: std::env::current_dir()?,
            target_dir: std::path::absolute(&options.target_dir)?,
            source_cache: options.cache.clone(),
            musl_out: options.out.clone(),
        };
        let (build, programs) = posix_programs::prepare(&dirs)?;
        print_musl(&build);
        for program in programs {
            print_program(
                &program.name,
                &program.ebbflow,
                &program.linux,
                &program.native_inputs,
            );
        }
        return Ok(());
    }
    if options.command == "posix-userstack" {
        eprintln!("ebb-cbuild: building musl, both personalities (cargo) and the programs...");
        let dirs = posix_programs::Dirs {
            workspace: std::env::current_dir()?,
            target_dir: std::path::absolute(&options.target_dir)?,
            source_cache: options.cache.clone(),
            musl_out: options.out.clone(),
        };
        for (name, path) in posix_programs::prepare_userstack(&dirs)? {
            println!("userstack {name} {}", path.display());
        }
        return Ok(());
    }
    let package = options.package.as_deref().unwrap_or("musl");
    let tree = debian_source::fetch(package, &options.cache)?;
    println!(
        "source {} {}: {}",
        tree.package,
        tree.version,
        tree.dir.display()
    );
    if options.command == "musl" {
        print_musl(&musl::build(
            &tree,
            &options.out,
            &musl::MuslFlags::default(),
        )?);
    }
    Ok(())
}

/// The patch's changed lines and the build's outputs.
fn print_musl(build: &musl::MuslBuild) {
    println!("{}", build.patch);
    println!("libc.a {}", build.libc_a.display());
    println!("crt1.o {}", build.crt1.display());
    println!("crti.o {}", build.crti.display());
    println!("crtn.o {}", build.crtn.display());
    println!("include {}", build.include_dir.display());
}

/// The two lines a built program is announced with, which tests and
/// `./ebb` read: `program NAME EBBFLOW LINUX` and `native NAME INPUTS`
/// (the native image's inputs joined by `:`).
fn print_program(
    name: &str,
    ebbflow: &std::path::Path,
    linux: &std::path::Path,
    native_inputs: &[std::path::PathBuf],
) {
    println!("program {name} {} {}", ebbflow.display(), linux.display());
    let inputs: Vec<String> = native_inputs
        .iter()
        .map(|input| input.display().to_string())
        .collect();
    println!("native {name} {}", inputs.join(":"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn commands_and_options_parse() {
        let fetch = parse(&args("fetch sqlite3 --cache /c")).unwrap();
        assert_eq!(
            (fetch.command.as_str(), fetch.package.as_deref()),
            ("fetch", Some("sqlite3"))
        );
        assert_eq!(fetch.cache, PathBuf::from("/c"));
        let musl = parse(&args("musl --out /o")).unwrap();
        assert_eq!(
            (musl.out, musl.cache),
            (PathBuf::from("/o"), PathBuf::from("target/debian-src"))
        );
        assert_eq!(parse(&args("redis")).unwrap().command, "redis");
        assert_eq!(parse(&args("redis-stock")).unwrap().command, "redis-stock");
        assert!(parse(&args("redis-stock extra")).is_err());
        let programs = parse(&args("posix-programs --target-dir /t")).unwrap();
        assert_eq!(programs.command, "posix-programs");
        assert_eq!(programs.target_dir, PathBuf::from("/t"));
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        assert_eq!(parse(&[]).err().unwrap(), "no command");
        assert_eq!(
            parse(&args("fetch")).err().unwrap(),
            "fetch needs a PACKAGE"
        );
        assert_eq!(
            parse(&args("musl extra")).err().unwrap(),
            "unexpected argument extra"
        );
        assert_eq!(
            parse(&args("build")).err().unwrap(),
            "unknown command build"
        );
        assert_eq!(
            parse(&args("musl --cache")).err().unwrap(),
            "--cache needs a directory"
        );
        assert_eq!(
            parse(&args("posix-programs --target-dir")).err().unwrap(),
            "--target-dir needs a directory"
        );
        assert_eq!(
            parse(&args("musl --fast")).err().unwrap(),
            "unknown option --fast"
        );
    }
}
