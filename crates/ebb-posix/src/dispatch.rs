//! The one entry every system call of a C program goes through: served
//! by the platform if the personality serves it (`supported.rs`), else
//! `-ENOSYS` and, the first time for that number, one log line naming
//! the call (issue 18: "everything else: ENOSYS, and a log line naming
//! the call, once per call number. Never a crash").

use core::fmt::Write;

use crate::errno::ENOSYS;
use crate::log_once::LoggedCalls;
use crate::supported::{group_of, Group};
use crate::sysno;

/// A system call as musl makes it: Linux's number and six arguments
/// (those the call does not take are unspecified).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysCall {
    /// The x86_64 Linux call number.
    pub number: usize,
    /// The arguments, in Linux's order.
    pub args: [usize; 6],
}

/// What a platform provides: the calls the personality serves, and a
/// place for log lines.
pub trait Backend {
    /// Makes `call`, which belongs to `group`, and returns what Linux
    /// would: the result, or `-errno`; `None` when this platform does not
    /// provide the call yet (answered as an unserved call is).
    fn serve(&self, call: &SysCall, group: Group) -> Option<isize>;

    /// Writes `line` (no newline at its end) where the platform's log
    /// goes: the console natively, standard error hosted.
    fn log(&self, line: &str);
}

/// Dispatches `call` to `backend`, or answers `-ENOSYS` for a call the
/// personality does not serve or the platform does not provide, saying
/// so once per number in `logged`.
pub fn dispatch(backend: &impl Backend, logged: &LoggedCalls, call: &SysCall) -> isize {
    if let Some(result) = group_of(call.number).and_then(|group| backend.serve(call, group)) {
        return result;
    }
    if logged.first_time(call.number) {
        let mut line = LineBuf::new();
        // A full line buffer truncates; the number comes first, so it
        // always shows.
        let _ = match sysno::name(call.number) {
            Some(name) => write!(
                line,
                "ebb-posix: system call {} ({name}) is not provided: ENOSYS (said once per call)",
                call.number
            ),
            None => write!(
                line,
                "ebb-posix: system call {} (not an x86_64 Linux call) is not provided: ENOSYS (said once)",
                call.number
            ),
        };
        backend.log(line.as_str());
    }
    -ENOSYS
}

/// Defines `__ebb_syscall`, the entry musl's patched system calls call
/// (its contract: `ebb-cbuild`'s `musl_patch.rs`), as [`dispatch`] to
/// `$backend` with the calls said so far in `$logged` (a
/// [`LoggedCalls`] static). Each platform's library invokes it once.
/// `long` in C is 64 bits on x86_64, passed in the same registers as
/// `usize`.
#[macro_export]
macro_rules! syscall_entry {
    ($backend:expr, $logged:expr) => {
        /// musl's system-call entry: call `number` with Linux's
        /// arguments; the result, or `-errno`.
        #[no_mangle]
        pub extern "C" fn __ebb_syscall(
            number: usize,
            a: usize,
            b: usize,
            c: usize,
            d: usize,
            e: usize,
            f: usize,
        ) -> isize {
            let call = $crate::SysCall {
                number,
                args: [a, b, c, d, e, f],
            };
            $crate::dispatch(&$backend, &$logged, &call)
        }
    };
}

/// A log line built without allocating: at most [`LineBuf::CAPACITY`]
/// bytes, cut at a character boundary.
struct LineBuf {
    bytes: [u8; LineBuf::CAPACITY],
    len: usize,
}

impl LineBuf {
    const CAPACITY: usize = 160;

    fn new() -> LineBuf {
        LineBuf {
            bytes: [0; LineBuf::CAPACITY],
            len: 0,
        }
    }

    fn as_str(&self) -> &str {
        // Only whole characters are ever copied in (`write_str`).
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("")
    }
}

impl Write for LineBuf {
    fn write_str(&mut self, text: &str) -> core::fmt::Result {
        let room = LineBuf::CAPACITY - self.len;
        let mut take = text.len().min(room);
        while !text.is_char_boundary(take) {
            take -= 1;
        }
        self.bytes[self.len..self.len + take].copy_from_slice(&text.as_bytes()[..take]);
        self.len += take;
        if take < text.len() {
            return Err(core::fmt::Error);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use core::cell::RefCell;
    use std::string::String;
    use std::vec::Vec;

    use proptest::prelude::*;

    use super::*;
    use crate::sysno::nr;

    /// Records what reaches it; serves every call with `7` but
    /// `not_provided`.
    #[derive(Default)]
    struct Recorder {
        served: RefCell<Vec<(SysCall, Group)>>,
        lines: RefCell<Vec<String>>,
        not_provided: Option<usize>,
    }

    impl Backend for Recorder {
        fn serve(&self, call: &SysCall, group: Group) -> Option<isize> {
            self.served.borrow_mut().push((*call, group));
            (Some(call.number) != self.not_provided).then_some(7)
        }

        fn log(&self, line: &str) {
            self.lines.borrow_mut().push(line.into());
        }
    }

    fn call(number: usize) -> SysCall {
        SysCall {
            number,
            args: [1, 2, 3, 4, 5, 6],
        }
    }

    #[test]
    fn a_served_call_reaches_the_backend_untouched() {
        let (backend, logged) = (Recorder::default(), LoggedCalls::new());
        assert_eq!(dispatch(&backend, &logged, &call(nr::WRITE)), 7);
        assert_eq!(
            backend.served.borrow().as_slice(),
            &[(call(nr::WRITE), Group::Files)]
        );
        assert!(backend.lines.borrow().is_empty());
    }

    #[test]
    fn an_unknown_call_is_enosys_and_said_once() {
        let (backend, logged) = (Recorder::default(), LoggedCalls::new());
        for _ in 0..3 {
            assert_eq!(dispatch(&backend, &logged, &call(nr::ACCT)), -ENOSYS);
        }
        assert_eq!(
            backend.lines.borrow().as_slice(),
            &["ebb-posix: system call 163 (acct) is not provided: ENOSYS (said once per call)"]
        );
        assert!(backend.served.borrow().is_empty());
        dispatch(&backend, &logged, &call(99_999));
        assert_eq!(
            backend.lines.borrow()[1],
            "ebb-posix: system call 99999 (not an x86_64 Linux call) is not provided: ENOSYS (said once)"
        );
    }

    #[test]
    fn a_call_the_platform_does_not_provide_is_enosys_and_said_once() {
        let backend = Recorder {
            not_provided: Some(nr::OPENAT),
            ..Recorder::default()
        };
        let logged = LoggedCalls::new();
        for _ in 0..2 {
            assert_eq!(dispatch(&backend, &logged, &call(nr::OPENAT)), -ENOSYS);
        }
        assert_eq!(
            backend.lines.borrow().as_slice(),
            &["ebb-posix: system call 257 (openat) is not provided: ENOSYS (said once per call)"]
        );
        assert_eq!(dispatch(&backend, &logged, &call(nr::READ)), 7);
    }

    #[test]
    fn a_long_line_is_cut_at_a_character() {
        let mut line = LineBuf::new();
        let long = "é".repeat(100);
        assert!(line.write_str(&long).is_err());
        assert_eq!(line.as_str(), "é".repeat(80));
    }

    proptest! {
        /// Whatever the number and arguments: served calls reach the
        /// backend with their arguments, the rest are `-ENOSYS`, and no
        /// number is logged twice.
        #[test]
        fn dispatch_serves_or_refuses(numbers in proptest::collection::vec(0usize..600, 1..40),
                                      args in any::<[usize; 6]>()) {
            let (backend, logged) = (Recorder::default(), LoggedCalls::new());
            for &number in &numbers {
                let call = SysCall { number, args };
                let result = dispatch(&backend, &logged, &call);
                match group_of(number) {
                    Some(_) => prop_assert_eq!(result, 7),
                    None => prop_assert_eq!(result, -ENOSYS),
                }
            }
            let served = numbers.iter().filter(|&&n| group_of(n).is_some()).count();
            prop_assert_eq!(backend.served.borrow().len(), served);
            prop_assert!(backend.served.borrow().iter().all(|(call, _)| call.args == args));
            let mut lines = backend.lines.borrow().clone();
            let said = lines.len();
            lines.sort();
            lines.dedup();
            prop_assert_eq!(lines.len(), said);
        }
    }
}
