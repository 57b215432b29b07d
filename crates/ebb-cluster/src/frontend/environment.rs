//! The frontend's environment as the command-line Ebb serves it: the
//! variables whose name and value are both UTF-8 (the Ebb's strings are);
//! the others are left out rather than stopping the frontend
//! (`std::env::vars` panics on them).

use std::ffi::OsString;

/// The entries of `vars` (as `std::env::vars_os` gives them) that are
/// UTF-8 in name and value.
pub(super) fn utf8_only(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> impl Iterator<Item = (String, String)> {
    vars.into_iter()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStringExt;

    use super::*;

    #[test]
    fn variables_that_are_not_utf8_are_left_out_not_a_panic() {
        let not_utf8 = || OsString::from_vec(vec![b'a', 0xff]);
        let vars = [
            (OsString::from("EBB_KEPT"), OsString::from("yes")),
            (not_utf8(), OsString::from("bad name")),
            (OsString::from("EBB_BAD_VALUE"), not_utf8()),
        ];
        let kept: Vec<_> = utf8_only(vars).collect();
        assert_eq!(kept, [("EBB_KEPT".to_owned(), "yes".to_owned())]);
    }
}
