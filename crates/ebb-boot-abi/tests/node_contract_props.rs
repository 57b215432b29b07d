//! Property tests of the boot contract's node words: what a launcher
//! writes, the node reads back unchanged; and no command line, however
//! malformed, makes the parser panic.

use std::net::{Ipv4Addr, SocketAddrV4};

use ebb_boot_abi::{parse_cmdline, NodeContract, NODE_KEYS};
use proptest::prelude::*;

prop_compose! {
    fn any_contract()(
        node in 1u32..,
        ip: u32,
        port in 1u16..,
        start in 0u32..u32::MAX,
        len in 1u32..,
        messenger_port in 1u16..,
    ) -> NodeContract {
        NodeContract {
            node,
            frontend: SocketAddrV4::new(Ipv4Addr::from(ip.max(1)), port),
            ebb_ids_start: start,
            ebb_ids_end: start.saturating_add(len).max(start + 1),
            messenger_port,
        }
    }
}

/// Words made of the node keys and pieces of their values, to reach every
/// branch of the parser, mixed with arbitrary text.
fn wordish() -> impl Strategy<Value = String> {
    prop_oneof![
        (prop::sample::select(NODE_KEYS.to_vec()), "[0-9.:\\-]{0,24}")
            .prop_map(|(key, value)| format!("{key}={value}")),
        "\\PC{0,16}",
        Just("--".to_string()),
    ]
}

proptest! {
    #[test]
    fn what_the_launcher_writes_the_node_reads(contract in any_contract(), cores in 1usize..64) {
        let line = format!("cores={cores} {contract} -- app args");
        let (options, args) = parse_cmdline(&line, |word| panic!("unknown word {word}"));
        prop_assert_eq!(options.node, Ok(Some(contract)));
        prop_assert_eq!(options.cores, cores);
        prop_assert_eq!(args.collect::<Vec<_>>(), ["app", "args"]);
        let words = contract.to_string();
        prop_assert_eq!(NodeContract::parse_words(words.split_whitespace()), Ok(Some(contract)));
    }

    #[test]
    fn no_command_line_makes_the_parser_panic(words in proptest::collection::vec(wordish(), 0..12)) {
        let line = words.join(" ");
        let (options, _) = parse_cmdline(&line, |_| {});
        // An error names one of the four words.
        if let Err(error) = options.node {
            let text = error.to_string();
            prop_assert!(NODE_KEYS.iter().any(|key| text.contains(key)), "{}", text);
        }
    }

    #[test]
    fn arbitrary_text_never_panics(line in "\\PC{0,200}") {
        let _ = parse_cmdline(&line, |_| {});
        let _ = NodeContract::parse_words(line.split_whitespace());
    }
}
