//! What `./ebb bench insns` counts with: the ranges file of the
//! `insn_count` QEMU plugin (`crates/ebb-cbuild/plugins/insn_count.c`)
//! that splits a native image's instructions by layer, made from the
//! image's symbol table, and the counts the plugin answers on its socket.
//!
//! A function belongs to the layer of the first crate its demangled name
//! mentions (`<ebb_netstack::tcp::Tcb as ebb_net::Conn>::f` is IP/TCP;
//! `core::ptr::drop_in_place<memcached::Item>` is memcached's), the longer
//! prefix winning at the same place (`ebb_native::drivers::` is the
//! driver, the rest of `ebb_native::` the runtime). Functions of no
//! listed crate (core, alloc, compiler builtins) are `libraries`.

use std::path::Path;
use std::process::Command;

/// The layers, each with the crate paths that make it, in report order.
pub const LAYERS: &[(&str, &[&str])] = &[
    ("driver", &["ebb_native::drivers::"]),
    ("ip_tcp", &["ebb_netstack::", "ebb_net::", "smoltcp::"]),
    ("memcached", &["memcached::"]),
    ("event_loop", &["ebb_event::"]),
    ("memory", &["ebb_mem::"]),
    ("iobuf", &["ebb_iobuf::", "bytes::"]),
    (
        "runtime",
        &[
            "ebb_native::",
            "ebb_core::",
            "ebb_app::",
            "ebb_boot_abi::",
            "ebb_messenger::",
        ],
    ),
];
/// The layer of functions no listed crate claims.
pub const LIBRARIES: &str = "libraries";

/// The layer of the function whose demangled name is `name`.
pub fn layer_of(name: &str) -> &'static str {
    let mut best: Option<(usize, usize, &'static str)> = None;
    for &(layer, prefixes) in LAYERS {
        for prefix in prefixes {
            let mut from = 0;
            while let Some(found) = name[from..].find(prefix) {
                let at = from + found;
                // A crate name starts the path: not `my_ebb_net::`.
                let starts_path = at == 0
                    || !name.as_bytes()[at - 1].is_ascii_alphanumeric()
                        && name.as_bytes()[at - 1] != b'_';
                if starts_path {
                    let better = match best {
                        None => true,
                        Some((best_at, best_len, _)) => {
                            at < best_at || at == best_at && prefix.len() > best_len
                        }
                    };
                    if better {
                        best = Some((at, prefix.len(), layer));
                    }
                    break;
                }
                from = at + 1;
            }
        }
    }
    best.map_or(LIBRARIES, |(_, _, layer)| layer)
}

/// One function of an image: where it is and its demangled name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Its first address.
    pub start: u64,
    /// Its length in bytes.
    pub size: u64,
    /// Its demangled name.
    pub name: String,
}

/// The text symbols with a size in `nm -C --defined-only -S` output.
pub fn parse_nm(text: &str) -> Vec<Function> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.splitn(4, ' ');
            let start = u64::from_str_radix(words.next()?, 16).ok()?;
            let size = u64::from_str_radix(words.next()?, 16).ok()?;
            let kind = words.next()?;
            let name = words.next()?;
            (matches!(kind, "t" | "T" | "W" | "w") && size > 0).then(|| Function {
                start,
                size,
                name: name.to_owned(),
            })
        })
        .collect()
}

/// The plugin's ranges file for `functions`: `LAYER START END` lines, in
/// address order, none overlapping (an alias is dropped, and a function
/// that starts inside another loses the bytes they share: the first at
/// an address keeps them).
pub fn ranges_file(functions: &[Function]) -> String {
    ranges_file_named(functions, |function| layer_of(&function.name).to_owned())
}

/// The most functions [`ranges_file_by_function`] names apart: the
/// plugin takes 64 names, and the other layers and `LAYER_rest` need
/// theirs.
pub const MAX_NAMES: usize = 48;

/// [`ranges_file`], but each function of `layer` is a range of its own,
/// named by [`short_name`] (functions of one name, such as a generic's
/// instances, share it): where a layer's instructions go. `layer` may
/// be `LAYER:TEXT`: then only the functions whose name holds `TEXT` are
/// apart. Past [`MAX_NAMES`] names, and for the functions left out, the
/// rest of the layer is `LAYER_rest`.
pub fn ranges_file_by_function(functions: &[Function], layer: &str) -> String {
    let (layer, matching) = layer.split_once(':').unwrap_or((layer, ""));
    let mut names: Vec<String> = Vec::new();
    ranges_file_named(functions, |function| {
        let of = layer_of(&function.name);
        if of != layer {
            return of.to_owned();
        }
        let name = fit_name(&short_name(&function.name));
        let known = names.contains(&name);
        if name.contains(matching) && (known || names.len() < MAX_NAMES) {
            if !known {
                names.push(name.clone());
            }
            name
        } else {
            format!("{layer}_rest")
        }
    })
}

/// The longest name the plugin reads (`%63s`).
pub const NAME_MAX: usize = 63;

/// `name` within [`NAME_MAX`] bytes: leading path segments dropped
/// (`Type::method` kept), then cut, at a character boundary.
#[must_use]
pub fn fit_name(name: &str) -> String {
    let mut name = name;
    while name.len() > NAME_MAX {
        match name.split_once("::") {
            Some((_, rest)) if !rest.is_empty() => name = rest,
            _ => break,
        }
    }
    let mut end = name.len().min(NAME_MAX);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_owned()
}

/// A demangled name as one word: a qualified self type (`<T as
/// Trait>::f`, `<T>::f`) as `T::f`, generic arguments and closure and
/// hash suffixes dropped, spaces gone (`<ebb_iobuf::chain::IoChain>::append`
/// → `ebb_iobuf::chain::IoChain::append`).
#[must_use]
pub fn short_name(name: &str) -> String {
    let mut name = name.to_owned();
    if name.starts_with('<') {
        let mut depth = 0usize;
        let close = name.char_indices().find_map(|(at, c)| {
            match c {
                '<' => depth += 1,
                '>' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(at);
                    }
                }
                _ => {}
            }
            None
        });
        if let Some(close) = close {
            let inner = &name[1..close];
            let own = inner.find(" as ").map_or(inner, |at| &inner[..at]);
            name = format!("{own}{}", &name[close + 1..]);
        }
    }
    let mut out = String::new();
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 && !c.is_whitespace() => out.push(c),
            _ => {}
        }
    }
    match out.find("::{") {
        Some(at) => out[..at].to_owned(),
        None => out,
    }
}

fn ranges_file_named(
    functions: &[Function],
    mut name_of: impl FnMut(&Function) -> String,
) -> String {
    let mut sorted: Vec<&Function> = functions.iter().collect();
    sorted.sort_by_key(|f| (f.start, std::cmp::Reverse(f.size)));
    let mut text = String::from("# layer start end (hex, end exclusive), by ebb-bench insns\n");
    let mut covered_to = 0u64;
    for function in sorted {
        let start = function.start.max(covered_to);
        let end = function.start.saturating_add(function.size);
        if start >= end {
            continue;
        }
        text.push_str(&format!("{} {start:x} {end:x}\n", name_of(function)));
        covered_to = end;
    }
    text
}

/// The layer ranges of the native image at `image` (`nm` reads its
/// symbols); with `functions_of`, that layer's functions each apart
/// ([`ranges_file_by_function`]).
pub fn image_ranges(image: &Path, functions_of: Option<&str>) -> Result<String, String> {
    let out = Command::new("nm")
        .args(["-C", "--defined-only", "-S"])
        .arg(image)
        .output()
        .map_err(|e| format!("cannot run nm (binutils): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "nm {}: {}",
            image.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let functions = parse_nm(&String::from_utf8_lossy(&out.stdout));
    if functions.is_empty() {
        return Err(format!("{} has no function symbols", image.display()));
    }
    Ok(match functions_of {
        Some(layer) => ranges_file_by_function(&functions, layer),
        None => ranges_file(&functions),
    })
}

/// The Linux guest's ranges: the kernel's half of the address space and
/// user space's.
pub const LINUX_RANGES: &str = "kernel ffff800000000000 ffffffffffffffff\nuser 0 800000000000\n";

/// The counts the plugin answered (`NAME COUNT` lines).
pub fn parse_counts(text: &str) -> Result<Vec<(String, u64)>, String> {
    text.lines()
        .map(|line| {
            let (name, count) = line
                .split_once(' ')
                .ok_or_else(|| format!("not NAME COUNT: {line:?}"))?;
            let count = count
                .parse()
                .map_err(|_| format!("not a count: {line:?}"))?;
            Ok((name.to_owned(), count))
        })
        .collect()
}

/// Reads the counts from the plugin's socket at `socket`.
pub fn read_counts(socket: &Path) -> Result<Vec<(String, u64)>, String> {
    use std::io::Read;
    let mut stream = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| format!("the plugin's socket {}: {e}", socket.display()))?;
    // A plugin whose answering thread ended would leave the connection
    // in its listen queue, unanswered.
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .map_err(|e| format!("the plugin's socket: {e}"))?;
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .map_err(|e| format!("reading the plugin's counts: {e}"))?;
    parse_counts(&text)
}

/// `after - before`, name by name (both from the same plugin).
pub fn difference(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64)> {
    after
        .iter()
        .map(|(name, count)| {
            let earlier = before
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, c)| *c);
            (name.clone(), count.saturating_sub(earlier))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_go_to_the_first_crate_they_name() {
        assert_eq!(layer_of("ebb_netstack::tcp::Tcb::input"), "ip_tcp");
        assert_eq!(
            layer_of("<ebb_netstack::iface::Iface as ebb_net::NetStack>::listen"),
            "ip_tcp"
        );
        assert_eq!(
            layer_of("core::ptr::drop_in_place<memcached::store::Item>"),
            "memcached"
        );
        assert_eq!(
            layer_of("ebb_native::drivers::virtio::net::Rx::refill"),
            "driver"
        );
        assert_eq!(layer_of("ebb_native::runtime::node::halt"), "runtime");
        assert_eq!(layer_of("ebb_event::manager::run_loop"), "event_loop");
        assert_eq!(layer_of("memcpy"), LIBRARIES);
        assert_eq!(
            layer_of("my_ebb_net::f"),
            LIBRARIES,
            "a crate name starts a path"
        );
    }

    #[test]
    fn nm_lines_become_functions_and_non_overlapping_ranges() {
        let nm = "0000000000201000 0000000000000010 T memcached::serve\n\
                  0000000000201000 0000000000000010 T memcached::serve_alias\n\
                  0000000000201008 0000000000000010 t ebb_event::inner\n\
                  0000000000202000 0000000000000000 T empty\n\
                  0000000000300000 0000000000000008 D data\n\
                  0000000000201020 0000000000000004 W memcpy\n";
        let functions = parse_nm(nm);
        assert_eq!(functions.len(), 4);
        assert_eq!(
            ranges_file(&functions),
            "# layer start end (hex, end exclusive), by ebb-bench insns\n\
             memcached 201000 201010\n\
             event_loop 201010 201018\n\
             libraries 201020 201024\n"
        );
    }

    #[test]
    fn counts_parse_and_subtract() {
        let before = parse_counts("total 10\nkernel 7\nother 3\n").expect("counts");
        let after = parse_counts("total 25\nkernel 20\nother 5\n").expect("counts");
        assert_eq!(
            difference(&before, &after),
            [
                ("total".to_owned(), 15),
                ("kernel".to_owned(), 13),
                ("other".to_owned(), 2)
            ]
        );
        assert!(parse_counts("total x\n")
            .unwrap_err()
            .contains("not a count"));
        assert!(parse_counts("nonsense\n")
            .unwrap_err()
            .contains("not NAME COUNT"));
    }

    #[test]
    fn a_layers_functions_get_one_word_names_of_their_own() {
        assert_eq!(
            short_name("<ebb_iobuf::chain::IoChain>::append"),
            "ebb_iobuf::chain::IoChain::append"
        );
        assert_eq!(
            short_name("ebb_iobuf::segments::Segments::push_back::{closure#0}"),
            "ebb_iobuf::segments::Segments::push_back"
        );
        assert_eq!(
            short_name("<bytes::Bytes as core::ops::drop::Drop>::drop"),
            "bytes::Bytes::drop"
        );
        assert_eq!(
            short_name("core::ptr::drop_in_place<ebb_iobuf::IoBuf>"),
            "core::ptr::drop_in_place"
        );
        let long = "ebb_native::drivers::virtio::queue::split::SplitQueue::enable_interrupts";
        assert_eq!(
            fit_name(long),
            "drivers::virtio::queue::split::SplitQueue::enable_interrupts"
        );
        assert!(fit_name(&"x".repeat(100)).len() == NAME_MAX);
        let functions = [
            Function {
                start: 0x10,
                size: 0x10,
                name: "ebb_iobuf::chain::IoChain::append".into(),
            },
            Function {
                start: 0x20,
                size: 0x10,
                name: "ebb_netstack::tcp::input".into(),
            },
        ];
        assert_eq!(
            ranges_file_by_function(&functions, "iobuf")
                .lines()
                .skip(1)
                .collect::<Vec<_>>(),
            ["ebb_iobuf::chain::IoChain::append 10 20", "ip_tcp 20 30"]
        );
    }
}
