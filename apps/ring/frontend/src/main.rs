//! `ring-frontend`: the hosted frontend of the ring application
//! (`./ebb cluster up ring --nodes N -- [--bytes B] [--rounds R]` runs
//! it). It allocates the native ring nodes through the frontend runtime
//! (`ebb_cluster::frontend`), hands them to the ring's frontend logic
//! (`ring::run_frontend`: work slices as IoBufs, the token around the
//! ring), and prints the report.
//!
//! Exit code: the report's (`ring::EXIT_OK` 0, also when nodes were lost
//! and the others finished; `EXIT_MISMATCH` 1; `EXIT_NO_NODES` 3), 2 for
//! a wrong command line, 1 when the cluster could not run, 128 + the
//! signal after SIGINT/SIGTERM.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use ebb_cluster::frontend::{exit_code, run_frontend, usage_error, FrontendArgs};
use ebb_core::EbbId;
use ring::{WorkPlan, WorkerNode, EXIT_NO_NODES};

fn main() -> ExitCode {
    let args = match FrontendArgs::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(error) => return usage_error("ring-frontend", &error, ""),
    };
    let plan = match WorkPlan::from_args(&args.rest) {
        Ok(plan) => plan,
        Err(error) => return usage_error("ring-frontend", &error.to_string(), ""),
    };
    let nodes = args.nodes;
    let ran = run_frontend(args.options, move |frontend| async move {
        let mut workers = Vec::new();
        for allocated in frontend.allocate(nodes).await {
            // A node that did not come up is left out; the ring runs
            // over the others.
            match allocated.map_err(|e| e.to_string()).and_then(|node| {
                let worker = EbbId::new(node.ebb_ids.start).map_err(|e| e.to_string())?;
                Ok(WorkerNode {
                    node: node.id,
                    worker,
                })
            }) {
                Ok(worker) => workers.push(worker),
                Err(error) => eprintln!("error: {error}"),
            }
        }
        if workers.is_empty() {
            eprintln!("error: no node came up");
            return EXIT_NO_NODES;
        }
        let report = ring::run_frontend(frontend.messenger(), workers, plan).await;
        println!("{report}");
        report.exit_code()
    });
    exit_code(ran)
}
