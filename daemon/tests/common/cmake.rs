//! A copy of one of the examples built with CMake in a temporary
//! directory, against a test daemon's socket and state: shared by the
//! cmake_* tests.

use super::daemon::{client_binary, s, Daemon};
use gevo_client::proto::{Command as Cmd, Reply};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

pub use super::text;

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Runs a command; panics with its output unless it succeeds. Returns
/// stdout and stderr together.
pub fn run(command: &mut Command) -> String {
    let out = command.output().unwrap();
    let both = text(&out.stdout) + &text(&out.stderr);
    assert!(out.status.success(), "{command:?} failed:\n{both}");
    both
}

pub struct Project {
    /// The example's name, also its program's.
    pub name: String,
    pub source: PathBuf,
    pub build: PathBuf,
    pub socket: PathBuf,
    pub state: PathBuf,
    /// The XDG directories of cmake and everything it runs, so that no
    /// config or daemon of the user running the tests takes part.
    pub xdg: PathBuf,
}

impl Project {
    /// A copy of examples/<example> in dir/<example>, built in dir/<build>,
    /// talking to a daemon in dir/daemon (where `Daemon::start` puts its
    /// socket and state).
    pub fn new(dir: &Path, example: &str, build: &str) -> Project {
        let daemon_dir = dir.join("daemon");
        std::fs::create_dir_all(&daemon_dir).unwrap();
        let source = dir.join(example);
        if !source.exists() {
            copy_dir(&super::repo_root().join("examples").join(example), &source);
        }
        Project {
            name: example.to_string(),
            source,
            build: dir.join(build),
            socket: daemon_dir.join("gevod.sock"),
            state: daemon_dir.join("state"),
            xdg: dir.join("xdg"),
        }
    }

    /// `cmake` in the tests' environment: the XDG directories inside the
    /// test's, and no GEVO_SOCKET (it would be the cache's default).
    pub fn cmake(&self) -> Command {
        let mut command = Command::new("cmake");
        command
            .env_remove("GEVO_SOCKET")
            .env("XDG_RUNTIME_DIR", self.xdg.join("run"))
            .env("XDG_STATE_HOME", self.xdg.join("state"))
            .env("XDG_CONFIG_HOME", self.xdg.join("config"));
        command
    }

    /// The configure command without gevo's settings: the source and
    /// build directories, a generator's defaults, no local GPU (a
    /// stand-in nvidia-smi that does not exist: the arch is sm_90 on any
    /// machine), and `extra`.
    pub fn bare_configure(&self, extra: &[String]) -> Command {
        let mut command = self.cmake();
        command
            .arg("-S")
            .arg(&self.source)
            .arg("-B")
            .arg(&self.build)
            .arg(format!(
                "-DGEVO_NVIDIA_SMI={}",
                s(&self.xdg.join("no-nvidia-smi"))
            ))
            .args(extra);
        command
    }

    /// cmake's command line for configuring, with gevo's tools and the
    /// daemon's place; `extra` are more -D options.
    pub fn configure_command(&self, extra: &[String]) -> Command {
        let mut args = vec![
            format!("-Dgevo_DIR={}", s(&super::repo_root().join("cmake"))),
            format!("-DGEVO_CLIENT={}", s(&client_binary())),
            format!("-DGEVOD={}", env!("CARGO_BIN_EXE_gevod")),
            format!("-DGEVO_SOCKET={}", s(&self.socket)),
            format!("-DGEVO_STATE={}", s(&self.state)),
        ];
        args.extend_from_slice(extra);
        self.bare_configure(&args)
    }

    pub fn configure(&self) -> String {
        self.configure_with(&[])
    }

    pub fn configure_with(&self, extra: &[String]) -> String {
        run(&mut self.configure_command(extra))
    }

    /// Configures, expecting it to fail; returns what cmake said.
    pub fn configure_fails(&self, extra: &[String]) -> String {
        let out = self.configure_command(extra).output().unwrap();
        let both = text(&out.stdout) + &text(&out.stderr);
        assert!(!out.status.success(), "configuring succeeded:\n{both}");
        both
    }

    pub fn build(&self) -> String {
        run(self.cmake().arg("--build").arg(&self.build))
    }

    /// The daemon's name of this build's kernel `name` by default: the
    /// project, then six hex digits of the SHA-256 of the build
    /// directory's real path (docs/cmake.md, "Kernel names").
    pub fn kernel(&self, name: &str) -> String {
        let real = std::fs::canonicalize(&self.build).unwrap();
        let hash = gevo_client::export::ptx_hash(s(&real));
        format!("{}.{}/{name}", self.name, &hash[..6])
    }

    pub fn app(&self, arg: &str) -> String {
        run(Command::new(self.build.join(&self.name)).arg(arg))
    }

    pub fn gevo_file(&self, name: &str) -> PathBuf {
        self.build.join("gevo").join(name)
    }

    pub fn original(&self) -> String {
        std::fs::read_to_string(self.gevo_file("stencil.original.ptx")).unwrap()
    }

    pub fn mtime(&self, path: &Path) -> SystemTime {
        std::fs::metadata(path).unwrap().modified().unwrap()
    }
}

/// A copy of an example under dir/<copy> (its own source tree, so that it
/// can be edited), built in dir/<copy>-build.
pub fn example_copy(dir: &Path, example: &str, copy: &str) -> Project {
    let source = dir.join(copy);
    copy_dir(&super::repo_root().join("examples").join(example), &source);
    let mut p = Project::new(dir, example, &format!("{copy}-build"));
    p.source = source;
    p
}

/// A copy of the CMake project tests/fixtures/<fixture> (its project and
/// program named like it) in dir/<fixture>, built in dir/<build>.
pub fn fixture_project(dir: &Path, fixture: &str, build: &str) -> Project {
    let source = dir.join(fixture);
    if !source.exists() {
        copy_dir(
            &super::repo_root().join("tests/fixtures").join(fixture),
            &source,
        );
    }
    Project::new(dir, fixture, build)
}

/// Replaces the first `from` in the file with `to`.
pub fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from} not in {}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

/// Waits until the daemon has a validated variant of kernel, then pauses its
/// job and waits for the generation in flight to end, so that no newer
/// variant comes between a build and the questions after it.
pub fn wait_for_variant_and_pause(d: &Daemon, kernel: &str, scratch: &Path) {
    let probe = scratch.join("probe.ptx");
    d.wait_for("a validated variant", |d| {
        let out = d.client(&["best", kernel, "--arch", "sm_90", "-o", s(&probe)]);
        match out.status.code() {
            Some(0) => Some(()),
            Some(3) => None,
            _ => panic!("best: {out:?}"),
        }
    });
    let paused = d.client(&["pause", kernel]);
    assert!(paused.status.success(), "{paused:?}");
    d.wait_for("the paused job to stop", |d| match d.call(Cmd::Status) {
        Reply::Status(status) => status
            .slots
            .iter()
            .all(|slot| !slot.state.starts_with("running"))
            .then_some(()),
        other => panic!("status answered {other:?}"),
    });
}

/// The daemon's answer to `best` for kernel, as JSON.
pub fn best_json(d: &Daemon, kernel: &str) -> serde_json::Value {
    let best = d.client(&["--json", "best", kernel, "--arch", "sm_90"]);
    assert!(best.status.success(), "{best:?}");
    serde_json::from_slice(&best.stdout).unwrap()
}

/// A CUDA toolkit that MODE REPLACE uses, as the tests see it.
pub struct Toolkit {
    /// Where configure says REPLACE's CUDA is (`CUDA at <root>`): clang's
    /// `--cuda-path`.
    pub root: PathBuf,
    /// The cmake options that name it: `-DGEVO_CUDA_PATH=...` when given
    /// by GEVO_TEST_CUDA_PATH, none when gevo finds it by itself.
    pub settings: Vec<String>,
    /// Its cuobjdump, to read a program's fatbin with.
    pub cuobjdump: PathBuf,
}

/// The parts of a toolkit in NVIDIA's layout (everything under root) and in
/// Debian's and Ubuntu's nvidia-cuda-toolkit (clang's `--cuda-path`
/// /usr/lib/cuda, the rest spread over /usr): the layouts
/// cmake/GevoToolkit.cmake knows. Each entry is one part: any of its paths.
fn layout_parts(root: &Path) -> Vec<Vec<PathBuf>> {
    let distribution = root == Path::new("/usr/lib/cuda");
    let usr = |p: &str| vec![PathBuf::from("/usr").join(p)];
    let under = |p: &str| vec![root.join(p)];
    let mut parts = vec![under("nvvm/libdevice/libdevice.10.bc")];
    if distribution {
        parts.extend([
            usr("bin/ptxas"),
            usr("bin/fatbinary"),
            usr("bin/cuobjdump"),
            usr("include/cuda_runtime.h"),
            ["x86_64-linux-gnu", "aarch64-linux-gnu"]
                .iter()
                .map(|arch| {
                    PathBuf::from("/usr/lib")
                        .join(arch)
                        .join("libcudart_static.a")
                })
                .collect(),
        ]);
    } else {
        parts.extend([
            under("bin/ptxas"),
            under("bin/fatbinary"),
            under("bin/cuobjdump"),
            under("include/cuda_runtime.h"),
            ["lib64", "lib", "targets/x86_64-linux/lib"]
                .iter()
                .map(|lib| root.join(lib).join("libcudart_static.a"))
                .collect(),
        ]);
    }
    parts
}

/// A CUDA toolkit for the REPLACE tests: GEVO_TEST_CUDA_PATH (given to
/// cmake as GEVO_CUDA_PATH), else one that gevo_optimize() finds by itself:
/// the first complete one of $CUDA_PATH, $CUDA_HOME, /usr/local/cuda
/// (NVIDIA's layout) and /usr/lib/cuda (Debian's and Ubuntu's
/// nvidia-cuda-toolkit, which scripts/install-deps.sh installs). Else why
/// there is none.
pub fn cuda_toolkit() -> Result<Toolkit, String> {
    let given = std::env::var_os("GEVO_TEST_CUDA_PATH").filter(|v| !v.is_empty());
    let candidates: Vec<PathBuf> = match &given {
        Some(root) => vec![root.into()],
        None => ["CUDA_PATH", "CUDA_HOME"]
            .iter()
            .filter_map(|var| std::env::var_os(var).filter(|v| !v.is_empty()))
            .map(PathBuf::from)
            .chain(["/usr/local/cuda", "/usr/lib/cuda"].map(PathBuf::from))
            .collect(),
    };
    let mut lacking = Vec::new();
    for root in candidates {
        let parts = layout_parts(&root);
        let missing: Vec<String> = parts
            .iter()
            .filter(|any| !any.iter().any(|p| p.is_file()))
            .map(|any| s(&any[0]).to_string())
            .collect();
        if missing.is_empty() {
            let cuobjdump = parts[3][0].clone();
            let settings = match &given {
                Some(_) => vec![format!("-DGEVO_CUDA_PATH={}", s(&root))],
                None => Vec::new(),
            };
            return Ok(Toolkit {
                root,
                settings,
                cuobjdump,
            });
        }
        lacking.push(format!("{} lacks {}", s(&root), missing.join(", ")));
    }
    Err(format!(
        "no CUDA toolkit ({}; scripts/install-deps.sh installs Debian's or Ubuntu's \
         nvidia-cuda-toolkit, GEVO_TEST_CUDA_PATH names another)",
        lacking.join("; ")
    ))
}
