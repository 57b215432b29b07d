//! Property tests of the FileSystem Ebb's protocol: every request, reply
//! and listing survives encode and decode, and garbage (random bytes, any
//! message number, truncations of valid messages) decodes to a typed
//! error or to a value that encodes back to the same bytes, never a
//! panic.

mod wire_support;

use ebb_messenger::MessageNumber;
use ebb_offload::{
    decode_listing, encode_listing, DecodeError, DirEntry, FileKind, FsError, Handle, OpenFlags,
    Reply, Request, Stat, MAX_PATH_LEN,
};
use proptest::prelude::*;

fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z./]{1,40}",
        "\\PC{0,30}",
        Just(String::new()),
        Just("x".repeat(MAX_PATH_LEN)),
    ]
}

fn handle() -> impl Strategy<Value = Handle> {
    any::<u32>().prop_map(Handle)
}

fn flags() -> impl Strategy<Value = OpenFlags> {
    (0u32..64).prop_filter_map("read or write", OpenFlags::from_bits)
}

fn mode() -> impl Strategy<Value = u32> {
    0u32..=0o777
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (path(), flags(), mode()).prop_map(|(path, flags, mode)| Request::Open {
            path,
            flags,
            mode
        }),
        (handle(), any::<u32>()).prop_map(|(handle, len)| Request::Read { handle, len }),
        (handle(), any::<u32>(), any::<u64>()).prop_map(|(handle, len, offset)| Request::Pread {
            handle,
            len,
            offset
        }),
        handle().prop_map(|handle| Request::Write { handle }),
        (handle(), any::<u64>()).prop_map(|(handle, offset)| Request::Pwrite { handle, offset }),
        path().prop_map(|path| Request::Stat { path }),
        path().prop_map(|path| Request::ReadDir { path }),
        handle().prop_map(|handle| Request::Close { handle }),
        path().prop_map(|path| Request::Unlink { path }),
        (path(), mode()).prop_map(|(path, mode)| Request::Mkdir { path, mode }),
        (path(), path()).prop_map(|(from, to)| Request::Rename { from, to }),
    ]
}

fn kind() -> impl Strategy<Value = FileKind> {
    prop_oneof![
        Just(FileKind::File),
        Just(FileKind::Dir),
        Just(FileKind::Symlink),
        Just(FileKind::Other)
    ]
}

fn wire_error() -> impl Strategy<Value = FsError> {
    prop_oneof![
        Just(FsError::NotFound),
        Just(FsError::PermissionDenied),
        Just(FsError::Exists),
        Just(FsError::NotDir),
        Just(FsError::IsDir),
        Just(FsError::NotEmpty),
        Just(FsError::BadHandle),
        Just(FsError::Escape),
        Just(FsError::InvalidPath),
        Just(FsError::TooLarge),
        Just(FsError::NameTooLong),
        Just(FsError::TooManyOpen),
        Just(FsError::BadRequest),
        Just(FsError::NotAFile),
        (1u16..).prop_map(FsError::Io),
    ]
}

/// A reply and the number of a request it answers.
fn reply() -> impl Strategy<Value = (MessageNumber, Reply)> {
    let stat = (
        kind(),
        mode(),
        any::<u64>(),
        any::<i64>(),
        0u32..1_000_000_000,
    )
        .prop_map(|(kind, mode, size, modified_secs, modified_nanos)| Stat {
            kind,
            mode,
            size,
            modified_secs,
            modified_nanos,
        });
    prop_oneof![
        handle().prop_map(|h| (MessageNumber(1), Reply::Opened(h))),
        prop_oneof![Just(2u32), Just(3)].prop_map(|n| (MessageNumber(n), Reply::Data)),
        (prop_oneof![Just(4u32), Just(5)], any::<u32>())
            .prop_map(|(n, w)| (MessageNumber(n), Reply::Written(w))),
        stat.prop_map(|s| (MessageNumber(6), Reply::Stat(s))),
        any::<u32>().prop_map(|c| (MessageNumber(7), Reply::Listing(c))),
        (8u32..=11).prop_map(|n| (MessageNumber(n), Reply::Done)),
        (1u32..=11, wire_error()).prop_map(|(n, e)| (MessageNumber(n), Reply::Failed(e))),
    ]
}

fn entries() -> impl Strategy<Value = Vec<DirEntry>> {
    prop::collection::vec(
        ("[a-zA-Z0-9_.-]{1,20}", kind()).prop_map(|(name, kind)| DirEntry { name, kind }),
        0..20,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn requests_round_trip(request in request()) {
        match request.encode() {
            Ok(control) => {
                prop_assert_eq!(Request::decode(request.number(), &control), Ok(request.clone()));
                // Every proper prefix is truncated, never a value.
                for cut in 0..control.len() {
                    let decoded = Request::decode(request.number(), &control[..cut]);
                    let truncated = matches!(decoded, Err(DecodeError::Truncated { .. }));
                    prop_assert!(truncated, "a prefix of {} bytes gave {:?}", cut, decoded);
                }
            }
            Err(error) => prop_assert_eq!(error, FsError::NameTooLong),
        }
    }

    #[test]
    fn replies_round_trip((number, reply) in reply()) {
        let control = reply.encode();
        prop_assert_eq!(Reply::decode(number, &control), Ok(reply));
        for cut in 0..control.len() {
            let truncated = matches!(
                Reply::decode(number, &control[..cut]),
                Err(DecodeError::Truncated { .. })
            );
            prop_assert!(truncated);
        }
    }

    #[test]
    fn listings_round_trip(entries in entries()) {
        let kept: Vec<_> = entries.iter().filter(|e| e.name != "." && e.name != "..").cloned().collect();
        let bytes = encode_listing(&entries);
        let count = u32::try_from(kept.len()).unwrap();
        prop_assert_eq!(decode_listing(&bytes, count), Ok(kept));
        let truncated = matches!(
            decode_listing(&bytes, count + 1),
            Err(DecodeError::Truncated { .. })
        );
        prop_assert!(truncated);
    }

    #[test]
    fn garbage_decodes_to_an_error_or_to_itself(data in prop::collection::vec(any::<u8>(), 0..64)) {
        wire_support::run(&data);
    }

    #[test]
    fn valid_requests_with_one_byte_changed_never_panic(
        request in request(), at in any::<prop::sample::Index>(), byte in any::<u8>()
    ) {
        if let Ok(mut control) = request.encode() {
            if !control.is_empty() {
                let i = at.index(control.len());
                control[i] = byte;
            }
            let mut input = vec![u8::try_from(request.number().0).unwrap()];
            input.extend_from_slice(&control);
            wire_support::run(&input);
        }
    }
}

#[test]
fn the_decoder_names_what_is_wrong() {
    let open = |flags: u32, mode: u32, path: &[u8]| {
        let mut c = flags.to_le_bytes().to_vec();
        c.extend_from_slice(&mode.to_le_bytes());
        c.extend_from_slice(&u16::try_from(path.len()).unwrap().to_le_bytes());
        c.extend_from_slice(path);
        Request::decode(MessageNumber(1), &c)
    };
    assert_eq!(
        open(1, 0o644, b"a"),
        Ok(Request::Open {
            path: "a".into(),
            flags: OpenFlags::READ,
            mode: 0o644
        })
    );
    assert_eq!(
        open(64 | 1, 0, b"a"),
        Err(DecodeError::BadFlags { flags: 65 })
    );
    assert_eq!(open(4, 0, b"a"), Err(DecodeError::BadFlags { flags: 4 }));
    assert_eq!(
        open(1, 0o10000, b"a"),
        Err(DecodeError::BadMode { mode: 0o10000 })
    );
    // A set-user-ID, set-group-ID or sticky bit: the server creates files
    // as root in a cluster, so a node may not ask for them.
    for mode in [0o4755, 0o2775, 0o1777] {
        assert_eq!(open(1, mode, b"a"), Err(DecodeError::BadMode { mode }));
    }
    assert_eq!(open(1, 0, &[0xff]), Err(DecodeError::PathNotUtf8));
    assert_eq!(
        open(1, 0, &vec![b'a'; MAX_PATH_LEN + 1]),
        Err(DecodeError::PathTooLong {
            len: MAX_PATH_LEN + 1
        })
    );
    assert_eq!(
        Request::decode(MessageNumber(12), &[]),
        Err(DecodeError::UnknownMessage { number: 12 })
    );
    assert_eq!(
        Request::decode(MessageNumber(8), &[1, 0, 0, 0, 9]),
        Err(DecodeError::Trailing { extra: 1 })
    );
    assert_eq!(
        Request::decode(
            MessageNumber(5),
            &[1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        ),
        Err(DecodeError::Reserved { value: 1 })
    );
    assert_eq!(
        Reply::decode(MessageNumber(6), &[15, 0, 0, 0]),
        Err(DecodeError::UnknownStatus {
            status: 15,
            errno: 0
        })
    );
    assert_eq!(
        Reply::decode(MessageNumber(6), &[1, 0, 2, 0]),
        Err(DecodeError::UnknownStatus {
            status: 1,
            errno: 2
        })
    );
    assert_eq!(
        Reply::decode(MessageNumber(6), &[15, 0, 2, 0]),
        Ok(Reply::Failed(FsError::Io(2)))
    );
    assert_eq!(
        decode_listing(&[1, 2, 0, b'.', b'.'], 1),
        Err(DecodeError::BadName)
    );
    assert_eq!(
        decode_listing(&[9, 1, 0, b'a'], 1),
        Err(DecodeError::UnknownKind { kind: 9 })
    );
    // Every error says what happened in a sentence.
    assert_eq!(
        FsError::Escape.to_string(),
        "the path leaves the shared directory (`..`, an absolute path or a symlink pointing \
         out): refused"
    );
}
