//! Counting changed lines between two versions of a text file, as a
//! minimal line diff does (`diff --minimal`, `git diff --numstat`): lines
//! only in the old version are removed, lines only in the new one added.
//! The counts come from the longest common subsequence of lines, so they
//! are the smallest edit; files patched here are a few hundred lines.

/// Lines removed from and added to a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineCounts {
    /// Lines only in the old version.
    pub removed: usize,
    /// Lines only in the new version.
    pub added: usize,
}

impl LineCounts {
    /// Removed plus added: the changed-line count reported.
    pub fn changed(self) -> usize {
        self.removed + self.added
    }
}

/// The minimal numbers of lines removed from `old` and added in `new`.
pub fn count(old: &str, new: &str) -> LineCounts {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let common = longest_common_subsequence(&old, &new);
    LineCounts {
        removed: old.len() - common,
        added: new.len() - common,
    }
}

/// Length of the longest common subsequence, one row of the table at a
/// time (O(len(a) * len(b)) time, O(len(b)) memory).
fn longest_common_subsequence(a: &[&str], b: &[&str]) -> usize {
    let mut previous = vec![0usize; b.len() + 1];
    let mut current = vec![0usize; b.len() + 1];
    for line_a in a {
        for (j, line_b) in b.iter().enumerate() {
            current[j + 1] = if line_a == line_b {
                previous[j] + 1
            } else {
                current[j].max(previous[j + 1])
            };
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_texts_change_nothing() {
        assert_eq!(count("a\nb\n", "a\nb\n").changed(), 0);
    }

    #[test]
    fn a_replaced_line_is_one_removed_and_one_added() {
        assert_eq!(
            count("a\nb\nc\n", "a\nx\nc\n"),
            LineCounts {
                removed: 1,
                added: 1
            }
        );
    }

    #[test]
    fn insertions_and_deletions_count_alone() {
        assert_eq!(
            count("a\nc\n", "a\nb\nc\n"),
            LineCounts {
                removed: 0,
                added: 1
            }
        );
        assert_eq!(
            count("a\nb\nc\n", "c\n"),
            LineCounts {
                removed: 2,
                added: 0
            }
        );
        assert_eq!(
            count("", "x\ny\n"),
            LineCounts {
                removed: 0,
                added: 2
            }
        );
    }

    #[test]
    fn moved_lines_count_as_the_smallest_edit() {
        // "a b c d" -> "b c d a": one removal, one addition.
        assert_eq!(
            count("a\nb\nc\nd\n", "b\nc\nd\na\n"),
            LineCounts {
                removed: 1,
                added: 1
            }
        );
    }
}
