//! Which kernel modules the guest must load for virtio-net, and in what
//! order.
//!
//! Debian's cloud kernel builds virtio, virtio_pci and virtio_net as modules
//! and its package ships no `modules.dep` (depmod runs at install time), so
//! the dependencies are read from each module's `.modinfo` strings
//! (`depends=a,b`), and modules listed in `modules.builtin` are skipped.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The modules the guest asks for: the PCI transport and the network driver.
pub const VIRTIO_NET_MODULES: [&str; 2] = ["virtio_pci", "virtio_net"];

/// A module's name as the kernel spells it: the file stem with `-` as `_`.
pub fn module_name(file_name: &str) -> Option<String> {
    let stem = file_name.strip_suffix(".ko")?;
    Some(stem.replace('-', "_"))
}

/// The `depends=` list of a module file's `.modinfo` strings. Each entry
/// there is a NUL-terminated `key=value`, so the key is looked for right
/// after a NUL.
pub fn modinfo_depends(module: &[u8]) -> Vec<String> {
    const KEY: &[u8] = b"\0depends=";
    let Some(at) = module.windows(KEY.len()).position(|w| w == KEY) else {
        return Vec::new();
    };
    let value = &module[at + KEY.len()..];
    let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end])
        .split(',')
        .filter(|name| !name.is_empty())
        .map(|name| name.replace('-', "_"))
        .collect()
}

/// The names in a `modules.builtin` file (`kernel/drivers/x/name.ko` lines).
pub fn builtin_names(text: &str) -> HashSet<String> {
    text.lines()
        .filter_map(|line| line.rsplit('/').next())
        .filter_map(module_name)
        .collect()
}

/// Every `*.ko` under `dir`, by module name.
pub fn index_modules(dir: &Path) -> Result<HashMap<String, PathBuf>, String> {
    let mut index = HashMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = std::fs::read_dir(&current)
            .map_err(|e| format!("cannot list {}: {e}", current.display()))?;
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Some(name) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(module_name)
            {
                index.insert(name, path);
            }
        }
    }
    Ok(index)
}

/// The modules to load so that all of `wanted` are present, dependencies
/// first (a depth-first post-order); built-in ones are left out.
/// `depends(name)` gives a module's dependencies, or `None` if there is no
/// such module.
pub fn load_order(
    wanted: &[&str],
    builtin: &HashSet<String>,
    depends: &mut dyn FnMut(&str) -> Option<Vec<String>>,
) -> Result<Vec<String>, String> {
    fn visit(
        name: &str,
        builtin: &HashSet<String>,
        depends: &mut dyn FnMut(&str) -> Option<Vec<String>>,
        in_progress: &mut Vec<String>,
        order: &mut Vec<String>,
    ) -> Result<(), String> {
        if builtin.contains(name) || order.iter().any(|n| n == name) {
            return Ok(());
        }
        if in_progress.iter().any(|n| n == name) {
            return Err(format!(
                "module dependency cycle: {} -> {name}",
                in_progress.join(" -> ")
            ));
        }
        let deps = depends(name)
            .ok_or_else(|| format!("the kernel has no module {name} and does not build it in"))?;
        in_progress.push(name.to_owned());
        for dep in deps {
            visit(&dep, builtin, depends, in_progress, order)?;
        }
        in_progress.pop();
        order.push(name.to_owned());
        Ok(())
    }
    let mut order = Vec::new();
    for name in wanted {
        visit(name, builtin, depends, &mut Vec::new(), &mut order)?;
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modinfo_depends_are_read_after_a_nul() {
        let module = b"\x7fELF junk\0license=GPL\0depends=virtio_ring,virtio,net_failover\0name=virtio_net\0";
        assert_eq!(
            modinfo_depends(module),
            ["virtio_ring", "virtio", "net_failover"]
        );
        assert!(modinfo_depends(b"\0depends=\0name=failover\0").is_empty());
        assert!(modinfo_depends(b"no modinfo here").is_empty());
    }

    #[test]
    fn names_and_builtins() {
        assert_eq!(module_name("virtio-rng.ko").as_deref(), Some("virtio_rng"));
        assert_eq!(module_name("README"), None);
        let builtin = builtin_names("kernel/drivers/char/mem.ko\nkernel/net/ipv4/tcp-cubic.ko\n");
        assert!(builtin.contains("mem") && builtin.contains("tcp_cubic"));
    }

    /// The dependencies of Debian 12's cloud kernel (6.1).
    fn cloud_kernel(name: &str) -> Option<Vec<String>> {
        let deps: &[&str] = match name {
            "virtio_net" => &["virtio_ring", "virtio", "net_failover"],
            "virtio_pci" => &[
                "virtio_ring",
                "virtio_pci_modern_dev",
                "virtio_pci_legacy_dev",
                "virtio",
            ],
            "net_failover" => &["failover"],
            "virtio" => &["virtio_ring"],
            "virtio_ring" | "failover" | "virtio_pci_modern_dev" | "virtio_pci_legacy_dev" => &[],
            _ => return None,
        };
        Some(deps.iter().map(|d| (*d).to_owned()).collect())
    }

    #[test]
    fn dependencies_load_first() {
        let order =
            load_order(&VIRTIO_NET_MODULES, &HashSet::new(), &mut cloud_kernel).expect("order");
        assert_eq!(
            order,
            [
                "virtio_ring",
                "virtio_pci_modern_dev",
                "virtio_pci_legacy_dev",
                "virtio",
                "virtio_pci",
                "failover",
                "net_failover",
                "virtio_net"
            ]
        );
    }

    #[test]
    fn builtins_are_skipped_and_missing_modules_reported() {
        let builtin: HashSet<String> = ["virtio_ring", "virtio", "virtio_pci"]
            .map(String::from)
            .into();
        let order = load_order(&VIRTIO_NET_MODULES, &builtin, &mut cloud_kernel).expect("order");
        assert_eq!(order, ["failover", "net_failover", "virtio_net"]);
        let err = load_order(&["e1000"], &HashSet::new(), &mut cloud_kernel).expect_err("absent");
        assert!(err.contains("e1000"), "{err}");
        let mut cyclic = |name: &str| Some(vec![if name == "a" { "b" } else { "a" }.to_owned()]);
        assert!(load_order(&["a"], &HashSet::new(), &mut cyclic)
            .expect_err("cycle")
            .contains("cycle"));
    }
}
