//! Build-time patches: exact text replacements applied by code to a copy
//! of an upstream tree, never a vendored copy of the patched files.
//!
//! Each replacement names a file, the upstream text and its replacement;
//! the upstream text must occur exactly once, so a different upstream
//! version fails loudly, naming the file, instead of building something
//! half patched. The report counts the changed lines per file against
//! upstream ([`crate::line_diff`]).

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::line_diff::{self, LineCounts};

/// One replacement: in `file` (relative to the tree), `upstream` becomes
/// `ours`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replacement {
    /// The file, relative to the tree's root.
    pub file: &'static str,
    /// Upstream's text, which must occur exactly once.
    pub upstream: &'static str,
    /// What replaces it.
    pub ours: &'static str,
}

/// Why a patch does not apply.
#[derive(Debug)]
pub enum PatchError {
    /// The upstream text is not in the file (another upstream version?).
    NotFound {
        /// The file.
        file: PathBuf,
        /// The text looked for.
        upstream: String,
    },
    /// The upstream text occurs more than once: which one is meant?
    Ambiguous {
        /// The file.
        file: PathBuf,
        /// The text looked for.
        upstream: String,
        /// How often it occurs.
        times: usize,
    },
    /// The file could not be read or written.
    Io {
        /// The file.
        file: PathBuf,
        /// The system's error.
        error: std::io::Error,
    },
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first_line = |text: &str| text.lines().next().unwrap_or("").trim().to_owned();
        match self {
            PatchError::NotFound { file, upstream } => write!(
                f,
                "{}: the text to replace is not there (a different upstream version?): {:?}...",
                file.display(),
                first_line(upstream)
            ),
            PatchError::Ambiguous {
                file,
                upstream,
                times,
            } => write!(
                f,
                "{}: the text to replace occurs {times} times, expected once: {:?}...",
                file.display(),
                first_line(upstream)
            ),
            PatchError::Io { file, error } => write!(f, "{}: {error}", file.display()),
        }
    }
}

impl std::error::Error for PatchError {}

/// A patch applied in memory: each touched file's new text and counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchedFiles {
    /// Relative path -> patched text.
    pub texts: BTreeMap<&'static str, String>,
    /// What the build prints.
    pub report: PatchReport,
}

/// Changed lines against upstream, per file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchReport {
    /// Relative path -> lines removed and added.
    pub files: BTreeMap<&'static str, LineCounts>,
}

impl PatchReport {
    /// All files' changed lines (removed + added).
    pub fn total(&self) -> usize {
        self.files.values().map(|counts| counts.changed()).sum()
    }
}

impl fmt::Display for PatchReport {
    /// One line per file, `changed N (-R +A) FILE`, then
    /// `changed lines against upstream: TOTAL`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (file, counts) in &self.files {
            writeln!(
                f,
                "changed {} (-{} +{}) {file}",
                counts.changed(),
                counts.removed,
                counts.added
            )?;
        }
        write!(f, "changed lines against upstream: {}", self.total())
    }
}

/// Applies `replacements` to the files under `tree` in memory (the tree
/// is not modified).
pub fn apply(tree: &Path, replacements: &[Replacement]) -> Result<PatchedFiles, PatchError> {
    let mut upstream_texts: BTreeMap<&'static str, String> = BTreeMap::new();
    let mut texts: BTreeMap<&'static str, String> = BTreeMap::new();
    for replacement in replacements {
        let path = tree.join(replacement.file);
        if !texts.contains_key(replacement.file) {
            let text = fs::read_to_string(&path).map_err(|error| PatchError::Io {
                file: path.clone(),
                error,
            })?;
            upstream_texts.insert(replacement.file, text.clone());
            texts.insert(replacement.file, text);
        }
        let text = texts.get_mut(replacement.file).expect("inserted above");
        *text = replace_once(text, replacement, &path)?;
    }
    let files = texts
        .iter()
        .map(|(file, text)| (*file, line_diff::count(&upstream_texts[file], text)))
        .collect();
    Ok(PatchedFiles {
        texts,
        report: PatchReport { files },
    })
}

/// Writes the patched texts into `tree` (a copy of upstream's, or an
/// empty directory to keep just the patched files).
pub fn write(tree: &Path, patched: &PatchedFiles) -> Result<(), PatchError> {
    for (file, text) in &patched.texts {
        let path = tree.join(file);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|error| PatchError::Io {
                file: parent.to_owned(),
                error,
            })?;
        }
        fs::write(&path, text).map_err(|error| PatchError::Io { file: path, error })?;
    }
    Ok(())
}

fn replace_once(text: &str, replacement: &Replacement, path: &Path) -> Result<String, PatchError> {
    match text.matches(replacement.upstream).count() {
        1 => Ok(text.replacen(replacement.upstream, replacement.ours, 1)),
        0 => Err(PatchError::NotFound {
            file: path.to_owned(),
            upstream: replacement.upstream.to_owned(),
        }),
        times => Err(PatchError::Ambiguous {
            file: path.to_owned(),
            upstream: replacement.upstream.to_owned(),
            times,
        }),
    }
}

/// The patch's identity for cache keys: every file, upstream text and
/// replacement, in order.
pub fn fingerprint(replacements: &[Replacement]) -> u64 {
    let mut bytes = Vec::new();
    for replacement in replacements {
        for part in [replacement.file, replacement.upstream, replacement.ours] {
            bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
            bytes.extend_from_slice(part.as_bytes());
        }
    }
    crate::stable_hash::fnv1a64(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small fake tree in a fresh directory under the system's temp dir.
    fn fake_tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ebb-cbuild-patch-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for (file, text) in files {
            let path = dir.join(file);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        dir
    }

    const SWAP: Replacement = Replacement {
        file: "arch/a.h",
        upstream: "\tsyscall\n",
        ours: "\tcall f\n\tnop\n",
    };

    #[test]
    fn found_once_is_replaced_and_counted() {
        let tree = fake_tree("once", &[("arch/a.h", "x:\n\tsyscall\n\tret\n")]);
        let patched = apply(&tree, &[SWAP]).unwrap();
        assert_eq!(patched.texts["arch/a.h"], "x:\n\tcall f\n\tnop\n\tret\n");
        assert_eq!(
            patched.report.files["arch/a.h"],
            LineCounts {
                removed: 1,
                added: 2
            }
        );
        assert_eq!(patched.report.total(), 3);
        assert_eq!(
            patched.report.to_string(),
            "changed 3 (-1 +2) arch/a.h\nchanged lines against upstream: 3"
        );
        // In memory only, until written.
        assert_eq!(
            fs::read_to_string(tree.join("arch/a.h")).unwrap(),
            "x:\n\tsyscall\n\tret\n"
        );
        write(&tree, &patched).unwrap();
        assert_eq!(
            fs::read_to_string(tree.join("arch/a.h")).unwrap(),
            patched.texts["arch/a.h"]
        );
        fs::remove_dir_all(tree).unwrap();
    }

    #[test]
    fn missing_text_is_an_error_naming_the_file() {
        let tree = fake_tree("missing", &[("arch/a.h", "x:\n\tret\n")]);
        let error = apply(&tree, &[SWAP]).unwrap_err();
        assert!(
            matches!(error, PatchError::NotFound { ref file, .. } if file.ends_with("arch/a.h")),
            "{error}"
        );
        assert!(error.to_string().contains("arch/a.h"), "{error}");
        fs::remove_dir_all(tree).unwrap();
    }

    #[test]
    fn text_found_twice_is_ambiguous() {
        let tree = fake_tree("twice", &[("arch/a.h", "\tsyscall\n\tsyscall\n")]);
        let error = apply(&tree, &[SWAP]).unwrap_err();
        assert!(
            matches!(error, PatchError::Ambiguous { times: 2, .. }),
            "{error}"
        );
        fs::remove_dir_all(tree).unwrap();
    }

    #[test]
    fn a_missing_file_is_an_io_error_naming_it() {
        let tree = fake_tree("nofile", &[("other", "")]);
        let error = apply(&tree, &[SWAP]).unwrap_err();
        assert!(
            matches!(error, PatchError::Io { ref file, .. } if file.ends_with("arch/a.h")),
            "{error}"
        );
        fs::remove_dir_all(tree).unwrap();
    }

    #[test]
    fn two_replacements_in_one_file_are_counted_together() {
        let tree = fake_tree("two", &[("arch/a.h", "a\n\tsyscall\nb\n")]);
        let second = Replacement {
            file: "arch/a.h",
            upstream: "b\n",
            ours: "c\n",
        };
        let patched = apply(&tree, &[SWAP, second]).unwrap();
        assert_eq!(patched.texts["arch/a.h"], "a\n\tcall f\n\tnop\nc\n");
        assert_eq!(patched.report.total(), 5);
        fs::remove_dir_all(tree).unwrap();
    }

    #[test]
    fn the_fingerprint_changes_with_any_text() {
        let other = Replacement {
            ours: "\tcall g\n",
            ..SWAP
        };
        assert_ne!(fingerprint(&[SWAP]), fingerprint(&[other]));
        assert_eq!(fingerprint(&[SWAP]), fingerprint(&[SWAP]));
    }
}
