//! `gevod.toml`, the daemon's file: the shared tables (`[evolve]`, `[gpu]`,
//! `[workers]`, `[cluster]`) beside the keys only the daemon has (`[daemon]`, `[api]`,
//! `[schedule]`, `[jobs]`, `[harness]`). Every key is optional (an empty file
//! is valid) and documented with its default in `config/gevod.toml`.

use super::{duration, parse_toml, ClusterSection, ConfigError, GpuSection, WorkersSection};
use crate::evolve;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    pub daemon: DaemonSection,
    pub api: ApiSection,
    pub schedule: ScheduleSection,
    pub gpu: GpuSection,
    pub workers: WorkersSection,
    pub cluster: ClusterSection,
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

impl ServeConfig {
    /// Reads and validates `path`. A missing file is an error only when
    /// `required` (given on the command line); the default path may be absent.
    pub fn load(path: &Path, required: bool) -> Result<ServeConfig, ConfigError> {
        let text = match gevo_client::files::read_text_capped(path, gevo_client::files::CONFIG_CAP)
        {
            Ok(t) => t,
            Err(e) if e.is_not_found() && !required => String::new(),
            Err(e) => return Err(e.into()),
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
            d.parse::<crate::device::DeviceSelector>()
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
    use crate::config::parse_duration;

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
