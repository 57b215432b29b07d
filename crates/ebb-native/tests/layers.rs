//! The layer rule of `ebb-native` (see its README, "Layers"), checked on
//! the source: every `crate::…` and `super::…` path in `src/**.rs` (code,
//! not comments) is an edge from the folder of the file that names it to
//! the folder of the module it names. Each folder may only use folders
//! below it in [`LAYERS`], so the folder graph has no cycle.
//!
//! Calls upward go through hooks the upper layer registers at boot (a
//! function pointer), which name no upper module and so make no edge;
//! the boot sequence's entry is the one link-time symbol (`ebb_native_boot`,
//! like the application's `__ebb_native_app_main`).
//!
//! `cargo test -p ebb-native --test layers -- --nocapture` prints the
//! folder edges and the number of cycles.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The folders of `src/`, top to bottom: a folder may use the folders
/// after it, never one before it. `lib.rs` (the crate root: the public
/// API's re-exports and the `entry!` macro) is above all of them.
const LAYERS: &[&str] = &[
    "runtime",
    "drivers/virtio/net",
    "drivers/virtio/transport",
    "drivers/virtio/queue",
    "drivers/virtio",
    "drivers/pci",
    "drivers",
    "mm",
    "arch/x86_64",
    "arch",
];

/// The crate root's folder name in the edge list.
const ROOT: &str = "(lib.rs)";

/// One source file: its folder (relative to `src/`, `""` for the root)
/// and its module path below the crate root.
struct SourceFile {
    path: PathBuf,
    folder: String,
    module: Vec<String>,
}

fn source_files(dir: &Path, src: &Path, out: &mut Vec<SourceFile>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("src/ is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            source_files(&path, src, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let relative = path.strip_prefix(src).expect("under src/");
            let folder = relative
                .parent()
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            let mut module: Vec<String> = if folder.is_empty() {
                Vec::new()
            } else {
                folder.split('/').map(str::to_owned).collect()
            };
            let stem = path.file_stem().expect("a file name").to_string_lossy();
            if stem != "mod" && stem != "lib" {
                module.push(stem.into_owned());
            }
            out.push(SourceFile {
                path,
                folder,
                module,
            });
        }
    }
}

/// The source without comments (line, block and doc comments) and without
/// the contents of string and character literals, so that only code paths
/// remain. Keeps line breaks, so line numbers stay right.
fn code_only(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &source[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |e| e + 2);
            out.extend(rest[..end].chars().filter(|&c| c == '\n'));
            i += end;
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let (open, close) = if rest.starts_with("r#\"") {
                (3, "\"#")
            } else {
                (2, "\"")
            };
            let end = rest[open..]
                .find(close)
                .map_or(rest.len(), |e| open + e + close.len());
            out.extend(rest[..end].chars().filter(|&c| c == '\n'));
            i += end;
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() && rest.as_bytes()[j] != b'"' {
                j += if rest.as_bytes()[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(rest.len());
            out.extend(rest[..end].chars().filter(|&c| c == '\n'));
            i += end;
        } else if rest.starts_with("'\\''") || rest.starts_with("'\"'") {
            i += 3 + usize::from(rest.starts_with("'\\''"));
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths of a `use` tree or expression path starting at `text` (just
/// after `crate::` or `super::`), with `{a, b::c}` groups expanded.
fn paths_at(text: &str) -> Vec<Vec<String>> {
    fn tree(text: &str, at: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        loop {
            let rest = &text[*at..];
            let trimmed = rest.trim_start();
            *at += rest.len() - trimmed.len();
            if trimmed.starts_with('{') {
                *at += 1;
                loop {
                    tree(text, at, &path, out);
                    let rest = &text[*at..];
                    let trimmed = rest.trim_start();
                    *at += rest.len() - trimmed.len();
                    if trimmed.starts_with(',') {
                        *at += 1;
                        let rest = &text[*at..];
                        if rest.trim_start().starts_with('}') {
                            *at += rest.len() - rest.trim_start().len() + 1;
                            return;
                        }
                    } else {
                        if trimmed.starts_with('}') {
                            *at += 1;
                        }
                        return;
                    }
                }
            }
            let ident: String = trimmed.chars().take_while(|&c| is_ident(c)).collect();
            if ident.is_empty() {
                out.push(path);
                return;
            }
            *at += ident.len();
            path.push(ident);
            if text[*at..].starts_with("::") {
                *at += 2;
            } else {
                out.push(path);
                return;
            }
        }
    }
    let mut out = Vec::new();
    let mut at = 0;
    tree(text, &mut at, &[], &mut out);
    out
}

/// The folder of the module `path` (absolute, from the crate root):
/// the longest prefix that is a folder, the file that defines a macro of
/// that name, or the root.
fn folder_of(
    path: &[String],
    folders: &BTreeSet<String>,
    macros: &BTreeMap<String, String>,
) -> String {
    for len in (1..=path.len()).rev() {
        let candidate = path[..len].join("/");
        if folders.contains(&candidate) {
            return candidate;
        }
    }
    if let Some(folder) = path.first().and_then(|name| macros.get(name)) {
        return folder.clone();
    }
    String::new()
}

fn name(folder: &str) -> &str {
    if folder.is_empty() {
        ROOT
    } else {
        folder
    }
}

/// An edge between two folders, with where it was first seen.
type Edges = BTreeMap<(String, String), (usize, String)>;

fn folder_edges() -> Edges {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &src, &mut files);
    let folders: BTreeSet<String> = files.iter().map(|f| f.folder.clone()).collect();
    for folder in &folders {
        assert!(
            folder.is_empty() || LAYERS.contains(&folder.as_str()),
            "src/{folder} is not in LAYERS: give it its place in the order"
        );
    }
    let mut macros = BTreeMap::new();
    let sources: Vec<String> = files
        .iter()
        .map(|f| code_only(&fs::read_to_string(&f.path).expect("a readable source file")))
        .collect();
    for (file, code) in files.iter().zip(&sources) {
        for (at, _) in code.match_indices("macro_rules!") {
            let name: String = code[at + "macro_rules!".len()..]
                .trim_start()
                .chars()
                .take_while(|&c| is_ident(c))
                .collect();
            macros.insert(name, file.folder.clone());
        }
    }
    let mut edges = Edges::new();
    for (file, code) in files.iter().zip(&sources) {
        for (at, _) in code
            .match_indices("crate::")
            .chain(code.match_indices("super::"))
        {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| is_ident(c) || c == '$' || c == ':') {
                continue; // `$crate::` in a macro, or inside a longer path
            }
            let mut base: Vec<String> = Vec::new();
            let mut rest = at;
            if code[at..].starts_with("crate::") {
                rest += "crate::".len();
            } else {
                base = file.module.clone();
                while code[rest..].starts_with("super::") {
                    base.pop();
                    rest += "super::".len();
                }
            }
            for tail in paths_at(&code[rest..]) {
                let mut path = base.clone();
                path.extend(tail);
                let to = folder_of(&path, &folders, &macros);
                if to != file.folder {
                    let line = code[..at].matches('\n').count() + 1;
                    let entry = edges
                        .entry((file.folder.clone(), to))
                        .or_insert((0, String::new()));
                    if entry.0 == 0 {
                        let relative = file.path.strip_prefix(&src).expect("under src/");
                        entry.1 = format!("{}:{line}", relative.display());
                    }
                    entry.0 += 1;
                }
            }
        }
    }
    edges
}

/// The elementary cycles of the folder graph (each once, from its
/// smallest folder).
fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
    }
    fn walk<'a>(
        start: &'a str,
        at: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        out: &mut Vec<Vec<String>>,
    ) {
        for &to in next.get(at).into_iter().flatten() {
            if to == start {
                out.push(path.iter().map(|s| s.to_string()).collect());
            } else if to > start && !path.contains(&to) {
                path.push(to);
                walk(start, to, next, path, out);
                path.pop();
            }
        }
    }
    let mut out = Vec::new();
    for &start in next.keys() {
        walk(start, start, &next, &mut vec![start], &mut out);
    }
    out
}

fn rank(folder: &str) -> usize {
    if folder.is_empty() {
        return 0;
    }
    1 + LAYERS
        .iter()
        .position(|layer| *layer == folder)
        .expect("every folder is in LAYERS")
}

#[test]
fn folders_depend_downward_only_and_have_no_cycle() {
    let edges = folder_edges();
    println!("ebb-native folder edges (from -> to: paths, first at):");
    let mut upward = Vec::new();
    for ((from, to), (count, first)) in &edges {
        let allowed = rank(from) < rank(to);
        println!(
            "  {} -> {}: {count} ({first}){}",
            name(from),
            name(to),
            if allowed { "" } else { "  UPWARD" }
        );
        if !allowed {
            upward.push(format!("{} -> {} ({first})", name(from), name(to)));
        }
    }
    let cycles = cycles(&edges);
    println!(
        "import cycles between ebb-native's folders: {}",
        cycles.len()
    );
    for cycle in &cycles {
        let names: Vec<&str> = cycle.iter().map(|f| name(f)).collect();
        println!("  cycle: {} -> {}", names.join(" -> "), names[0]);
    }
    assert!(
        upward.is_empty(),
        "a lower layer names an upper one (register a hook instead, see the README's \"Layers\"): {upward:?}"
    );
    assert!(
        cycles.is_empty(),
        "import cycles between folders: {cycles:?}"
    );
}

#[test]
fn the_path_scanner_sees_groups_super_and_skips_comments_and_strings() {
    let code = code_only("use crate::a::{b, c::{d, e}};\n// crate::f::g\nlet s = \"crate::h\"; /* super::i */ super::j::k();");
    assert!(!code.contains("crate::f") && !code.contains("crate::h") && !code.contains("super::i"));
    let at = code.find("crate::").unwrap() + "crate::".len();
    let paths: Vec<String> = paths_at(&code[at..]).iter().map(|p| p.join("::")).collect();
    assert_eq!(paths, ["a::b", "a::c::d", "a::c::e"]);
    let at = code.find("super::").unwrap() + "super::".len();
    let paths: Vec<String> = paths_at(&code[at..]).iter().map(|p| p.join("::")).collect();
    assert_eq!(paths, ["j::k"]);
    let folders: BTreeSet<String> = ["arch/x86_64".to_owned(), "arch".to_owned()].into();
    let path = |p: &str| p.split("::").map(str::to_owned).collect::<Vec<_>>();
    let macros: BTreeMap<String, String> =
        [("println".to_owned(), "arch/x86_64".to_owned())].into();
    assert_eq!(
        folder_of(&path("arch::x86_64::cpu::f"), &folders, &macros),
        "arch/x86_64"
    );
    assert_eq!(
        folder_of(&path("println"), &folders, &macros),
        "arch/x86_64"
    );
    assert_eq!(folder_of(&path("entry"), &folders, &macros), "");
}
