//! The text protocol (memcached's `protocol.txt`), and dispatch of meta
//! commands to [`super::meta`].
//!
//! Framing follows memcached 1.6.18: a request line ends at `\n` (a `\r`
//! before it is dropped), stops at a NUL byte, and is split into tokens
//! at spaces only. A line that has no `\n` after 2048 bytes closes the
//! connection, unless it is a `get`/`gets` (a large multiget).

mod commands;
pub(crate) mod line;
mod lru;
mod reply;
mod retrieval;
mod stats;
mod storage;
pub(crate) mod tokens;

use ebb_iobuf::IoChain;

pub(crate) use line::{data_block, swallow, Block, Request};
pub(crate) use reply::Reply;
pub(crate) use retrieval::shown_cas;
pub(crate) use storage::{refusal, store};
pub(crate) use tokens::{tokenize, Tokens};

use super::{meta, Context, Outcome};
use crate::store::SetMode;

/// Handles the first text request in `input`.
pub fn handle(input: &IoChain, ctx: &mut Context<'_>, out: &mut IoChain) -> Outcome {
    let Some(request) = Request::parse(input) else {
        return line::without_newline(input);
    };
    let tokens = tokenize(&request.line);
    let mut reply = Reply::new();
    let outcome = dispatch(&request, &tokens, ctx, &mut reply);
    if outcome != Outcome::Incomplete {
        out.append(&mut reply.chain);
    }
    outcome
}

fn dispatch(
    request: &Request<'_>,
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
) -> Outcome {
    let done = Outcome::Consumed(request.line_end);
    let Some(&command) = tokens.list().first().filter(|command| command.len() >= 2) else {
        reply.string(b"ERROR");
        return done;
    };
    if command.len() == 2 && command[0] == b'm' {
        return meta::handle(command[1], request, tokens, ctx, reply);
    }
    let n = tokens.count();
    let want = |ok: bool, reply: &mut Reply, f: &mut dyn FnMut(&mut Reply) -> Outcome| {
        if ok {
            f(reply)
        } else {
            reply.string(b"ERROR");
            done
        }
    };
    match command {
        b"get" | b"bget" => want(n >= 3, reply, &mut |r| {
            retrieval::get(tokens, ctx, r, false, false, done)
        }),
        b"gets" => want(n >= 3, reply, &mut |r| {
            retrieval::get(tokens, ctx, r, true, false, done)
        }),
        b"gat" => want(n >= 3, reply, &mut |r| {
            retrieval::get(tokens, ctx, r, false, true, done)
        }),
        b"gats" => want(n >= 3, reply, &mut |r| {
            retrieval::get(tokens, ctx, r, true, true, done)
        }),
        b"set" | b"add" | b"replace" | b"append" | b"prepend" => {
            let mode = storage::mode_of(command);
            want(n == 6 || n == 7, reply, &mut |r| {
                storage::update(request, tokens, ctx, r, mode)
            })
        }
        b"cas" => want(n == 7 || n == 8, reply, &mut |r| {
            storage::update(request, tokens, ctx, r, SetMode::Cas)
        }),
        b"incr" => want(n == 4 || n == 5, reply, &mut |r| {
            commands::arithmetic(tokens, ctx, r, true, done)
        }),
        b"decr" => want(n == 4 || n == 5, reply, &mut |r| {
            commands::arithmetic(tokens, ctx, r, false, done)
        }),
        b"delete" => want((3..=5).contains(&n), reply, &mut |r| {
            commands::delete(tokens, ctx, r, done)
        }),
        b"touch" => want(n == 4 || n == 5, reply, &mut |r| {
            commands::touch(tokens, ctx, r, done)
        }),
        b"flush_all" => want((2..=4).contains(&n), reply, &mut |r| {
            commands::flush_all(tokens, ctx, r, done)
        }),
        b"cache_memlimit" => want(n == 3 || n == 4, reply, &mut |r| {
            commands::memlimit(tokens, ctx, r, done)
        }),
        b"slabs" => commands::slabs(tokens, reply, done),
        b"lru_crawler" => lru::lru_crawler(tokens, ctx, reply, done),
        b"lru" => lru::lru(tokens, reply, done),
        b"watch" => commands::watch(tokens, ctx, reply, done),
        b"verbosity" => want(n == 3 || n == 4, reply, &mut |r| {
            commands::verbosity(tokens, r, done)
        }),
        b"stats" => stats::stats(tokens, ctx, reply, done),
        b"version" => commands::version(ctx, reply, done),
        b"quit" => Outcome::Close,
        b"shutdown" if ctx.settings.shutdown_enabled => {
            // memcached 1.6 with -A: the server exits without answering.
            let _ = ebb_event::shutdown(0);
            Outcome::Close
        }
        b"shutdown" => {
            reply.string(b"ERROR: shutdown not enabled");
            done
        }
        _ => unknown(tokens, reply, done),
    }
}

/// memcached closes connections that send HTTP requests.
fn unknown(tokens: &Tokens<'_>, reply: &mut Reply, done: Outcome) -> Outcome {
    if tokens
        .list()
        .last()
        .is_some_and(|last| last.starts_with(b"HTTP/"))
    {
        return Outcome::Close;
    }
    reply.string(b"ERROR");
    done
}
