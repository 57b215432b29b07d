//! The command line and environment over the simulated link: node 0 (the
//! hosted node) serves the arguments given after `--` and the
//! application's variables; node 1 fetches exactly those (spaces, empty
//! words, non-ASCII and a long argument included, none of which a kernel
//! command line carries), never another variable; a node without the
//! service, one that is unreachable, and a request with a body each fail
//! with the error that says so.

mod sim_support;

use std::sync::Arc;
use std::time::Duration;

use ebb_core::NodeId;
use ebb_iobuf::IoChain;
use ebb_messenger::command_line::{
    load, CommandLine, CommandLineError, ARGS, COMMAND_LINE_EBB, COMMAND_LINE_MALFORMED,
};
use ebb_messenger::{Message, MessengerError, Unreachable};
use sim_support::nodes::{bytes, learn, sim_node, simulate};

fn given() -> CommandLine {
    CommandLine::new(
        vec![
            "--size".into(),
            "two words".into(),
            String::new(),
            "ünïcode".into(),
            "x".repeat(5000),
        ],
        [
            ("EBB_APP_MODE", "fast"),
            ("PATH", "/usr/bin"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
        ]
        .map(|(n, v)| (n.to_string(), v.to_string())),
    )
}

#[test]
fn a_node_fetches_exactly_the_arguments_and_the_application_s_variables() {
    simulate(|sim| async move {
        let hosted = sim_node(&sim, 0);
        let node = sim_node(&sim, 1);
        Arc::new(given()).serve(hosted.messenger).unwrap();
        learn(&node, &hosted);
        let fetched = load(node.messenger).await.unwrap();
        assert_eq!(fetched.args, given().args);
        assert_eq!(
            fetched.env,
            [("EBB_APP_MODE".to_string(), "fast".to_string())]
        );
        assert_eq!(fetched.var("AWS_SECRET_ACCESS_KEY"), None);
        // Kept: the second load does not ask again.
        hosted.side.vanished.set(true);
        assert!(std::ptr::eq(load(node.messenger).await.unwrap(), fetched));
        assert!(std::ptr::eq(
            ebb_messenger::command_line::command_line().unwrap(),
            fetched
        ));
        // A request with a body is refused.
        let node_2 = sim_node(&sim, 2);
        let hosted_3 = sim_node(&sim, 3);
        Arc::new(given()).serve(hosted_3.messenger).unwrap();
        learn(&node_2, &hosted_3);
        let refused = node_2
            .rep
            .call_with(
                NodeId(3),
                None,
                COMMAND_LINE_EBB,
                ARGS,
                Message::payload(bytes(b"x")),
            )
            .await;
        assert_eq!(
            refused.unwrap_err(),
            MessengerError::Refused {
                node: NodeId(3),
                code: COMMAND_LINE_MALFORMED
            }
        );
        let empty = node_2
            .rep
            .call(NodeId(3), COMMAND_LINE_EBB, ARGS, IoChain::new())
            .await
            .unwrap();
        assert_eq!(
            CommandLine::decode_args(&empty.payload.to_vec()),
            Ok(given().args)
        );
    });
}

#[test]
fn a_hosted_node_without_the_service_unknown_or_silent_fails_with_what_happened() {
    simulate(|sim| async move {
        let hosted = sim_node(&sim, 0);
        let node = sim_node(&sim, 1);
        let limit = Duration::from_secs(2);
        assert_eq!(
            CommandLine::fetch(node.messenger, NodeId(0), limit).await,
            Err(CommandLineError::Messenger(MessengerError::Unreachable {
                node: NodeId(0),
                reason: Unreachable::NotInDirectory
            }))
        );
        learn(&node, &hosted);
        assert_eq!(
            CommandLine::fetch(node.messenger, NodeId(0), limit).await,
            Err(CommandLineError::Messenger(MessengerError::UnknownEbb {
                node: NodeId(0),
                ebb: COMMAND_LINE_EBB.raw()
            }))
        );
        Arc::new(given()).serve(hosted.messenger).unwrap();
        hosted.side.vanished.set(true);
        assert_eq!(
            CommandLine::fetch(node.messenger, NodeId(0), limit).await,
            Err(CommandLineError::NoReply { waited_ms: 2000 })
        );
    });
}
