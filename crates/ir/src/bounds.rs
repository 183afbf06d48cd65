//! Limits on untrusted IR, checked on its bytes before LLVM reads them.
//!
//! LLVM's IR parser, its metadata resolution and its verifier recurse: on
//! brackets (a constant expression nested 20,000 `add (` deep) and on chains
//! of definitions that refer to one another (`!1 = !{!2}`, `!2 = !{!3}`,
//! ...; `%T0 = type { %T1 }`, ...). Deep enough, either overflows the stack
//! and aborts the process, and a daemon that reads the file from a watched
//! directory at every start aborts at every start. So before a byte reaches
//! LLVM, IR over any of these limits is an [`IrError`] naming the file (and,
//! for text, the line and column):
//!
//! - [`MAX_IR_BYTES`]: 64 MiB of IR, text or bitcode (the largest fixture,
//!   tests/fixtures/pipelines/lu.ll, is 65 KiB);
//! - [`MAX_NESTING`]: 256 brackets `(`, `[`, `{`, `<` open at once, outside
//!   string literals (metadata strings and quoted names included) and
//!   comments (the fixtures open at most 5);
//! - [`MAX_CHAIN`]: 2048 levels of definitions (types, globals, aliases,
//!   numbered metadata) reached through their references, each definition
//!   counting as deep as the brackets inside it and a group of definitions
//!   that refer to one another in a cycle as the sum of its members, so the
//!   measure bounds any path LLVM can walk (the fixtures, with line tables,
//!   reach 5; full debug information of an -O0 build a few hundred);
//! - [`MAX_ALIAS_WORK`]: 4,194,304 steps through aliases of aliases. LLVM's
//!   verifier walks each alias's chain of aliases anew, about 100 ns a step:
//!   chains 2,000 long filling 64 MiB would hold it for minutes. The sum
//!   over aliases of the aliases each reaches is kept below half a second
//!   (compilers' aliases name a function or a variable: 1 each).
//!
//! Names are read as LLVM reads them: `!07` and `! 7` are `!7`, `@"\62"` is
//! `@b`. The limits are well below what overflows a 2 MiB thread stack
//! (LLVM 19 does at a metadata chain about 7,000 long, at brackets about
//! 2,000 deep) and well above what compilers write. Bitcode is checked for
//! size only: its structure is binary, and these checks read text.

use crate::error::IrError;
use std::borrow::Cow;
use std::collections::HashMap;

/// The largest IR file gevo reads: 64 MiB.
pub const MAX_IR_BYTES: u64 = 64 << 20;
/// The most brackets open at once in text IR.
pub const MAX_NESTING: u32 = 256;
/// The deepest chain of definitions in text IR (see the module's text).
pub const MAX_CHAIN: u64 = 2048;
/// The most steps LLVM's verifier may take through aliases of aliases.
pub const MAX_ALIAS_WORK: u64 = 1 << 22;

/// What the lexical checks measure of a text module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// The most brackets open at once.
    pub nesting: u32,
    /// An upper bound on the longest chain of definitions LLVM can walk.
    pub chain: u64,
    /// An upper bound on the verifier's steps through aliases of aliases.
    pub alias_work: u64,
}

/// Where text IR passes a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exceeded {
    /// The bracket that opens one more than [`MAX_NESTING`].
    Nesting { line: u32, column: u32 },
    /// The definition `what` starts a chain deeper than [`MAX_CHAIN`].
    Chain {
        line: u32,
        column: u32,
        what: String,
        depth: u64,
    },
    /// Aliases of aliases past [`MAX_ALIAS_WORK`]; `what` starts the
    /// longest chain of them.
    Aliases {
        line: u32,
        column: u32,
        what: String,
        work: u64,
    },
}

impl Exceeded {
    fn into_error(self, name: &str) -> IrError {
        let name = name.to_string();
        match self {
            Exceeded::Nesting { line, column } => IrError::TooDeep {
                name,
                line,
                column,
                limit: MAX_NESTING,
            },
            Exceeded::Chain {
                line,
                column,
                what,
                depth,
            } => IrError::ChainTooDeep {
                name,
                line,
                column,
                what,
                depth,
                limit: MAX_CHAIN,
            },
            Exceeded::Aliases {
                line,
                column,
                what,
                work,
            } => IrError::AliasesTooDeep {
                name,
                line,
                column,
                what,
                work,
                limit: MAX_ALIAS_WORK,
            },
        }
    }
}

/// Checks `bytes`, IR named `name` in messages, against every limit.
pub fn check(name: &str, bytes: &[u8]) -> Result<(), IrError> {
    check_size(name, bytes.len() as u64)?;
    if is_bitcode(bytes) {
        return Ok(());
    }
    measure(bytes).map(drop).map_err(|e| e.into_error(name))
}

/// Refuses IR of `size` bytes over [`MAX_IR_BYTES`].
pub fn check_size(name: &str, size: u64) -> Result<(), IrError> {
    if size > MAX_IR_BYTES {
        return Err(IrError::TooLarge {
            name: name.to_string(),
            limit: MAX_IR_BYTES,
        });
    }
    Ok(())
}

/// Whether LLVM reads `bytes` as bitcode (raw, or in the wrapper), as
/// `llvm::isBitcode` decides; anything else it parses as text.
pub fn is_bitcode(bytes: &[u8]) -> bool {
    bytes.starts_with(b"BC\xC0\xDE") || bytes.starts_with(&[0xDE, 0xC0, 0x17, 0x0B])
}

/// Measures text IR, stopping at the first bracket past [`MAX_NESTING`];
/// a chain past [`MAX_CHAIN`] or aliases past [`MAX_ALIAS_WORK`] are
/// errors too.
pub fn measure(bytes: &[u8]) -> Result<Shape, Exceeded> {
    let mut scan = Scan::new(bytes);
    if let Err(at) = scan.run() {
        let (line, column) = line_and_column(bytes, at);
        return Err(Exceeded::Nesting { line, column });
    }
    let chains = scan.graph.chains();
    // Where a chain starts, and its name: the file's text, so a short
    // prefix of it.
    let at = |node: u32| {
        let at = scan.graph.defined_at[node as usize] as usize;
        let (line, column) = line_and_column(bytes, at);
        let token: Vec<u8> = bytes[at..]
            .iter()
            .take_while(|&&c| !c.is_ascii_whitespace() && c != b'=')
            .take(41)
            .copied()
            .collect();
        let what = gevo_client::text::shorten(&String::from_utf8_lossy(&token), 40).into_owned();
        (line, column, what)
    };
    if chains.chain > MAX_CHAIN {
        let (line, column, what) = at(chains.chain_start);
        return Err(Exceeded::Chain {
            line,
            column,
            what,
            depth: chains.chain,
        });
    }
    if chains.alias_work > MAX_ALIAS_WORK {
        let (line, column, what) = at(chains.alias_start);
        return Err(Exceeded::Aliases {
            line,
            column,
            what,
            work: chains.alias_work,
        });
    }
    Ok(Shape {
        nesting: scan.max_depth,
        chain: chains.chain,
        alias_work: chains.alias_work,
    })
}

/// The 1-based line and column (in bytes) of offset `at`.
fn line_and_column(bytes: &[u8], at: usize) -> (u32, u32) {
    let before = &bytes[..at];
    let line = before.iter().filter(|&&c| c == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |p| p + 1);
    (line as u32, (at - start + 1) as u32)
}

/// Top-level keywords that start something other than a definition: what
/// follows them until the next definition refers to nothing a chain counts.
const OTHER_ENTITIES: [&[u8]; 9] = [
    b"define",
    b"declare",
    b"attributes",
    b"target",
    b"source_filename",
    b"module",
    b"uselistorder",
    b"uselistorder_bb",
    b"deplibs",
];

/// A name as LLVM resolves it: a number (`!7`, `!07` and `! 7` alike;
/// `%5`, `@5`), or a sigil and the unescaped name (`@b`, `@"\62"`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key<'a> {
    Number(u8, u64),
    Name(Cow<'a, [u8]>),
}

/// One pass over text IR: brackets, and the definitions with what they
/// refer to.
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: u32,
    max_depth: u32,
    /// The definition being read, at top level.
    current: Option<u32>,
    graph: Graph<'a>,
}

impl<'a> Scan<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Scan {
            bytes,
            at: 0,
            depth: 0,
            max_depth: 0,
            current: None,
            graph: Graph::new(bytes.len()),
        }
    }

    /// Reads it all; `Err` holds the offset of the bracket past the limit.
    fn run(&mut self) -> Result<(), usize> {
        let bytes = self.bytes;
        while let Some(&b) = bytes.get(self.at) {
            match b {
                b';' => self.at = comment_end(bytes, self.at),
                b'"' => self.at = string_end(bytes, self.at + 1),
                b'(' | b'[' | b'{' | b'<' => {
                    self.depth += 1;
                    if self.depth > MAX_NESTING {
                        return Err(self.at);
                    }
                    self.max_depth = self.max_depth.max(self.depth);
                    if let Some(d) = self.current {
                        let w = &mut self.graph.weight[d as usize];
                        *w = (*w).max(self.depth);
                    }
                    self.at += 1;
                }
                b')' | b']' | b'}' | b'>' => {
                    self.depth = self.depth.saturating_sub(1);
                    self.at += 1;
                }
                b'%' | b'@' | b'!' => self.name(),
                c if c.is_ascii_alphabetic() || c == b'_' => {
                    let start = self.at;
                    while self.at < bytes.len() && is_word(bytes[self.at]) {
                        self.at += 1;
                    }
                    let word = &bytes[start..self.at];
                    if self.depth == 0 && OTHER_ENTITIES.contains(&word) {
                        self.current = None;
                    }
                    if let (0, Some(d), b"alias" | b"ifunc") = (self.depth, self.current, word) {
                        self.graph.alias[d as usize] = true;
                    }
                }
                _ => self.at += 1,
            }
        }
        Ok(())
    }

    /// A `%`, `@` or `!` name at `self.at`: a definition at top level when
    /// `=` follows, else a reference of the current definition.
    fn name(&mut self) {
        let bytes = self.bytes;
        let start = self.at;
        let sigil = bytes[start];
        let Some((key, end)) = read_name(bytes, start) else {
            // `!{`, `!"..."`, `!DILocation(`: the bracket or string is
            // read next.
            self.at = start + 1;
            return;
        };
        self.at = end;
        let defines = self.depth == 0
            && bytes[end..]
                .iter()
                .find(|c| !c.is_ascii_whitespace())
                .is_some_and(|&c| c == b'=');
        if defines {
            self.current = Some(self.graph.define(key, start));
        } else if let Some(from) = self.current {
            // Named metadata is never referred to.
            if sigil != b'!' || matches!(key, Key::Number(..)) {
                let to = self.graph.node(key);
                self.graph.refer(from, to);
            }
        }
    }
}

/// The name starting with the sigil at `start` and the offset after it;
/// `None` where no name follows.
fn read_name(bytes: &[u8], start: usize) -> Option<(Key<'_>, usize)> {
    let sigil = bytes[start];
    let mut at = start + 1;
    if sigil == b'!' {
        // `!` is a token of its own before a number: blanks and comments
        // may come between.
        match bytes.get(at) {
            Some(&c) if is_name(c) && !c.is_ascii_digit() || c == b'\\' => {
                let end = at
                    + bytes[at..]
                        .iter()
                        .take_while(|&&c| is_name(c) || c == b'\\')
                        .count();
                return Some((Key::Name(Cow::Borrowed(&bytes[start..end])), end));
            }
            _ => {}
        }
        loop {
            match bytes.get(at) {
                Some(b';') => at = comment_end(bytes, at),
                Some(c) if c.is_ascii_whitespace() => at += 1,
                _ => break,
            }
        }
    }
    match bytes.get(at) {
        Some(c) if c.is_ascii_digit() => {
            let digits = bytes[at..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            // Past u64, every number is one name: more references, never
            // fewer.
            let number = bytes[at..at + digits].iter().fold(0u64, |n, &d| {
                n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
            });
            Some((Key::Number(sigil, number), at + digits))
        }
        Some(b'"') if sigil != b'!' => {
            let end = string_end(bytes, at + 1);
            let quoted = &bytes[at + 1..end.saturating_sub(1).max(at + 1)];
            Some((Key::Name(unescape(sigil, quoted)), end))
        }
        Some(&c) if sigil != b'!' && is_name(c) => {
            let end = at + bytes[at..].iter().take_while(|&&c| is_name(c)).count();
            Some((Key::Name(Cow::Borrowed(&bytes[start..end])), end))
        }
        _ => None,
    }
}

/// A quoted name as LLVM unescapes it (`\\` and `\xx` in hex), after its
/// sigil: `@"\62"` is `@b`.
fn unescape(sigil: u8, quoted: &[u8]) -> Cow<'static, [u8]> {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = vec![sigil];
    let mut i = 0;
    while i < quoted.len() {
        let c = quoted[i];
        if c == b'\\' {
            if quoted.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
                continue;
            }
            let pair = (quoted.get(i + 1).copied(), quoted.get(i + 2).copied());
            if let (Some(Some(h)), Some(Some(l))) = (pair.0.map(hex), pair.1.map(hex)) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    Cow::Owned(out)
}

/// The offset of the newline ending the comment at `at` (or the end).
fn comment_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(bytes.len(), |p| at + p)
}

/// The offset just past the string whose text starts at `from` (LLVM's
/// strings have no escaped quote: `\22` is one).
fn string_end(bytes: &[u8], from: usize) -> usize {
    bytes[from.min(bytes.len())..]
        .iter()
        .position(|&c| c == b'"')
        .map_or(bytes.len(), |p| from + p + 1)
}

/// Characters of an unquoted `%`/`@`/`!` name.
fn is_name(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'$' | b'.' | b'_')
}

/// Characters of a bare word (keywords, types, numbers after a letter).
fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.')
}

/// Definitions and their references. A node is a name; a defined one has
/// its references in `targets[start..end]`, one contiguous run (a name
/// defined again, which LLVM refuses, gets a node of its own).
struct Graph<'a> {
    /// Numbered metadata below the file's length, by number: the bulk of
    /// large modules, found without hashing.
    metadata: Vec<u32>,
    ids: HashMap<Key<'a>, u32>,
    /// Brackets open at the deepest point of the definition; 0 undefined.
    weight: Vec<u32>,
    /// The definition's offset in the file.
    defined_at: Vec<u32>,
    /// Defined as an `alias` or `ifunc`.
    alias: Vec<bool>,
    start: Vec<u32>,
    end: Vec<u32>,
    targets: Vec<u32>,
    dense: u64,
}

const NONE: u32 = u32::MAX;

impl<'a> Graph<'a> {
    fn new(len: usize) -> Self {
        Graph {
            metadata: Vec::new(),
            ids: HashMap::new(),
            weight: Vec::new(),
            defined_at: Vec::new(),
            alias: Vec::new(),
            start: Vec::new(),
            end: Vec::new(),
            targets: Vec::new(),
            // Numbers any denser than a definition every 8 bytes are rare:
            // at most a 32 MiB table for 64 MiB of IR.
            dense: len as u64 / 8,
        }
    }

    fn add(&mut self) -> u32 {
        let id = self.weight.len() as u32;
        self.weight.push(0);
        self.defined_at.push(0);
        self.alias.push(false);
        self.start.push(0);
        self.end.push(0);
        id
    }

    fn node(&mut self, key: Key<'a>) -> u32 {
        if let Key::Number(b'!', n) = key {
            if n < self.dense {
                let n = n as usize;
                if n >= self.metadata.len() {
                    self.metadata.resize(n + 1, NONE);
                }
                if self.metadata[n] == NONE {
                    self.metadata[n] = self.add();
                }
                return self.metadata[n];
            }
        }
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.add();
        self.ids.insert(key, id);
        id
    }

    fn define(&mut self, key: Key<'a>, at: usize) -> u32 {
        let mut id = self.node(key);
        if self.weight[id as usize] > 0 {
            id = self.add();
        }
        let i = id as usize;
        self.weight[i] = 1;
        self.defined_at[i] = at as u32;
        self.start[i] = self.targets.len() as u32;
        self.end[i] = self.start[i];
        id
    }

    fn refer(&mut self, from: u32, to: u32) {
        let (start, end) = (self.start[from as usize], self.end[from as usize]);
        // `!{!1, !1, ...}`: one edge is enough.
        if end == start || self.targets.last() != Some(&to) {
            self.targets.push(to);
            self.end[from as usize] += 1;
        }
    }

    fn edges(&self, node: u32) -> &[u32] {
        &self.targets[self.start[node as usize] as usize..self.end[node as usize] as usize]
    }

    /// The earliest definition among `members`.
    fn first_of(&self, members: &[u32]) -> u32 {
        members
            .iter()
            .copied()
            .filter(|&m| self.weight[m as usize] > 0)
            .min_by_key(|&m| self.defined_at[m as usize])
            .unwrap_or(members[0])
    }

    /// The heaviest path through the definitions, each group of mutually
    /// referring definitions (Tarjan's strongly connected components,
    /// found without recursion) weighing the sum of its members; and the
    /// verifier's work on aliases: the aliases each alias reaches.
    fn chains(&self) -> Chains {
        let n = self.weight.len();
        let mut index = vec![NONE; n];
        let mut low = vec![0u32; n];
        let mut group = vec![NONE; n];
        // Per group: its heaviest path, and the most aliases a path meets.
        let mut height: Vec<u32> = Vec::new();
        let mut aliases: Vec<u32> = Vec::new();
        let mut stack: Vec<u32> = Vec::new();
        let mut calls: Vec<(u32, usize)> = Vec::new();
        let mut members: Vec<u32> = Vec::new();
        let mut next = 0u32;
        let mut out = Chains::default();
        for root in 0..n as u32 {
            if index[root as usize] != NONE {
                continue;
            }
            // Entering a node: numbered, on the stack, its edges next.
            macro_rules! enter {
                ($v:expr) => {{
                    let v: u32 = $v;
                    index[v as usize] = next;
                    low[v as usize] = next;
                    next += 1;
                    stack.push(v);
                    calls.push((v, 0));
                }};
            }
            enter!(root);
            while let Some(&(v, e)) = calls.last() {
                if let Some(&w) = self.edges(v).get(e) {
                    calls.last_mut().expect("a call is on the stack").1 += 1;
                    if index[w as usize] == NONE {
                        enter!(w);
                    } else if group[w as usize] == NONE {
                        low[v as usize] = low[v as usize].min(index[w as usize]);
                    }
                    continue;
                }
                calls.pop();
                if let Some(&(parent, _)) = calls.last() {
                    low[parent as usize] = low[parent as usize].min(low[v as usize]);
                }
                if low[v as usize] != index[v as usize] {
                    continue;
                }
                let g = height.len() as u32;
                members.clear();
                while let Some(w) = stack.pop() {
                    group[w as usize] = g;
                    members.push(w);
                    if w == v {
                        break;
                    }
                }
                let weight = members
                    .iter()
                    .fold(0u32, |s, &m| s.saturating_add(self.weight[m as usize]));
                let own_aliases =
                    members.iter().filter(|&&m| self.alias[m as usize]).count() as u32;
                let (mut below, mut aliases_below) = (0, 0);
                for &t in members.iter().flat_map(|&m| self.edges(m)) {
                    let h = group[t as usize];
                    if h != g {
                        below = below.max(height[h as usize]);
                        aliases_below = aliases_below.max(aliases[h as usize]);
                    }
                }
                let total = weight.saturating_add(below);
                let reach = own_aliases.saturating_add(aliases_below);
                height.push(total);
                aliases.push(reach);
                if u64::from(total) > out.chain {
                    out.chain = total.into();
                    out.chain_start = self.first_of(&members);
                }
                if own_aliases > 0 {
                    let work = u64::from(own_aliases) * u64::from(reach);
                    out.alias_work = out.alias_work.saturating_add(work);
                    if u64::from(reach) > out.alias_reach {
                        out.alias_reach = reach.into();
                        out.alias_start = self.first_of(&members);
                    }
                }
            }
        }
        out
    }
}

/// What [`Graph::chains`] measures.
#[derive(Default)]
struct Chains {
    /// The heaviest path, and the definition it starts at.
    chain: u64,
    chain_start: u32,
    /// The sum over aliases of the aliases each reaches (itself included):
    /// the verifier walks every alias's chain of aliases anew.
    alias_work: u64,
    /// The longest chain of aliases, and the alias it starts at.
    alias_reach: u64,
    alias_start: u32,
}

#[cfg(test)]
mod tests;
