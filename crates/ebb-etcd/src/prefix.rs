//! Where an application's keys live in etcd: under `/ebbflow/APP/`, so
//! that applications sharing one etcd never see each other's entries.

use ebb_core::{check_key, MapError};

/// The longest application name accepted, in bytes.
pub const MAX_APP_LEN: usize = 64;

/// Why an application name cannot name a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadAppName {
    /// The name, cut to 64 characters.
    pub name: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl std::fmt::Display for BadAppName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid application name {:?} for the etcd prefix: {}",
            self.name, self.why
        )
    }
}

impl std::error::Error for BadAppName {}

/// The etcd prefix of one application's keys, `/ebbflow/APP/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppPrefix {
    prefix: String,
}

impl AppPrefix {
    /// The prefix of application `app`: 1 to 64 of ASCII letters, digits,
    /// `-`, `_` and `.`, not `.` or `..` (it is one path segment).
    ///
    /// # Errors
    ///
    /// [`BadAppName`] saying what is wrong.
    pub fn new(app: &str) -> Result<AppPrefix, BadAppName> {
        let bad = |why| BadAppName {
            name: app.chars().take(64).collect(),
            why,
        };
        if app.is_empty() {
            return Err(bad("empty"));
        }
        if app.len() > MAX_APP_LEN {
            return Err(bad("longer than 64 bytes"));
        }
        if !app
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Err(bad(
                "only ASCII letters, digits, '-', '_' and '.' are allowed",
            ));
        }
        if app == "." || app == ".." {
            return Err(bad("'.' and '..' are not names"));
        }
        Ok(AppPrefix {
            prefix: format!("/ebbflow/{app}/"),
        })
    }

    /// The prefix itself, `/ebbflow/APP/`.
    pub fn as_str(&self) -> &str {
        &self.prefix
    }

    /// The etcd key of map key `key` (checked as [`check_key`] does; with
    /// `prefix`, `key` may be a prefix of keys).
    ///
    /// # Errors
    ///
    /// [`MapError::InvalidKey`].
    pub fn etcd_key(&self, key: &str, prefix: bool) -> Result<Vec<u8>, MapError> {
        check_key(key, prefix)?;
        Ok(format!("{}{key}", self.prefix).into_bytes())
    }

    /// The map key of etcd key `etcd_key`, or `None` when it is not under
    /// this prefix or not a valid key (written by someone else: skipped,
    /// never misread).
    pub fn map_key(&self, etcd_key: &[u8]) -> Option<String> {
        let rest = etcd_key.strip_prefix(self.prefix.as_bytes())?;
        let key = std::str::from_utf8(rest).ok()?;
        check_key(key, false).ok()?;
        Some(key.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn application_names_are_checked() {
        assert_eq!(AppPrefix::new("ring").unwrap().as_str(), "/ebbflow/ring/");
        assert_eq!(
            AppPrefix::new("mem-cached_2.x").unwrap().as_str(),
            "/ebbflow/mem-cached_2.x/"
        );
        for (name, why) in [
            ("", "empty"),
            ("a/b", "only ASCII"),
            ("a b", "only ASCII"),
            ("é", "only ASCII"),
            ("..", "not names"),
            (".", "not names"),
        ] {
            let error = AppPrefix::new(name).unwrap_err();
            assert!(error.why.contains(why), "{name:?}: {error}");
        }
        let long = "a".repeat(MAX_APP_LEN + 1);
        assert_eq!(
            AppPrefix::new(&long).unwrap_err().why,
            "longer than 64 bytes"
        );
    }

    #[test]
    fn keys_go_under_the_prefix_and_come_back() {
        let prefix = AppPrefix::new("ring").unwrap();
        assert_eq!(
            prefix.etcd_key("nodes/3", false).unwrap(),
            b"/ebbflow/ring/nodes/3".to_vec()
        );
        assert_eq!(
            prefix.etcd_key("", true).unwrap(),
            b"/ebbflow/ring/".to_vec()
        );
        assert_eq!(
            prefix.map_key(b"/ebbflow/ring/nodes/3").as_deref(),
            Some("nodes/3")
        );
        assert!(matches!(
            prefix.etcd_key("../other/x", false),
            Err(MapError::InvalidKey { .. })
        ));
        assert!(matches!(
            prefix.etcd_key("", false),
            Err(MapError::InvalidKey { .. })
        ));
        // Another application's keys, and keys no map wrote, are not ours.
        assert_eq!(prefix.map_key(b"/ebbflow/ringer/nodes/3"), None);
        assert_eq!(prefix.map_key(b"/ebbflow/ring/"), None);
        assert_eq!(prefix.map_key(b"/ebbflow/ring/a//b"), None);
        assert_eq!(prefix.map_key(b"/ebbflow/ring/\xff"), None);
    }
}
