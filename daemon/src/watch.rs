//! Finding kernel specs in build directories: a recursive scan for
//! `*.gevo.toml`, a settle rule (a spec and its IR count only once their
//! content stayed the same for a while, so a half-written build output never
//! starts a job), and file events (notify) that tell the daemon when to scan
//! again between its periodic full scans. The daemon's own state directory
//! is neither searched nor watched for changes, wherever it lies: its job
//! snapshots are named like specs.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, RwLock};
use std::time::{Duration, Instant};

pub const SPEC_SUFFIX: &str = ".gevo.toml";

/// Directories deeper than this under a root are not searched (a guard
/// against symlink loops and huge trees).
const MAX_DEPTH: usize = 24;

/// The daemon's own state directory ([`skip_own_state`]).
static OWN_STATE: RwLock<Option<Own>> = RwLock::new(None);

/// A directory the scan skips: its canonical path and its identity.
#[derive(Debug, Clone)]
struct Own {
    path: PathBuf,
    id: Option<(u64, u64)>,
}

impl Own {
    fn of(dir: &Path) -> Own {
        let path = std::fs::canonicalize(dir)
            .unwrap_or_else(|_| std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()));
        let id = std::fs::metadata(&path).ok().map(|m| (m.dev(), m.ino()));
        Own { path, id }
    }

    /// Whether a directory met in a scan, at `path` with `meta` (not
    /// followed), is this one.
    fn is(&self, path: &Path, meta: &std::fs::Metadata) -> bool {
        match self.id {
            Some(id) => id == (meta.dev(), meta.ino()),
            None => path == self.path,
        }
    }

    /// How the paths under it are spelled from `roots` (as file events
    /// name them), its canonical path included.
    fn spellings(&self, roots: &[PathBuf]) -> Vec<PathBuf> {
        let mut out = vec![self.path.clone()];
        for root in roots {
            let Ok(canonical) = std::fs::canonicalize(root) else {
                continue;
            };
            if let Ok(rest) = self.path.strip_prefix(&canonical) {
                out.push(root.join(rest));
            }
        }
        out
    }
}

/// The daemon's state directory `dir`: from now on no scan searches it and
/// no file event under it asks for a scan, even where it lies under a
/// watched root (its job snapshots `jobs/<job>/spec.gevo.toml` are not the
/// user's specs, and its store changes at every generation).
pub fn skip_own_state(dir: &Path) {
    *OWN_STATE.write().unwrap_or_else(|e| e.into_inner()) = Some(Own::of(dir));
}

fn own_state() -> Option<Own> {
    OWN_STATE.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// A spec file found under a watched root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Found {
    pub root: PathBuf,
    pub spec: PathBuf,
}

/// Whose spec files a watch root adopts (docs/daemon.md, "Who may do
/// what").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adopts {
    /// Every owner's: a root from the configuration, or one that root or
    /// the daemon's own user added.
    Everyone,
    /// Only those this uid owns: a root that user added over the socket.
    /// The walk goes only where they may list and search themselves.
    OnlyOf(u32),
}

/// Every `*.gevo.toml` under `roots` that its root adopts, sorted. Hidden
/// directories (`.git`) and the daemon's own state directory
/// ([`skip_own_state`]) are skipped; unreadable
/// directories are skipped silently (a build tree changes while it is
/// scanned), and so are, for a root adopting one user's specs, the
/// directories that user may not list and the other owners' specs.
pub fn scan(roots: &[(PathBuf, Adopts)]) -> Vec<Found> {
    scan_skipping(roots, own_state().as_ref())
}

fn scan_skipping(roots: &[(PathBuf, Adopts)], own: Option<&Own>) -> Vec<Found> {
    use gevo_model::access::{Identity, READ, SEARCH};
    let mut found = Vec::new();
    for (root, adopts) in roots {
        // A root inside the state directory (or the directory itself).
        if own.is_some_and(|o| std::fs::canonicalize(root).is_ok_and(|c| c.starts_with(&o.path))) {
            continue;
        }
        let only = match adopts {
            Adopts::Everyone => None,
            Adopts::OnlyOf(uid) => Some(Identity::of(*uid)),
        };
        if only.as_ref().is_some_and(|id| id.may_list(root).is_err()) {
            continue;
        }
        let mut stack = vec![(root.clone(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                // Not followed: a symlink is its maker's.
                let Ok(meta) = entry.metadata() else {
                    continue;
                };
                let path = entry.path();
                if meta.is_dir() {
                    let theirs = only
                        .as_ref()
                        .is_none_or(|id| id.may(&path, &meta, READ | SEARCH));
                    let own_state = own.is_some_and(|o| o.is(&path, &meta));
                    if !name.starts_with('.') && depth < MAX_DEPTH && theirs && !own_state {
                        stack.push((path, depth + 1));
                    }
                } else if name.ends_with(SPEC_SUFFIX)
                    && name.len() > SPEC_SUFFIX.len()
                    && only.as_ref().is_none_or(|id| meta.uid() == id.uid)
                {
                    found.push(Found {
                        root: root.clone(),
                        spec: path,
                    });
                }
            }
        }
    }
    found.sort();
    found
}

/// A spec's kernel name: the file name without `.gevo.toml`.
pub fn spec_stem(spec: &Path) -> String {
    let name = spec
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_suffix(SPEC_SUFFIX).unwrap_or(&name).to_string()
}

/// Remembers what each path's content was and since when.
#[derive(Debug, Default)]
pub struct Settler {
    seen: HashMap<PathBuf, (String, Instant)>,
}

impl Settler {
    /// Records `fingerprint` (a content hash) for `path` at `now`; returns
    /// how long it must still stay the same to count (zero: settled).
    pub fn observe(
        &mut self,
        path: &Path,
        fingerprint: &str,
        now: Instant,
        settle: Duration,
    ) -> Duration {
        let since = match self.seen.get(path) {
            Some((f, since)) if f == fingerprint => *since,
            _ => {
                self.seen
                    .insert(path.to_path_buf(), (fingerprint.to_string(), now));
                now
            }
        };
        settle.saturating_sub(now.saturating_duration_since(since))
    }

    /// The paths whose latest content has not settled at `now`, each with
    /// how long it must still stay the same.
    pub fn unsettled(&self, now: Instant, settle: Duration) -> BTreeMap<PathBuf, Duration> {
        self.seen
            .iter()
            .filter_map(|(path, (_, since))| {
                let wait = settle.saturating_sub(now.saturating_duration_since(*since));
                (!wait.is_zero()).then(|| (path.clone(), wait))
            })
            .collect()
    }

    /// Forgets paths no longer present.
    pub fn retain(&mut self, present: impl Fn(&Path) -> bool) {
        self.seen.retain(|p, _| present(p));
    }
}

/// File events under the watched roots, reduced to "something changed".
pub struct Events {
    // Kept alive: dropping the watcher stops the events.
    _watcher: Option<notify::RecommendedWatcher>,
    receiver: mpsc::Receiver<()>,
    last: Option<Instant>,
}

impl Events {
    /// Watches `roots` recursively. A root that cannot be watched (missing,
    /// too many inotify watches) is logged; periodic scans still cover it.
    /// Events only under the daemon's own state directory are not changes.
    pub fn watch(roots: &[PathBuf]) -> Events {
        use notify::Watcher as _;
        let (sender, receiver) = mpsc::channel();
        let own = own_state().map_or_else(Vec::new, |o| o.spellings(roots));
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else {
                return;
            };
            // An event naming no path (a rescan) counts.
            let ours = !event.paths.is_empty()
                && event
                    .paths
                    .iter()
                    .all(|p| own.iter().any(|o| p.starts_with(o)));
            if !ours {
                let _ = sender.send(());
            }
        });
        let watcher = match watcher {
            Ok(mut w) => {
                for root in roots {
                    if let Err(e) = w.watch(root, notify::RecursiveMode::Recursive) {
                        tracing::warn!(root = %root.display(), error = %e, "not watching for file events; periodic scans only");
                    }
                }
                Some(w)
            }
            Err(e) => {
                tracing::warn!(error = %e, "no file events; periodic scans only");
                None
            }
        };
        Events {
            _watcher: watcher,
            receiver,
            last: None,
        }
    }

    /// Drains pending events; true once events came and then none for
    /// `debounce` (time to rescan).
    pub fn quiet_after_change(&mut self, now: Instant, debounce: Duration) -> bool {
        while self.receiver.try_recv().is_ok() {
            self.last = Some(now);
        }
        match self.last {
            Some(t) if now.saturating_duration_since(t) >= debounce => {
                self.last = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_finds_specs_and_skips_hidden_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        for f in [
            "a.gevo.toml",
            "sub/deeper/b.gevo.toml",
            ".hidden/c.gevo.toml",
            "sub/not-a-spec.toml",
            "sub/.gevo.toml",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        let found: Vec<_> = scan(&[(root.clone(), Adopts::Everyone)])
            .into_iter()
            .map(|f| f.spec.strip_prefix(&root).unwrap().to_path_buf())
            .collect();
        assert_eq!(
            found,
            [
                PathBuf::from("a.gevo.toml"),
                PathBuf::from("sub/deeper/b.gevo.toml")
            ]
        );
        assert_eq!(spec_stem(Path::new("x/stencil.gevo.toml")), "stencil");
        assert!(scan(&[(root.join("missing"), Adopts::Everyone)]).is_empty());
    }

    #[test]
    fn a_root_adopting_one_user_takes_only_their_specs_where_they_may_look() {
        // SAFETY: geteuid cannot fail and touches no memory.
        if unsafe { libc::geteuid() } != 0 {
            println!("skipped: files of other owners need root to make");
            return;
        }
        use std::os::unix::fs::{lchown, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::set_permissions(&root, PermissionsExt::from_mode(0o755)).unwrap();
        let (theirs, others) = (4242, 4343);
        for (f, owner) in [
            ("mine.gevo.toml", theirs),
            ("yours.gevo.toml", others),
            ("sub/deep.gevo.toml", theirs),
            ("closed/hidden.gevo.toml", theirs),
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "").unwrap();
            lchown(&p, Some(owner), None).unwrap();
        }
        std::fs::set_permissions(root.join("closed"), PermissionsExt::from_mode(0o700)).unwrap();
        let names = |adopts| -> Vec<PathBuf> {
            scan(&[(root.clone(), adopts)])
                .into_iter()
                .map(|f| f.spec.strip_prefix(&root).unwrap().to_path_buf())
                .collect()
        };
        assert_eq!(
            names(Adopts::OnlyOf(theirs)),
            [
                PathBuf::from("mine.gevo.toml"),
                PathBuf::from("sub/deep.gevo.toml")
            ]
        );
        assert_eq!(names(Adopts::Everyone).len(), 4);
        // A root they may not list adopts nothing.
        std::fs::set_permissions(&root, PermissionsExt::from_mode(0o700)).unwrap();
        assert!(names(Adopts::OnlyOf(theirs)).is_empty());
    }

    #[test]
    fn content_counts_once_unchanged_for_the_settle_time() {
        let mut s = Settler::default();
        let t0 = Instant::now();
        let settle = Duration::from_secs(2);
        let p = Path::new("k.gevo.toml");
        assert_eq!(s.observe(p, "h1", t0, settle), settle);
        assert_eq!(
            s.observe(p, "h1", t0 + Duration::from_secs(1), settle),
            Duration::from_secs(1)
        );
        // A change restarts the clock.
        assert_eq!(
            s.observe(p, "h2", t0 + Duration::from_secs(1), settle),
            settle
        );
        let half = Duration::from_millis(500);
        assert_eq!(
            s.unsettled(t0 + Duration::from_millis(2500), settle),
            BTreeMap::from([(p.to_path_buf(), half)])
        );
        assert_eq!(
            s.observe(p, "h2", t0 + Duration::from_secs(3), settle),
            Duration::ZERO
        );
        assert!(s.unsettled(t0 + Duration::from_secs(3), settle).is_empty());
        s.retain(|_| false);
        assert_eq!(
            s.observe(p, "h2", t0 + Duration::from_secs(4), settle),
            settle
        );
    }
}
