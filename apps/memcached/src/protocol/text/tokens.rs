//! memcached's `tokenize_command`: split a request line at spaces.

/// memcached's token array size, counting the terminal empty token.
pub const MAX_TOKENS: usize = 24;

/// The tokens of a request line, in an array of memcached's size rather
/// than a vector: one request, one allocation fewer (every allocation on a
/// lightly loaded core touches cold memory).
#[derive(Debug, Default)]
pub struct Tokens<'a> {
    /// Up to `MAX_TOKENS - 1` tokens, none empty; `taken` of them are set.
    slots: [&'a [u8]; MAX_TOKENS - 1],
    taken: usize,
    /// What follows the last token when the line had more tokens than fit.
    pub rest: Option<&'a [u8]>,
}

impl<'a> Tokens<'a> {
    /// The tokens, none empty.
    pub fn list(&self) -> &[&'a [u8]] {
        &self.slots[..self.taken]
    }

    fn push(&mut self, token: &'a [u8]) {
        self.slots[self.taken] = token;
        self.taken += 1;
    }

    /// memcached's `ntokens`: the tokens plus its terminal empty token.
    pub fn count(&self) -> usize {
        self.taken + 1
    }

    /// The token at `index`, or an empty slice past the end (memcached's
    /// terminal token).
    pub fn get(&self, index: usize) -> &[u8] {
        self.list().get(index).copied().unwrap_or_default()
    }

    /// Whether the next-to-last token (memcached's noreply position) is
    /// `noreply`.
    pub fn noreply(&self) -> bool {
        self.list().last().is_some_and(|last| *last == b"noreply")
    }
}

/// Splits `line` at spaces, as memcached does: runs of spaces separate
/// tokens, at most `MAX_TOKENS - 1` tokens are taken, and the remainder
/// is kept in `rest`.
pub fn tokenize(line: &[u8]) -> Tokens<'_> {
    let mut tokens = Tokens::default();
    let mut start = 0;
    // The spaces, found a word at a time (`./ebb bench insns` counted a
    // byte at a time as a sixteenth of a request natively, and the memchr
    // crate's per-call setup more: see `ebb_iobuf::scan`).
    for i in ebb_iobuf::scan::positions(b' ', line) {
        if start != i {
            tokens.push(&line[start..i]);
            if tokens.taken == MAX_TOKENS - 1 {
                let rest = &line[i + 1..];
                tokens.rest = (!rest.is_empty()).then_some(rest);
                return tokens;
            }
        }
        start = i + 1;
    }
    if start < line.len() {
        tokens.push(&line[start..]);
    }
    tokens
}

/// Every space-separated token of `line` (for multi-key gets, whose key
/// list memcached re-tokenizes until the end of the line).
pub fn all_tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|&b| b == b' ').filter(|token| !token.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn splits_like_memcached() {
        let t = tokenize(b"  set  a 0 ");
        assert_eq!(t.list(), [&b"set"[..], b"a", b"0"]);
        assert!(t.rest.is_none());
        let long: Vec<u8> = (0..30).flat_map(|i| [b'a' + (i % 26), b' ']).collect();
        let t = tokenize(&long);
        assert_eq!(t.list().len(), 23);
        assert_eq!(t.rest.map(<[u8]>::len), Some(14));
    }
}
