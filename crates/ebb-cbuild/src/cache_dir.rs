//! Cache entries that appear whole or not at all: each is made in a
//! temporary directory, marked complete with a stamp file, then renamed
//! into place (rename(2) is atomic within a file system), so a crash
//! leaves no half entry and two builds at once agree.

use std::fs;
use std::path::Path;

/// A failed file operation: what was being done, and the system's error.
pub type CacheError = (String, std::io::Error);

/// Moves the finished, stamped `work` to `dir`. A `dir` without its
/// `stamp` (an interrupted older run) is replaced; one that another
/// process placed first, stamped, is as good as ours.
pub fn place_stamped(work: &Path, dir: &Path, stamp: &str) -> Result<(), CacheError> {
    if dir.exists() && !dir.join(stamp).exists() {
        fs::remove_dir_all(dir).map_err(|error| (format!("removing {}", dir.display()), error))?;
    }
    match fs::rename(work, dir) {
        Ok(()) => Ok(()),
        Err(_) if dir.join(stamp).exists() => Ok(()),
        Err(error) => Err((
            format!("moving {} to {}", work.display(), dir.display()),
            error,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ebb-cbuild-cache-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn an_unstamped_leftover_is_replaced_and_a_stamped_winner_kept() {
        let root = fresh("place");
        let (work, dir) = (root.join("work"), root.join("entry"));
        fs::create_dir_all(&work).unwrap();
        fs::write(work.join("stamp"), "ours").unwrap();
        fs::create_dir_all(dir.join("half")).unwrap();
        place_stamped(&work, &dir, "stamp").unwrap();
        assert_eq!(fs::read_to_string(dir.join("stamp")).unwrap(), "ours");
        assert!(!dir.join("half").exists());

        // Another run finishing later finds the entry there, stamped.
        fs::create_dir_all(work.join("more")).unwrap();
        fs::write(work.join("stamp"), "theirs").unwrap();
        place_stamped(&work, &dir, "stamp").unwrap();
        assert_eq!(fs::read_to_string(dir.join("stamp")).unwrap(), "ours");
        fs::remove_dir_all(root).unwrap();
    }
}
