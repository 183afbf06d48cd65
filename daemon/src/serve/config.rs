//! `gevod.toml`: the daemon's configuration. Every key is optional (an empty
//! file is valid) and documented with its default in `config/gevod.toml`.
//! Unknown keys and bad values are errors naming the key; durations are
//! strings like `90s`, `10m`, `2h`.

use crate::evolve;
use serde::{Deserialize, Deserializer};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
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

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    pub daemon: DaemonSection,
    pub api: ApiSection,
    pub schedule: ScheduleSection,
    pub gpu: GpuSection,
    pub workers: WorkersSection,
    pub jobs: JobsSection,
    pub harness: HarnessSection,
    pub evolve: evolve::Config,
}

/// `[harness]`: who may have the daemon run harness commands, and as whom.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HarnessSection {
    /// Owners of spec files (besides the daemon's own user) whose harness
    /// commands the daemon runs.
    pub allowed_uids: Vec<u32>,
    /// The user harness commands run as when the daemon runs as root.
    pub user: String,
}

impl Default for HarnessSection {
    fn default() -> Self {
        HarnessSection {
            allowed_uids: Vec::new(),
            user: "nobody".to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonSection {
    /// Default: /var/lib/gevod (system mode) or $XDG_STATE_HOME/gevo.
    pub state_dir: Option<PathBuf>,
    /// Default: /run/gevod/gevod.sock or $XDG_RUNTIME_DIR/gevo/gevod.sock.
    pub socket: Option<PathBuf>,
    /// Build directories searched for `*.gevo.toml` specs.
    pub watch: Vec<PathBuf>,
    /// Full rescan of every watched root this often, events or not.
    #[serde(deserialize_with = "duration")]
    pub scan_interval: Duration,
    /// A spec (and its IR) counts once unchanged for this long.
    #[serde(deserialize_with = "duration")]
    pub settle: Duration,
    /// File events are coalesced: a rescan waits until none came for this long.
    #[serde(deserialize_with = "duration")]
    pub debounce: Duration,
}

impl Default for DaemonSection {
    fn default() -> Self {
        DaemonSection {
            state_dir: None,
            socket: None,
            watch: Vec::new(),
            scan_interval: Duration::from_secs(60),
            settle: Duration::from_secs(2),
            debounce: Duration::from_millis(500),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiSection {
    /// Users allowed besides the daemon's own user and root.
    pub allowed_uids: Vec<u32>,
    /// Groups (ids) whose members are allowed besides the daemon's own group.
    pub allowed_gids: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScheduleSection {
    /// How long a job keeps its GPU (or the simulator) before the scheduler
    /// may hand it to another job; whole generations are never cut short
    /// except by a busy GPU, a pause or shutdown.
    #[serde(deserialize_with = "duration")]
    pub slice: Duration,
    /// A job whose best train cost improved within `recent_generations`
    /// gets this many times the share of one that did not.
    pub improved_weight: f64,
    pub recent_generations: u64,
}

impl Default for ScheduleSection {
    fn default() -> Self {
        ScheduleSection {
            slice: Duration::from_secs(60),
            improved_weight: 4.0,
            recent_generations: 10,
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
    /// With `backend = "auto"` and no GPU.
    pub without_gpu: WithoutGpu,
    /// Percent: a GPU busier than this (while gevod is not using it) is not idle.
    pub idle_utilization: u32,
    /// A GPU is idle once no other process computed on it and its
    /// utilization stayed under the threshold for this long.
    #[serde(deserialize_with = "duration")]
    pub idle_grace: Duration,
    /// How often NVML is asked.
    #[serde(deserialize_with = "duration")]
    pub poll_interval: Duration,
    /// Screen new variants on the simulator's smallest train test first.
    pub prescreen: bool,
}

impl Default for GpuSection {
    fn default() -> Self {
        GpuSection {
            backend: BackendSetting::Auto,
            devices: Vec::new(),
            without_gpu: WithoutGpu::Simulate,
            idle_utilization: 10,
            idle_grace: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            prescreen: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkersSection {
    /// Worker processes per running job; 0: one per core.
    pub count: usize,
    /// A compile or test run longer than this costs its variant and worker.
    #[serde(deserialize_with = "duration")]
    pub timeout: Duration,
}

impl Default for WorkersSection {
    fn default() -> Self {
        WorkersSection {
            count: 0,
            timeout: Duration::from_secs(120),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobsSection {
    /// Seed of every new job's search.
    pub seed: u64,
    /// A job stops after this many generations; 0: never.
    pub max_generations: u64,
}

impl Default for JobsSection {
    fn default() -> Self {
        JobsSection {
            seed: 1,
            max_generations: 0,
        }
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
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(format!("{s:?} is not a duration"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
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

impl ServeConfig {
    /// Reads and validates `path`. A missing file is an error only when
    /// `required` (given on the command line); the default path may be absent.
    pub fn load(path: &Path, required: bool) -> Result<ServeConfig, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => String::new(),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<ServeConfig, ConfigError> {
        let config: ServeConfig = parse_toml(path, text)?;
        config.validate(path)?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |key: &str, message: String| ConfigError::Value {
            path: path.to_path_buf(),
            key: key.to_string(),
            message,
        };
        if self.gpu.idle_utilization > 100 {
            return Err(bad(
                "gpu.idle_utilization",
                format!("{} is not a percentage (0-100)", self.gpu.idle_utilization),
            ));
        }
        for (key, d) in [
            ("daemon.scan_interval", self.daemon.scan_interval),
            ("schedule.slice", self.schedule.slice),
            ("gpu.poll_interval", self.gpu.poll_interval),
            ("workers.timeout", self.workers.timeout),
        ] {
            if d.is_zero() {
                return Err(bad(key, "must be longer than 0s".into()));
            }
        }
        if !(self.schedule.improved_weight.is_finite() && self.schedule.improved_weight >= 1.0) {
            return Err(bad(
                "schedule.improved_weight",
                format!("{} must be a number >= 1", self.schedule.improved_weight),
            ));
        }
        for d in &self.gpu.devices {
            d.parse::<crate::cuda::DeviceSelector>()
                .map_err(|m| bad("gpu.devices", m))?;
        }
        self.evolve.validate().map_err(|m| ConfigError::Value {
            path: path.to_path_buf(),
            key: "evolve".into(),
            message: m,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ServeConfig, String> {
        ServeConfig::parse(Path::new("gevod.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn an_empty_file_is_every_default() {
        assert_eq!(parse("").unwrap(), ServeConfig::default());
    }

    #[test]
    fn the_documented_file_is_the_defaults() {
        // config/gevod.toml lists every key with its default value: with the
        // comment markers removed, it must parse to exactly the defaults.
        let text = include_str!("../../../config/gevod.toml");
        let uncommented: String = text
            .lines()
            .map(|l| {
                l.strip_prefix("# ")
                    .filter(|rest| is_setting(rest))
                    .unwrap_or(l)
            })
            .collect::<Vec<_>>()
            .join("\n");
        let keys = uncommented.lines().filter(|l| is_setting(l)).count();
        assert!(keys >= 20, "only {keys} keys uncommented");
        let mut parsed = parse(&uncommented).unwrap();
        // The paths' defaults depend on the mode; the file shows the system ones.
        assert_eq!(
            parsed.daemon.state_dir.take().unwrap(),
            Path::new("/var/lib/gevod")
        );
        assert_eq!(
            parsed.daemon.socket.take().unwrap(),
            Path::new("/run/gevod/gevod.sock")
        );
        assert_eq!(parsed, ServeConfig::default());
    }

    fn is_setting(line: &str) -> bool {
        let first = line.split('=').next().unwrap_or("").trim();
        line.contains(" = ")
            && !first.is_empty()
            && first.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            || (line.starts_with('[') && line.ends_with(']'))
    }

    #[test]
    fn errors_name_the_key() {
        for (text, expected) in [
            ("[daemon]\nwatchh = []", "unknown field `watchh`"),
            (
                "[gpu]\nidle_utilization = 120",
                "gpu.idle_utilization: 120 is not a percentage",
            ),
            (
                "[schedule]\nslice = \"0s\"",
                "schedule.slice: must be longer than 0s",
            ),
            ("[schedule]\nslice = \"ten\"", "expected a duration"),
            (
                "[gpu]\ndevices = [\"card0\"]",
                "gpu.devices: expected a device ordinal",
            ),
            ("[gpu]\nbackend = \"opencl\"", "unknown variant `opencl`"),
            ("[evolve]\nmutation_rate = 2.0", "evolve: mutation_rate"),
            ("[bogus]\n", "unknown field `bogus`"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(err.starts_with("gevod.toml"), "{err}");
        }
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("3d").is_err());
    }
}
