//! The front door: README.md and CONTRIBUTING.md at the repository root.
//! Every relative link and image in them must name a file that exists
//! (relative to the Markdown file), and every `file.md#anchor` must match a
//! heading of that file under GitHub's anchor rule. The README stays short
//! (at most 200 lines) and shows its two set-up commands on its first
//! screen (`scripts/run.sh` and `scripts/test.sh` in its first 40 lines).
//!
//! Plain string scanning, no Markdown crate: fenced code blocks and inline
//! code spans are skipped, link targets are read from `](...)` and from
//! reference definitions (`[label]: target`).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

/// The files whose links are checked, relative to the repository root.
const FRONT_DOOR: [&str; 2] = ["README.md", "CONTRIBUTING.md"];
const README_MAX_LINES: usize = 200;
const SETUP_WITHIN_LINES: usize = 40;
const SETUP_COMMANDS: [&str; 2] = ["scripts/run.sh", "scripts/test.sh"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The lines of `text` outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    // The open fence's character and length, while inside a code block.
    let mut fence: Option<(char, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        match (fence, marker) {
            (None, Some(c)) if run >= 3 => fence = Some((c, run)),
            (Some((open, len)), Some(c))
                if c == open && run >= len && trimmed[run..].trim().is_empty() =>
            {
                fence = None
            }
            (None, _) => out.push((i + 1, line)),
            (Some(_), _) => {}
        }
    }
    out
}

/// `line` with its inline code spans (`` `...` ``, ``` ``...`` ```) removed.
/// A backtick run with no closing run of the same length stays as text.
fn strip_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let len = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + len;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let run = chars[j..].iter().take_while(|c| **c == '`').count();
                if run == len {
                    close = Some(j + run);
                    break;
                }
                j += run;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => i = end,
            None => {
                out.extend(&chars[i..i + len]);
                i += len;
            }
        }
    }
    out
}

/// The target of a link whose `(` was just consumed: `<...>`, or up to the
/// first whitespace or the `)` that closes it (balanced parentheses inside).
fn read_target(rest: &str) -> &str {
    if let Some(inner) = rest.strip_prefix('<') {
        return inner.split('>').next().unwrap_or("");
    }
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return &rest[..i],
            ')' => depth -= 1,
            c if c.is_whitespace() => return &rest[..i],
            _ => {}
        }
    }
    rest
}

/// Every link and image target in `text` with its line number: `](target)`
/// in prose and `[label]: target` definitions.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (number, line) in prose_lines(text) {
        let line = strip_code_spans(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            out.push((number, read_target(rest).to_string()));
        }
        // A reference definition: `[label]: target`, at most 3 spaces in.
        let indent = line.len() - line.trim_start_matches(' ').len();
        let trimmed = line.trim_start();
        if indent <= 3 && trimmed.starts_with('[') && !trimmed.starts_with("[^") {
            if let Some(end) = trimmed.find("]:") {
                let target = trimmed[end + 2..].trim_start();
                if end > 1 && !target.is_empty() {
                    out.push((number, read_target(target).to_string()));
                }
            }
        }
    }
    out
}

fn is_external(target: &str) -> bool {
    let lower = target.to_ascii_lowercase();
    lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("mailto:")
        || lower.contains("://")
}

/// `%XX` escapes decoded (as UTF-8); anything malformed is kept as written.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok());
        if let (b'%', Some(Ok(b))) = (bytes[i], hex.map(|h| u8::from_str_radix(h, 16))) {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

/// `[text](url)` and `![alt](url)` reduced to their text, as a heading renders.
fn link_text_only(heading: &str) -> String {
    let mut out = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let mid = open + mid;
        let target = read_target(&rest[mid + 2..]);
        let close = mid + 2 + target.len();
        if !rest[close..].starts_with(')') {
            break;
        }
        let before = rest[..open].strip_suffix('!').unwrap_or(&rest[..open]);
        out.push_str(before);
        out.push_str(&rest[open + 1..mid]);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// GitHub's anchor for a heading's text: lowercase, punctuation other than
/// `-` and `_` removed, each space turned into `-`.
fn github_anchor(heading: &str) -> String {
    link_text_only(heading)
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The text of an ATX heading line (`## Title ##` gives `Title`), if it is one.
fn atx_heading(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let trimmed = line.trim_start();
    let level = trimmed.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &trimmed[level..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let text = rest.trim();
    // An optional closing sequence of `#`s, preceded by a space.
    let without = text.trim_end_matches('#');
    let text = if without.is_empty() || without.ends_with(' ') {
        without.trim_end()
    } else {
        text
    };
    Some(text)
}

/// Every anchor the headings of `text` yield, in order; a repeated heading
/// gets `-1`, `-2`, ... as on GitHub.
fn anchors(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut previous: Option<&str> = None;
    for (_, line) in prose_lines(text) {
        let trimmed = line.trim();
        let heading = atx_heading(line).map(str::to_string).or_else(|| {
            // A setext heading: a paragraph line underlined with `=` or `-`.
            let underline = !trimmed.is_empty()
                && (trimmed.chars().all(|c| c == '=') || trimmed.chars().all(|c| c == '-'));
            let paragraph = previous.map(str::trim).filter(|p| {
                !p.is_empty()
                    && atx_heading(p).is_none()
                    && !p.starts_with(['-', '*', '+', '>', '|', '<'])
                    && !p.chars().next().is_some_and(|c| c.is_ascii_digit())
            });
            paragraph.filter(|_| underline).map(str::to_string)
        });
        if let Some(heading) = heading {
            let base = github_anchor(&heading);
            let count = seen.entry(base.clone()).or_insert(0);
            out.push(if *count == 0 {
                base.clone()
            } else {
                format!("{base}-{count}")
            });
            *count += 1;
        }
        previous = Some(line);
    }
    out
}

/// Anchors of `available` that share a word of four letters or more with
/// `wanted`, most shared first: the likely intended ones, for the message.
fn near_anchors<'a>(wanted: &str, available: &'a [String]) -> Vec<&'a str> {
    let words: Vec<&str> = wanted.split('-').filter(|w| w.len() >= 4).collect();
    let shared = |a: &str| a.split('-').filter(|w| words.contains(w)).count();
    let mut near: Vec<&str> = available
        .iter()
        .map(String::as_str)
        .filter(|a| shared(a) > 0)
        .collect();
    // Most words in common first; the file's order among equals.
    near.sort_by_key(|a| std::cmp::Reverse(shared(a)));
    near.truncate(8);
    near
}

/// What is wrong with one link target of `source` (a Markdown file), if anything.
fn check_target(
    source: &Path,
    target: &str,
    anchor_cache: &mut BTreeMap<PathBuf, Vec<String>>,
) -> Option<String> {
    if target.is_empty() {
        return Some("empty link target".into());
    }
    if is_external(target) {
        return None;
    }
    let (path_part, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let path_part = path_part.split('?').next().unwrap_or("");
    let file = if path_part.is_empty() {
        source.to_path_buf()
    } else if path_part.starts_with('/') {
        return Some(format!(
            "{target}: an absolute path; use one relative to the Markdown file"
        ));
    } else {
        source
            .parent()
            .unwrap_or(Path::new("."))
            .join(percent_decode(path_part))
    };
    if !file.exists() {
        return Some(format!(
            "{target}: no such file relative to the Markdown file's directory"
        ));
    }
    let anchor = percent_decode(anchor?);
    let is_markdown = file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("md"));
    if !is_markdown || !file.is_file() {
        return None;
    }
    let available = anchor_cache
        .entry(file.clone())
        .or_insert_with(|| anchors(&read(&file)));
    if available.contains(&anchor) {
        return None;
    }
    let near = near_anchors(&anchor, available);
    let hint = if near.is_empty() {
        format!("{} headings, none close", available.len())
    } else {
        format!("close: #{}", near.join(", #"))
    };
    let shown = match path_part {
        "" => "this file",
        p => p,
    };
    Some(format!(
        "{target}: no heading in {shown} gives #{anchor} ({hint})"
    ))
}

#[test]
fn every_relative_link_in_the_front_door_resolves() {
    let root = repo_root();
    let mut cache = BTreeMap::new();
    let mut broken = Vec::new();
    let mut checked = 0;
    for name in FRONT_DOOR {
        let path = root.join(name);
        for (line, target) in link_targets(&read(&path)) {
            checked += 1;
            if let Some(problem) = check_target(&path, &target, &mut cache) {
                broken.push(format!("{name}:{line}: {problem}"));
            }
        }
    }
    assert!(
        checked > 0,
        "no links found in {FRONT_DOOR:?}: is the scanner broken?"
    );
    assert!(
        broken.is_empty(),
        "{} broken link(s) of {checked}:\n  {}",
        broken.len(),
        broken.join("\n  ")
    );
}

#[test]
fn readme_is_at_most_200_lines() {
    let readme = read(&repo_root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, over {README_MAX_LINES}: move details to docs/ or CONTRIBUTING.md"
    );
}

#[test]
fn readme_shows_both_setup_commands_on_its_first_screen() {
    let readme = read(&repo_root().join("README.md"));
    let head: Vec<&str> = readme.lines().take(SETUP_WITHIN_LINES).collect();
    let missing: Vec<&str> = SETUP_COMMANDS
        .iter()
        .copied()
        .filter(|command| !head.iter().any(|line| line.contains(command)))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's first {SETUP_WITHIN_LINES} lines lack {missing:?}"
    );
}

#[test]
fn anchors_follow_githubs_rule() {
    let cases = [
        ("Against the issue's commit", "against-the-issues-commit"),
        ("What \"validated\" means", "what-validated-means"),
        (
            "IR edit engine: patch -> verified IR -> PTX",
            "ir-edit-engine-patch---verified-ir---ptx",
        ),
        (
            "Edit contributions on the GPU (`gevod explain-edits --backend cuda`)",
            "edit-contributions-on-the-gpu-gevod-explain-edits---backend-cuda",
        ),
        ("`gevod evolve`: the search", "gevod-evolve-the-search"),
        (
            "Set-up: what each script installs",
            "set-up-what-each-script-installs",
        ),
        ("See [the docs](docs/x.md) first", "see-the-docs-first"),
        ("snake_case and Ünïcode", "snake_case-and-ünïcode"),
    ];
    for (heading, anchor) in cases {
        assert_eq!(github_anchor(heading), anchor, "heading {heading:?}");
    }
}

#[test]
fn headings_give_anchors_outside_code_and_number_repeats() {
    let text = "# Title #\n\n## Usage\n\n```sh\n# not a heading\n```\n\n## Usage\n\nSetext\n------\n\n#not-a-heading\n";
    assert_eq!(anchors(text), ["title", "usage", "usage-1", "setext"]);
}

#[test]
fn link_targets_skip_code_and_read_every_form() {
    let text = "\
See [a](docs/a.md#x) and ![img](img.png \"title\"), [b](<with space.md>).
`[not](a-link.md)` but [c](dir/(paren).md) is one.
```md
[inside](a-fence.md)
```
[ref]: ../ref.md
";
    let targets: Vec<(usize, String)> = link_targets(text);
    let expected = [
        (1, "docs/a.md#x"),
        (1, "img.png"),
        (1, "with space.md"),
        (2, "dir/(paren).md"),
        (6, "../ref.md"),
    ];
    let expected: Vec<(usize, String)> =
        expected.iter().map(|(l, t)| (*l, t.to_string())).collect();
    assert_eq!(targets, expected);
}

#[test]
fn broken_links_and_anchors_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("doc.md");
    fs::write(&doc, "# Doc\n\n## Some section\n").unwrap();
    let source = dir.path().join("README.md");
    let mut cache = BTreeMap::new();
    assert_eq!(
        check_target(&source, "doc.md#some-section", &mut cache),
        None
    );
    assert_eq!(
        check_target(&source, "https://example.com/x#y", &mut cache),
        None
    );
    let missing = check_target(&source, "nope.md", &mut cache).unwrap();
    assert!(missing.contains("no such file"), "{missing}");
    let anchor = check_target(&source, "doc.md#some-sections", &mut cache).unwrap();
    assert!(
        anchor.contains("#some-sections") && anchor.contains("close: #some-section"),
        "{anchor}"
    );
}
