//! A test that the top-level modules of the crate form a directed acyclic graph: no two modules import each
//! other, directly or through others. Shared types (such as [`crate::method::Method`]) live in their own
//! module below the ones that use them, and orchestration ([`crate::batch`]) above the kernels it chooses
//! between.
//!
//! The graph is read from the sources: every `crate::name` path outside comments, per file, where a file
//! `rust/src/name.rs` or anything under `rust/src/name/` belongs to module `name` (so a module's own
//! submodules, which may refer to each other through `super::`, count as one node).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module → the top-level modules its files name through `crate::`.
fn module_graph(source: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut pending = vec![source.to_path_buf()];
    while let Some(path) = pending.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let relative = path.strip_prefix(source).unwrap();
            let first = relative
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            let module = first.trim_end_matches(".rs").to_string();
            if module == "lib" || module == "layering" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let uses = graph.entry(module.clone()).or_default();
            for line in text.lines() {
                let code = line.split("//").next().unwrap_or("");
                for (index, _) in code.match_indices("crate::") {
                    let rest = &code[index + "crate::".len()..];
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != module {
                        uses.insert(name);
                    }
                }
            }
        }
    }
    graph
}

/// A cycle of the graph as a path of module names (first = last), or `None`.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth-first search with the path on a stack: 0 unvisited, 1 on the path, 2 done.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = path.iter().position(|p| p == next).unwrap_or(0);
                    let mut cycle = path[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(cycle) = visit(next, graph, state, path) {
                        return Some(cycle);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.get(node.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(cycle) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(cycle);
            }
        }
    }
    None
}

#[test]
fn no_module_imports_another_that_imports_it() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("rust/src");
    let graph = module_graph(&source);
    // The graph must be the crate's: the modules that certainly exist are found, with their known uses.
    assert!(graph["pcor"].contains("control") && graph["control"].contains("method"));
    assert!(graph.len() >= 20, "{graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("module cycle in rust/src: {}", cycle.join(" -> "));
    }
}

#[test]
fn a_cycle_is_found() {
    let edges = |pairs: &[(&str, &str)]| {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            graph.entry(a.to_string()).or_default().insert(b.to_string());
            graph.entry(b.to_string()).or_default();
        }
        graph
    };
    assert_eq!(find_cycle(&edges(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
    assert_eq!(
        find_cycle(&edges(&[("a", "b"), ("b", "c"), ("c", "b")])),
        Some(vec!["b".to_string(), "c".to_string(), "b".to_string()])
    );
}
