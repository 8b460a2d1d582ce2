//! The core crate's layout, checked from its source: no import cycles between its top-level modules, and the
//! "Layout" table that opens `src/lib.rs` names exactly the modules there are.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../src")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

/// The top-level modules (`src/<name>.rs` or `src/<name>/`), each with the top-level modules its code names as
/// `crate::<other>` outside comments and outside its unit tests.
fn module_imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = src();
    let mut modules: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for file in rust_files(&src) {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap().as_os_str().to_string_lossy();
        let name = first.trim_end_matches(".rs").to_owned();
        if name != "lib" {
            modules.entry(name).or_default().push(file);
        }
    }
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    modules
        .iter()
        .map(|(name, files)| {
            let mut imports = BTreeSet::new();
            for file in files {
                let text = std::fs::read_to_string(file).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap();
                for line in code.lines().filter(|line| !line.trim_start().starts_with("//")) {
                    for (at, _) in line.match_indices("crate::") {
                        let rest = &line[at + "crate::".len()..];
                        let other: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                        if other != *name && names.contains(&other) {
                            imports.insert(other);
                        }
                    }
                }
            }
            (name.clone(), imports)
        })
        .collect()
}

#[test]
fn no_import_cycles_between_the_cores_modules() {
    let imports = module_imports();
    // Depth-first search; a module reached again while still on the path closes a cycle.
    fn visit<'a>(
        module: &'a str,
        imports: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if let Some(start) = path.iter().position(|&on_path| on_path == module) {
            panic!("import cycle: {} -> {module}", path[start..].join(" -> "));
        }
        if !done.insert(module) {
            return;
        }
        path.push(module);
        for next in &imports[module] {
            visit(next, imports, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for module in imports.keys() {
        visit(module, &imports, &mut Vec::new(), &mut done);
    }
}

#[test]
fn the_layout_table_of_lib_rs_names_every_module() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod ").or_else(|| line.strip_prefix("mod ")))
        .map(|rest| rest.trim_end_matches(';').to_owned())
        .collect();
    let tabled: BTreeSet<String> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("//! | "))
        .filter_map(|row| row.split(" |").next())
        .map(|cell| cell.trim_matches(|c| c == '[' || c == ']' || c == '`').to_owned())
        .filter(|cell| cell != "module" && !cell.starts_with("---"))
        .map(|cell| cell.split(' ').next().unwrap().trim_matches('`').to_owned())
        .collect();
    let private_helpers = BTreeSet::from(["unique_id".to_owned()]);
    let missing: Vec<_> = declared.difference(&tabled).filter(|m| !private_helpers.contains(*m)).collect();
    let stale: Vec<_> = tabled.difference(&declared).collect();
    assert!(missing.is_empty() && stale.is_empty(), "not in the table: {missing:?}; no such module: {stale:?}");
}
