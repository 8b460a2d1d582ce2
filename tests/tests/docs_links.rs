//! The README and the guides in docs/ link to files and headings that exist: a guide moved or a heading renamed
//! fails here, not in a reader's browser.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README.md and every Markdown file under docs/.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                files.push(path);
            }
        }
    }
    files
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation other than `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings, outside code blocks.
fn anchors(text: &str) -> Vec<String> {
    let mut in_code = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            found.push(anchor(line.trim_start_matches('#')));
        }
    }
    found
}

/// The targets of a file's inline links `[text](target)`, outside code blocks and code spans.
fn links(text: &str) -> Vec<String> {
    let mut in_code = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Code spans are the odd-numbered pieces between backticks.
        for (i, piece) in line.split('`').enumerate() {
            if i % 2 == 1 {
                continue;
            }
            for (at, _) in piece.match_indices("](") {
                let rest = &piece[at + 2..];
                if let Some(end) = rest.find(')') {
                    found.push(rest[..end].to_owned());
                }
            }
        }
    }
    found
}

#[test]
fn every_relative_link_reaches_a_file_and_heading() {
    let mut broken = Vec::new();
    for document in documents() {
        let text = std::fs::read_to_string(&document).unwrap();
        for link in links(&text) {
            if link.starts_with("http://") || link.starts_with("https://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() { document.clone() } else { document.parent().unwrap().join(file) };
            let name = document.strip_prefix(root()).unwrap().display().to_string();
            if !target.exists() {
                broken.push(format!("{name}: {link} (no such file)"));
            } else if !fragment.is_empty() {
                let headings = anchors(&std::fs::read_to_string(&target).unwrap());
                if !headings.iter().any(|heading| heading == fragment) {
                    broken.push(format!("{name}: {link} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_github_s() {
    assert_eq!(
        anchor(" Coalescing: one HTTP request, and one script call, for decisions made at once"),
        "coalescing-one-http-request-and-one-script-call-for-decisions-made-at-once"
    );
    assert_eq!(anchor(" Configuration (`wrangler.toml`)"), "configuration-wranglertoml");
    assert_eq!(links("see [a](b.md#c) and `[x](y)` and [d](e)"), ["b.md#c", "e"]);
}

#[test]
fn the_readme_stays_short() {
    let lines = std::fs::read_to_string(root().join("README.md")).unwrap().lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: move detail into docs/");
}
