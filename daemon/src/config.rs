//! Configuration files, shared by `gevod evolve` and the daemon: the TOML
//! reading with one-line errors that name the file and key, durations, and
//! the tables both use (`[evolve]` is `evolve::Config`; `[gpu]`, `[workers]`,
//! `[cluster]` here). The daemon's own keys are in [`serve`]; `gevod evolve --config`
//! reads an [`EvolveFile`]. Durations are strings like `90s`, `10m`, `2h`.

pub mod ranges;
pub mod serve;

pub use serve::ServeConfig;

use gevo_model::ranges::Invalid;
use gevo_search::evolve;
use serde::{Deserialize, Deserializer};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not a regular file, too large, unreadable: the message names it.
    #[error(transparent)]
    Read(#[from] gevo_client::files::FileError),
    /// `file:line:column: message`, one line.
    #[error("{0}")]
    Syntax(String),
    #[error("{}: {key}: {message}", path.display())]
    Value {
        path: PathBuf,
        key: String,
        message: String,
    },
}

impl ConfigError {
    /// `invalid`, found in the file at `path`.
    pub fn invalid(path: &Path, invalid: Invalid) -> ConfigError {
        ConfigError::Value {
            path: path.to_path_buf(),
            key: invalid.key,
            message: invalid.message,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendSetting {
    /// Every GPU present, else the simulator.
    Auto,
    Sim,
    Cuda,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WithoutGpu {
    /// Run jobs on the CPU simulator.
    Simulate,
    /// Keep jobs queued until a GPU appears (restart or SIGHUP).
    Wait,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpuSection {
    pub backend: BackendSetting,
    /// GPUs by ordinal ("0") or UUID ("GPU-..."); empty: every GPU.
    pub devices: Vec<String>,
    /// GPUs behind each running job (a GPU worker each, of one model).
    pub devices_per_job: usize,
    /// With `backend = "auto"` and no GPU.
    pub without_gpu: WithoutGpu,
    /// Percent: a GPU busier than this (while gevod is not using it) is not idle.
    pub idle_utilization: u32,
    /// After a GPU was seen busy, it is idle again once no other process
    /// computed on it and its utilization stayed under the threshold for
    /// this long (a GPU quiet at the first look is idle at once).
    #[serde(deserialize_with = "duration")]
    pub idle_grace: Duration,
    /// How often NVML is asked.
    #[serde(deserialize_with = "duration")]
    pub poll_interval: Duration,
    /// Which of the simulator's train tests new variants run on first.
    #[serde(deserialize_with = "prescreen")]
    pub prescreen: Prescreen,
    /// compute-sanitizer on each variant about to be validated on a GPU.
    pub sanitize: SanitizeMode,
    /// `adaptive`: new variants are timed in batches and stop once they are
    /// confidently on one side of the selection threshold; `fixed`: every
    /// variant gets the full rounds.
    pub measurement: Measurement,
}

impl Default for GpuSection {
    fn default() -> Self {
        GpuSection {
            backend: BackendSetting::Auto,
            devices: Vec::new(),
            devices_per_job: 1,
            without_gpu: WithoutGpu::Simulate,
            idle_utilization: 10,
            idle_grace: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            prescreen: Prescreen::default(),
            sanitize: SanitizeMode::Auto,
            measurement: Measurement::Adaptive,
        }
    }
}

/// `[gpu] prescreen`, `gevod evolve --prescreen`: on the GPU backend,
/// which of the simulator's train tests (least input bytes first) a compile
/// worker runs each new variant on before it may cost GPU time
/// (docs/evolve.md, "The pre-screen"). Promotion's variants run on all of
/// them unless it is `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Prescreen {
    /// Every train test: also the faults and runaway loops that show only
    /// at a larger size. The default: on the GPU, `smallest` measured more
    /// variants but validated no more (docs/evolve.md, "The pre-screen").
    #[default]
    All,
    /// The smallest train test only.
    Smallest,
    /// None: every variant reaches the GPU.
    Off,
}

impl Prescreen {
    /// The placement promotion's variants get: every train test, so that a
    /// variant is never validated on less than `all` checked.
    pub fn for_promotion(self) -> Prescreen {
        match self {
            Prescreen::Off => Prescreen::Off,
            _ => Prescreen::All,
        }
    }

    /// How many of the train tests, least input first, it runs (of `train`).
    pub fn tests(self, train: usize) -> usize {
        match self {
            Prescreen::All => train,
            Prescreen::Smallest => train.min(1),
            Prescreen::Off => 0,
        }
    }
}

impl From<bool> for Prescreen {
    /// The key's meaning when it was a switch: on, every train test.
    fn from(on: bool) -> Self {
        match on {
            true => Prescreen::All,
            false => Prescreen::Off,
        }
    }
}

/// A [`Prescreen`] by name, or `true`/`false` (`all`/`off`: the key was a
/// switch before it had placements, and the worker protocol before 6).
pub(crate) fn prescreen<'de, D: Deserializer<'de>>(d: D) -> Result<Prescreen, D::Error> {
    struct Placement;
    impl serde::de::Visitor<'_> for Placement {
        type Value = Prescreen;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("gpu.prescreen: \"all\", \"smallest\", \"off\", true or false")
        }
        fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<Prescreen, E> {
            Ok(on.into())
        }
        fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Prescreen, E> {
            <Prescreen as clap::ValueEnum>::from_str(name, false)
                .map_err(|_| E::invalid_value(serde::de::Unexpected::Str(name), &self))
        }
    }
    d.deserialize_any(Placement)
}

/// `[gpu] sanitize` and `gevod evolve --sanitize` (`worker::sanitize` runs it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum SanitizeMode {
    /// Use compute-sanitizer when it is found, and say so.
    Auto,
    Off,
    /// No GPU job starts without compute-sanitizer.
    Required,
}

/// How the search's variants are timed on their train tests (promotion's
/// held-out measurements always take the full rounds; `cuda::measure`
/// times them).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Measurement {
    /// In batches, stopping once a variant is confidently on one side of
    /// the selection threshold (docs/evolve.md, "Adaptive measurement").
    #[default]
    Adaptive,
    /// Every variant the full rounds.
    Fixed,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkersSection {
    /// Worker processes per running job; 0: one per core.
    pub count: usize,
    /// A compile or test run longer than this costs its variant and worker.
    #[serde(deserialize_with = "duration")]
    pub timeout: Duration,
    /// The CPU priority of the search's compile and simulator workers
    /// (`worker::priority`).
    pub cpu: CpuPriority,
}

/// `[workers] cpu`: how the daemon's search shares the CPU with the
/// machine's other work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuPriority {
    /// Linux's SCHED_IDLE: runs only on CPU time nothing else wants.
    #[default]
    Idle,
    /// Nice 19: a small share when others compete.
    Low,
    /// As any other process (`gevod evolve`, which a user runs on purpose).
    Normal,
}

impl Default for WorkersSection {
    fn default() -> Self {
        WorkersSection {
            count: 0,
            timeout: Duration::from_secs(120),
            cpu: CpuPriority::Idle,
        }
    }
}

/// `[cluster]`: where worker processes run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSection {
    /// `local`: child processes; `slurm`: `srun` job steps in the
    /// allocation the daemon or `gevod evolve` runs in.
    pub launcher: LauncherKind,
    /// The `srun` program.
    pub srun: std::path::PathBuf,
    /// Extra `srun` arguments for every worker step (`--partition=gpu`).
    pub srun_args: Vec<String>,
    /// GPU workers of a job on the GPU backend, each a step with one GPU.
    pub gpu_steps: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LauncherKind {
    Local,
    Slurm,
}

impl Default for ClusterSection {
    fn default() -> Self {
        ClusterSection {
            launcher: LauncherKind::Local,
            srun: "srun".into(),
            srun_args: Vec::new(),
            gpu_steps: 1,
        }
    }
}

impl ClusterSection {
    /// Checks the numeric keys' ranges.
    pub fn validate(&self) -> Result<(), Invalid> {
        ranges::GPU_STEPS.check(self.gpu_steps).map(drop)
    }
}

/// `90s`, `10m`, `2h`, `1.5s`, `250ms`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len()));
    let n: f64 = number
        .parse()
        .map_err(|_| format!("expected a duration like 90s, 10m or 2h, not {s:?}"))?;
    let seconds = match unit {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {s:?} (use ms, s, m or h)"
            ))
        }
    };
    // Negative, NaN or too large for a Duration (`1e30s`).
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("{s:?} is not a duration"))
}

pub(crate) fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).map_err(serde::de::Error::custom)
}

/// Parses TOML into `T`, with errors as one `file:line:column: message` line.
pub fn parse_toml<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        // toml's own text spans several lines; keep the position and message.
        let at = e.span().map_or(0, |s| s.start).min(text.len());
        let line = text[..at].matches('\n').count() + 1;
        let column = at - text[..at].rfind('\n').map_or(0, |i| i + 1) + 1;
        ConfigError::Syntax(format!(
            "{}:{line}:{column}: {}",
            path.display(),
            e.message().trim()
        ))
    })
}

/// `gevod evolve --config FILE`: an `[evolve]` table with the search
/// parameters (the same table as the daemon's file).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvolveFile {
    #[serde(default)]
    pub evolve: evolve::Config,
    #[serde(default)]
    pub cluster: ClusterSection,
}

impl EvolveFile {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<EvolveFile, ConfigError> {
        let text = gevo_client::files::read_text_capped(path, gevo_client::files::CONFIG_CAP)?;
        let file: EvolveFile = parse_toml(path, &text)?;
        file.evolve
            .validate()
            .and_then(|()| file.cluster.validate())
            .map_err(|e| ConfigError::invalid(path, e))?;
        Ok(file)
    }
}
