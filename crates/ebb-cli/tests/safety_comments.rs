//! Every `unsafe` block's `// SAFETY:` comment gives its own reason
//! (STYLE: "as above" is not a reason). A comment that points at another
//! one ("as above", "as for `read`", "here and below") stops being true
//! when the code it points at changes, so the workspace is searched for
//! them.

use std::fs;
use std::path::{Path, PathBuf};

/// Phrases that point at another comment instead of giving a reason.
const POINTERS: &[&str] = &[
    "as above",
    "see above",
    "same as above",
    "as for ",
    "as in `",
    "here and below",
];

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != ".git" {
                rust_files(&path, files);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

#[test]
fn safety_comments_give_their_own_reason() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for top in ["crates", "apps", "bench"] {
        rust_files(&root.join(top), &mut files);
    }
    assert!(files.len() > 100, "found only {} Rust files", files.len());
    let mut pointing = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap_or_default();
        let mut in_safety = false;
        for (number, line) in text.lines().enumerate() {
            let comment = line.trim_start().strip_prefix("//").map(str::trim_start);
            match comment {
                Some(c) if c.starts_with("SAFETY:") => in_safety = true,
                Some(_) => {}
                None => in_safety = false,
            }
            let Some(comment) = comment.filter(|_| in_safety) else {
                continue;
            };
            let lower = comment.to_lowercase();
            if POINTERS.iter().any(|p| lower.contains(p)) {
                pointing.push(format!(
                    "{}:{}: {}",
                    file.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        pointing.is_empty(),
        "SAFETY comments that point elsewhere instead of giving a reason:\n{}",
        pointing.join("\n")
    );
}
