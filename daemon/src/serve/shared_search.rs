//! Jobs that are the same search under two names. Two build directories of
//! one project (a Debug and a Release build, two checkouts) make two kernels
//! of the same code: their specs differ only in the `project` line gevo's
//! CMake writes, their IR only in the build directory its debug info names
//! (the compilation directory), and the backend and target are the same.
//! Searching both would spend a slot twice on one question, so the second
//! one registered *follows* the first: it never runs, and its name serves
//! the first one's best validated variant with its own record (its spec
//! hash is what its build checks). A follower whose leader is gone
//! (superseded by a rebuild, its spec removed, failed) runs a search of its
//! own. Harness specs are never shared: their programs live in each build
//! directory and may differ.

use super::registry::{JobEntry, Registry};
use super::scan::record_for;
use gevo_client::proto::BestRecord;
use gevo_ir::{content_hash, hash_without_build_directories};
use gevo_model::spec::{ArgKind, Fill, Spec};
use gevo_search::evolve::Validated;

/// What two jobs must have in common to share a search, hashed: the spec
/// as data without its `project` key (comments and layout aside: the copy
/// gevo's CMake writes records its IR's hash in a comment), the contents
/// of the files it fills buffers from, the IR without its debug info's
/// directory names, the backend and the PTX target. `None` for a harness
/// spec.
pub fn key(
    spec: &Spec,
    spec_text: &str,
    ir_text: &str,
    backend: &str,
    arch: &str,
) -> Option<String> {
    if spec.harness.is_some() {
        return None;
    }
    let files: String = spec
        .args
        .iter()
        .filter_map(|a| match &a.kind {
            ArgKind::Buffer { fill, .. } => match &fill.value {
                Fill::File { data, .. } => Some(content_hash(data) + "\n"),
                _ => None,
            },
            ArgKind::Scalar { .. } => None,
        })
        .collect();
    let identity = format!(
        "{}\n{files}{}\n{backend}\n{arch}",
        content_hash(spec_data(spec_text).as_bytes()),
        hash_without_build_directories(ir_text)
    );
    Some(content_hash(identity.as_bytes()))
}

/// The spec's TOML as data, `project` removed, written back in one
/// canonical form (keys sorted, comments gone).
fn spec_data(spec_text: &str) -> String {
    let canonical = toml::from_str::<toml::Table>(spec_text)
        .ok()
        .and_then(|mut t| {
            t.remove("project");
            toml::to_string(&t).ok()
        });
    // The daemon parsed the spec already; should TOML still refuse it,
    // its text without comment lines and `project` stands in.
    canonical.unwrap_or_else(|| {
        spec_text
            .lines()
            .filter(|l| !is_project_line(l) && !l.trim_start().starts_with('#'))
            .flat_map(|l| [l, "\n"])
            .collect()
    })
}

/// `project = ...`, the key that names the kernel (and differs between
/// build directories).
fn is_project_line(line: &str) -> bool {
    line.trim_start()
        .strip_prefix("project")
        .is_some_and(|rest| rest.trim_start().starts_with('='))
}

impl Registry {
    /// The live job of another kernel that a new job with `key` would
    /// follow: the first registered, itself following none.
    pub fn leader_for(&self, key: &str, kernel: &str) -> Option<String> {
        self.jobs
            .values()
            .filter(|j| {
                j.daemon.search_key.as_deref() == Some(key)
                    && j.daemon.follows.is_none()
                    && j.daemon.kernel != kernel
                    && j.live()
            })
            .min_by_key(|j| j.id.clone())
            .map(|j| j.id.clone())
    }

    /// The live job whose search `job` shares, unless there is none (it
    /// follows none, or its leader is gone).
    pub fn leader_of(&self, job: &JobEntry) -> Option<&JobEntry> {
        let id = job.daemon.follows.as_ref()?;
        self.jobs.get(id).filter(|l| l.live())
    }

    /// The job whose search answers for `job`: its leader while it has
    /// one, else itself.
    pub fn shown<'a>(&'a self, job: &'a JobEntry) -> &'a JobEntry {
        self.leader_of(job).unwrap_or(job)
    }

    /// `kernel`'s versions, newest first (`versions`), each as the job
    /// whose search answers for it ([`Registry::shown`]).
    pub fn shown_versions(&self, kernel: &str) -> Vec<&JobEntry> {
        self.versions(kernel)
            .into_iter()
            .map(|j| self.shown(j))
            .collect()
    }

    /// The best validated variant `job`'s kernel serves, with `job`'s own
    /// record (kernel name, version, spec and IR hashes).
    pub fn best_of(&self, job: &JobEntry) -> Option<(Validated, BestRecord)> {
        match self.leader_of(job) {
            None => job.best.clone(),
            Some(leader) => {
                let (v, leaders) = leader.best.as_ref()?;
                Some((v.clone(), record_for(job, v, leaders.validated_at)))
            }
        }
    }

    /// The live jobs following `leader`.
    pub fn followers_of(&self, leader: &str) -> Vec<&JobEntry> {
        self.jobs
            .values()
            .filter(|j| j.live() && self.leader_of(j).is_some_and(|l| l.id == leader))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_key_and_comments_do_not_count() {
        assert!(is_project_line("project = \"app.1a2b\""));
        assert!(is_project_line("  project=\"x\""));
        assert!(!is_project_line("projection = 1"));
        assert!(!is_project_line("# project = \"x\""));
        let spec = |project: &str, comment: &str| {
            format!(
                "# Written by gevo_optimize() from /src/app/k.gevo.toml\nversion = 1\n\
                 project = \"{project}\"\n# ir sha256: {comment}\n[launch]\ngrid = [1] # one\n"
            )
        };
        let debug = spec_data(&spec("app.1a2b", "aaaa"));
        assert_eq!(debug, spec_data(&spec("app.9f3c", "bbbb")));
        assert!(
            !debug.contains("project") && !debug.contains('#'),
            "{debug}"
        );
        assert_ne!(
            debug,
            spec_data(&spec("app.1a2b", "aaaa").replace("[1]", "[2]"))
        );
        // Text TOML refuses still counts, without comments and project.
        assert_eq!(spec_data("x = \n# c\nproject = 1\ny"), "x = \ny\n");
    }
}
