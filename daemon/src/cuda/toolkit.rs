//! The CUDA toolkit's programs, where one is installed: finding them, and
//! ptxas, which assembles a variant's PTX into machine code (a cubin) for
//! one GPU architecture. Compile workers assemble each variant that passes
//! the pre-screen, so the GPU worker loads machine code instead of spending
//! its own time in the driver's JIT (docs/evolve.md, "Where GPU time goes").

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Names a ptxas to use instead of the one found, or `off` for none.
pub const PTXAS_VARIABLE: &str = "GEVO_PTXAS";

/// `program` on the PATH, else in the toolkit's usual places
/// (`$CUDA_HOME/bin`, `$CUDA_PATH/bin`, `/usr/local/cuda/bin`).
pub fn find_tool(program: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>());
    let toolkit = ["CUDA_HOME", "CUDA_PATH"]
        .into_iter()
        .filter_map(std::env::var_os)
        .map(|d| PathBuf::from(d).join("bin"))
        .chain([PathBuf::from("/usr/local/cuda/bin")]);
    on_path
        .chain(toolkit)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

#[derive(Debug, thiserror::Error)]
pub enum AssembleError {
    #[error("{ptxas}: cannot run: {source}")]
    Run {
        ptxas: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{ptxas} rejects the PTX for {arch}: {log}")]
    Rejected {
        ptxas: PathBuf,
        arch: String,
        log: String,
    },
    #[error("assembling in {dir}: {source}")]
    Io {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A GPU architecture's machine code for one variant, as ptxas made it.
/// On the wire (JSON lines) it travels as base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cubin(pub Vec<u8>);

impl Cubin {
    /// Whether it holds a code section for `kernel` (`.text.KERNEL`).
    pub fn has_code_for(&self, kernel: &str) -> bool {
        let section = format!(".text.{kernel}");
        self.0
            .windows(section.len())
            .any(|w| w == section.as_bytes())
    }
}

impl Serialize for Cubin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use base64::Engine as _;
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Cubin {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use base64::Engine as _;
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map(Cubin)
            .map_err(serde::de::Error::custom)
    }
}

/// ptxas, run once per variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assembler {
    ptxas: PathBuf,
    /// Flags before the input's: none (ptxas's default level) unless
    /// [`Assembler::for_checks`] at [`CheckAssembly::Fast`].
    flags: Vec<String>,
}

/// Names the level guarded builds are assembled at: `full` (the default)
/// or `fast` ([`CheckAssembly`]).
pub const CHECK_ASSEMBLY_VARIABLE: &str = "GEVO_CHECK_ASSEMBLY";

/// How hard ptxas optimizes a guarded build, which only checks a variant
/// (docs/evolve.md, "The guarded build's ptxas level"). Timed builds always
/// get ptxas's default level, the one a user's build gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CheckAssembly {
    /// ptxas's default level. The default: on the H200 host, the quickest
    /// level made a check's run take 2-5x as long on the GPU, which at one
    /// GPU and 16 cores is the busier side.
    #[default]
    Full,
    /// ptxas's quickest level (`--Ofast-compile=max` where its help lists
    /// it, CUDA 12.8 and later; `-O0` before): 0.4-0.8x the CPU. With at
    /// most 64 registers a thread, so that the build launches with every
    /// block size the ordinary build can (the quickest level gave the
    /// stencil's 72).
    Fast,
}

impl CheckAssembly {
    /// `$GEVO_CHECK_ASSEMBLY`: `fast`, else `full` (with a warning for a
    /// value it does not know).
    pub fn from_env() -> Self {
        match std::env::var(CHECK_ASSEMBLY_VARIABLE).as_deref() {
            Ok("fast") => CheckAssembly::Fast,
            Ok("full") | Err(_) => CheckAssembly::Full,
            Ok(other) => {
                tracing::warn!(
                    "{CHECK_ASSEMBLY_VARIABLE}={other:?} is neither \"full\" nor \"fast\": full"
                );
                CheckAssembly::Full
            }
        }
    }
}

/// ptxas's fast-compile option (CUDA 12.8 and later list it in `ptxas
/// --help`), used at its quickest level; `-O0` where it is missing.
const FAST_COMPILE: &str = "--Ofast-compile";
const NO_OPTIMIZATION: &str = "-O0";
/// The most registers a thread of a block of 1024 may have (64K a block).
const MOST_REGISTERS: &str = "-maxrregcount=64";

impl Assembler {
    pub fn new(ptxas: PathBuf) -> Self {
        Assembler {
            ptxas,
            flags: Vec::new(),
        }
    }

    /// This ptxas for guarded builds at `level`. Where code generation
    /// rounds floating-point instructions explicitly (`.rn`, every
    /// fixture's), no level fuses them: outputs are the same at every level
    /// (the GPU suite's guards section compares them byte for byte).
    pub fn for_checks(mut self, level: CheckAssembly) -> Self {
        if level == CheckAssembly::Full {
            return self;
        }
        let help = Command::new(&self.ptxas)
            .arg("--help")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        let lists_fast_compile =
            help.is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains(FAST_COMPILE));
        let quickest = match lists_fast_compile {
            true => format!("{FAST_COMPILE}=max"),
            false => NO_OPTIMIZATION.to_string(),
        };
        self.flags = vec![quickest, MOST_REGISTERS.to_string()];
        self
    }

    /// The flags given to every run before the input's (the level).
    pub fn flags(&self) -> &[String] {
        &self.flags
    }

    /// `$GEVO_PTXAS` (none when it says `off`), else ptxas where
    /// [`find_tool`] finds it.
    pub fn find() -> Option<Self> {
        match std::env::var_os(PTXAS_VARIABLE) {
            Some(v) if v == "off" => None,
            Some(v) if !v.is_empty() => Some(Assembler::new(v.into())),
            _ => find_tool("ptxas").map(Assembler::new),
        }
    }

    pub fn program(&self) -> &Path {
        &self.ptxas
    }

    /// `ptx` assembled for `arch` (`sm_90`), at ptxas's default
    /// optimization level, the same the driver's JIT uses.
    pub fn assemble(&self, ptx: &str, arch: &str) -> Result<Cubin, AssembleError> {
        self.start(ptx, arch)?.finish()
    }

    /// Starts assembling `ptx` for `arch` in the background; `finish`
    /// waits for the cubin, and dropping the answer stops ptxas.
    pub fn start(&self, ptx: &str, arch: &str) -> Result<Assembling, AssembleError> {
        self.start_as(ptx, arch, false)
    }

    /// Starts assembling `ptx` as relocatable code (`ptxas -c`), a part of
    /// a module that nvlink puts together ([`Assembler::link`]).
    pub fn start_relocatable(&self, ptx: &str, arch: &str) -> Result<Assembling, AssembleError> {
        self.start_as(ptx, arch, true)
    }

    /// nvlink beside this ptxas (the toolkit's own), else where
    /// [`find_tool`] finds one.
    pub fn linker(&self) -> Option<PathBuf> {
        let beside = self.ptxas.with_file_name("nvlink");
        match beside.is_file() {
            true => Some(beside),
            false => find_tool("nvlink"),
        }
    }

    /// Relocatable parts ([`Assembler::start_relocatable`]) linked by
    /// `nvlink` into one cubin for `arch`.
    pub fn link(nvlink: &Path, parts: &[&Cubin], arch: &str) -> Result<Cubin, AssembleError> {
        let dir = temp_dir()?;
        let io = |source| AssembleError::Io {
            dir: dir.path().to_path_buf(),
            source,
        };
        let mut inputs = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            // nvlink reads a `.o` as a host object: the name says cubin.
            let input = dir.path().join(format!("part{i}.cubin"));
            std::fs::write(&input, &part.0).map_err(io)?;
            inputs.push(input);
        }
        let output = dir.path().join("linked.cubin");
        let ran = Command::new(nvlink)
            .arg(format!("-arch={arch}"))
            .arg("-o")
            .arg(&output)
            .args(&inputs)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| AssembleError::Run {
                ptxas: nvlink.to_path_buf(),
                source,
            })?;
        if !ran.status.success() {
            return Err(AssembleError::Rejected {
                ptxas: nvlink.to_path_buf(),
                arch: arch.to_string(),
                log: first_lines(&ran.stderr, &ran.status),
            });
        }
        std::fs::read(&output).map(Cubin).map_err(io)
    }

    fn start_as(
        &self,
        ptx: &str,
        arch: &str,
        relocatable: bool,
    ) -> Result<Assembling, AssembleError> {
        let dir = temp_dir()?;
        let (input, output) = (
            dir.path().join("variant.ptx"),
            dir.path().join("variant.cubin"),
        );
        std::fs::write(&input, ptx).map_err(|source| AssembleError::Io {
            dir: dir.path().to_path_buf(),
            source,
        })?;
        let child = Command::new(&self.ptxas)
            .args(&self.flags)
            .arg(format!("-arch={arch}"))
            .args(relocatable.then_some("-c"))
            .arg("-o")
            .arg(&output)
            .arg(&input)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| AssembleError::Run {
                ptxas: self.ptxas.clone(),
                source,
            })?;
        Ok(Assembling {
            child: Some(child),
            ptxas: self.ptxas.clone(),
            arch: arch.to_string(),
            output,
            dir,
        })
    }
}

/// A ptxas run under way (`Assembler::start`).
#[derive(Debug)]
pub struct Assembling {
    /// None once waited for.
    child: Option<Child>,
    ptxas: PathBuf,
    arch: String,
    output: PathBuf,
    /// Holds the PTX and the cubin; removed when this is dropped.
    dir: tempfile::TempDir,
}

impl Assembling {
    /// Waits for ptxas: the cubin, or its refusal with its message.
    pub fn finish(mut self) -> Result<Cubin, AssembleError> {
        let child = self.child.take().expect("waited for once");
        let ran = child
            .wait_with_output()
            .map_err(|source| AssembleError::Run {
                ptxas: self.ptxas.clone(),
                source,
            })?;
        if !ran.status.success() {
            return Err(AssembleError::Rejected {
                ptxas: self.ptxas.clone(),
                arch: self.arch.clone(),
                log: first_lines(&ran.stderr, &ran.status),
            });
        }
        std::fs::read(&self.output)
            .map(Cubin)
            .map_err(|source| AssembleError::Io {
                dir: self.dir.path().to_path_buf(),
                source,
            })
    }
}

/// A temporary directory for one run's files.
fn temp_dir() -> Result<tempfile::TempDir, AssembleError> {
    tempfile::tempdir().map_err(|source| AssembleError::Io {
        dir: std::env::temp_dir(),
        source,
    })
}

/// A failed tool's message: its first lines, or its exit status.
fn first_lines(stderr: &[u8], status: &std::process::ExitStatus) -> String {
    let log = String::from_utf8_lossy(stderr);
    match log.trim() {
        "" => status.to_string(),
        log => log.lines().take(5).collect::<Vec<_>>().join("; "),
    }
}

impl Drop for Assembling {
    /// A cubin no longer wanted: ptxas is stopped, not left to finish.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cubin_travels_as_base64_and_back() {
        let cubin = Cubin(vec![0x7f, b'E', b'L', b'F', 0, 255]);
        let text = serde_json::to_string(&cubin).unwrap();
        assert_eq!(text, "\"f0VMRgD/\"");
        assert_eq!(serde_json::from_str::<Cubin>(&text).unwrap(), cubin);
        assert!(serde_json::from_str::<Cubin>("\"not base64!\"").is_err());
    }

    /// The toolkit's own ptxas (CI installs the distribution's), on a PTX
    /// version every supported toolkit reads: a kernel becomes an ELF
    /// cubin, and a broken one is refused with ptxas's message.
    #[test]
    fn ptxas_assembles_a_kernel_and_refuses_a_broken_one() {
        let Some(ptxas) = find_tool("ptxas") else {
            eprintln!("skipped: no ptxas (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)");
            return;
        };
        let a = Assembler::new(ptxas);
        let ptx = ".version 7.0\n.target sm_80\n.address_size 64\n\n.visible .entry noop()\n{\n\tret;\n}\n";
        let cubin = a.assemble(ptx, "sm_80").unwrap();
        assert!(cubin.0.starts_with(b"\x7fELF"), "{:?}", &cubin.0[..8]);
        let e = a
            .assemble(&ptx.replace("ret;", "no_such_op;"), "sm_80")
            .unwrap_err();
        let AssembleError::Rejected { arch, log, .. } = &e else {
            panic!("{e}");
        };
        assert_eq!(arch, "sm_80");
        assert!(
            log.contains("no_such_op") || log.contains("line 7"),
            "{log}"
        );
    }

    /// A stand-in ptxas at `dir/name` that runs `body`.
    fn stand_in(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        let mut permissions = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&path, permissions).unwrap();
        path
    }

    /// Fast guarded builds: fast-compile where ptxas's help lists it, else
    /// -O0 (an older ptxas, or one whose help fails), with the register
    /// cap; full ones and timed builds: no flags.
    #[test]
    fn fast_checks_are_assembled_at_the_quickest_level_this_ptxas_has() {
        let dir = tempfile::tempdir().unwrap();
        for (help, flags) in [
            (
                "echo '--Ofast-compile <0|min|mid|max>  (-Ofc)'",
                vec!["--Ofast-compile=max", "-maxrregcount=64"],
            ),
            (
                "echo '--opt-level <N>  (-O)'",
                vec!["-O0", "-maxrregcount=64"],
            ),
            ("exit 1", vec!["-O0", "-maxrregcount=64"]),
        ] {
            let ptxas = stand_in(dir.path(), "ptxas", help);
            let assembler = Assembler::new(ptxas);
            assert!(assembler.flags().is_empty());
            let full = assembler.clone().for_checks(CheckAssembly::Full);
            assert!(full.flags().is_empty(), "{help}");
            let fast = assembler.for_checks(CheckAssembly::Fast);
            assert_eq!(fast.flags(), flags, "{help}");
        }
        // The toolkit's own, where installed, assembles at that level.
        let Some(ptxas) = find_tool("ptxas") else {
            eprintln!("skipped the toolkit's ptxas: none found");
            return;
        };
        let checks = Assembler::new(ptxas).for_checks(CheckAssembly::Fast);
        let ptx = ".version 7.0\n.target sm_80\n.address_size 64\n\n.visible .entry noop()\n{\n\tret;\n}\n";
        let cubin = checks.assemble(ptx, "sm_80").unwrap();
        assert!(cubin.0.starts_with(b"\x7fELF"), "{:?}", checks.flags());
    }

    /// An assembly no longer wanted stops ptxas and leaves no files.
    #[test]
    fn a_dropped_assembly_stops_ptxas_and_removes_its_files() {
        // A stand-in for ptxas that takes its time.
        let dir = tempfile::tempdir().unwrap();
        let slow = stand_in(dir.path(), "ptxas", "sleep 30");
        let started = std::time::Instant::now();
        let assembling = Assembler::new(slow).start("// nothing", "sm_90").unwrap();
        let pid = assembling.child.as_ref().unwrap().id();
        let files = assembling.dir.path().to_path_buf();
        assert!(Path::new(&format!("/proc/{pid}")).exists());
        drop(assembling);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "ptxas still runs"
        );
        assert!(!files.exists(), "{} left behind", files.display());
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn a_missing_ptxas_is_named() {
        let a = Assembler::new("/nonexistent/ptxas".into());
        let e = a.assemble(".version 8.0", "sm_90").unwrap_err();
        assert!(
            e.to_string().starts_with("/nonexistent/ptxas: cannot run"),
            "{e}"
        );
    }
}
