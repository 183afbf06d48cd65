//! `gevod.toml`, the daemon's file: the shared tables (`[evolve]`, `[gpu]`,
//! `[workers]`, `[cluster]`) beside the keys only the daemon has (`[daemon]`, `[api]`,
//! `[schedule]`, `[jobs]`, `[harness]`). Every key is optional (an empty file
//! is valid) and documented with its default in `config/gevod.toml`.

use super::{
    duration, parse_toml, ranges, ClusterSection, ConfigError, GpuSection, WorkersSection,
};
use gevo_model::ranges::Invalid;
use gevo_search::evolve;
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
    /// Exports and job snapshots readable by the daemon's user and group
    /// only (0640 in 0750 directories; the state directory itself 0750),
    /// not by everyone.
    pub private: bool,
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
            private: false,
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
    /// A job that found something (a lower train cost, its best validated
    /// variant) within `recent_generations` gets this many times the share
    /// of one that did not.
    pub improved_weight: f64,
    pub recent_generations: u64,
    /// A job that found nothing for this many generations gets half the
    /// share of one that did, a quarter after twice as many, and so on
    /// down to `stalled_floor`; 0: never reduced (`sched::share`).
    pub stalled_generations: u64,
    pub stalled_floor: f64,
}

impl Default for ScheduleSection {
    fn default() -> Self {
        ScheduleSection {
            slice: Duration::from_secs(60),
            improved_weight: 4.0,
            recent_generations: 10,
            stalled_generations: 50,
            stalled_floor: 0.25,
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
    /// The daemon measures the edit contributions of each job's best
    /// validated variant on the simulator, in its explainer thread
    /// (`serve::explain`), as `gevod explain-edits` does.
    pub explain_edits: bool,
}

impl Default for JobsSection {
    fn default() -> Self {
        JobsSection {
            seed: 1,
            max_generations: 0,
            explain_edits: true,
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
        self.check_ranges()
            .map_err(|e| ConfigError::invalid(path, e))?;
        for d in &self.gpu.devices {
            d.parse::<gevo_model::device::DeviceSelector>()
                .map_err(|m| ConfigError::invalid(path, Invalid::new("gpu.devices", m)))?;
        }
        Ok(())
    }

    /// Every numeric key against its documented range (`config::ranges`).
    fn check_ranges(&self) -> Result<(), Invalid> {
        let (daemon, schedule, gpu) = (&self.daemon, &self.schedule, &self.gpu);
        ranges::SCAN_INTERVAL.check(daemon.scan_interval)?;
        ranges::SETTLE.check(daemon.settle)?;
        ranges::DEBOUNCE.check(daemon.debounce)?;
        ranges::SLICE.check(schedule.slice)?;
        ranges::IMPROVED_WEIGHT.check(schedule.improved_weight)?;
        ranges::RECENT_GENERATIONS.check(schedule.recent_generations)?;
        ranges::STALLED_GENERATIONS.check(schedule.stalled_generations)?;
        ranges::STALLED_FLOOR.check(schedule.stalled_floor)?;
        ranges::DEVICES_PER_JOB.check(gpu.devices_per_job)?;
        ranges::IDLE_UTILIZATION.check(gpu.idle_utilization)?;
        ranges::IDLE_GRACE.check(gpu.idle_grace)?;
        ranges::POLL_INTERVAL.check(gpu.poll_interval)?;
        ranges::WORKER_COUNT.check(self.workers.count)?;
        ranges::WORKER_TIMEOUT.check(self.workers.timeout)?;
        self.cluster.validate()?;
        self.evolve.validate()
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
                "gpu.idle_utilization: 120 is out of range (0 to 100)",
            ),
            (
                "[schedule]\nslice = \"0s\"",
                "schedule.slice: 0s is out of range (100ms to 24h)",
            ),
            (
                "[evolve]\npopulation = 1000000000",
                "evolve.population: 1000000000 is out of range (4 to 65536)",
            ),
            (
                "[workers]\ncount = 100000",
                "workers.count: 100000 is out of range (0 to 1024)",
            ),
            (
                "[workers]\ntimeout = \"99999999999999999999h\"",
                "\"99999999999999999999h\" is not a duration",
            ),
            (
                "[schedule]\nimproved_weight = nan",
                "schedule.improved_weight: nan is out of range (1 to 1000)",
            ),
            (
                "[schedule]\nstalled_floor = 0",
                "schedule.stalled_floor: 0 is out of range (0.01 to 1)",
            ),
            (
                "[schedule]\nstalled_generations = 2000000",
                "schedule.stalled_generations: 2000000 is out of range (0 to 1000000)",
            ),
            (
                "[cluster]\ngpu_steps = 0",
                "cluster.gpu_steps: 0 is out of range (1 to 1024)",
            ),
            (
                "[gpu]\npoll_interval = \"10ms\"",
                "gpu.poll_interval: 10ms is out of range (100ms to 10m)",
            ),
            ("[schedule]\nslice = \"ten\"", "expected a duration"),
            (
                "[gpu]\ndevices = [\"card0\"]",
                "gpu.devices: expected a device ordinal",
            ),
            ("[gpu]\nbackend = \"opencl\"", "unknown variant `opencl`"),
            (
                "[gpu]\nprescreen = \"largest\"",
                "invalid value: string \"largest\", expected gpu.prescreen: \"all\", \"smallest\", \"off\", true or false",
            ),
            ("[gpu]\nprescreen = 1", "integer `1`, expected gpu.prescreen:"),
            (
                "[evolve]\nmutation_rate = 2.0",
                "evolve.mutation_rate: 2 is out of range (0 to 1)",
            ),
            ("[bogus]\n", "unknown field `bogus`"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(err.starts_with("gevod.toml"), "{err}");
        }
    }

    #[test]
    fn prescreen_takes_a_placement_or_a_switch() {
        use crate::config::Prescreen;
        for (value, placement) in [
            ("\"all\"", Prescreen::All),
            ("\"smallest\"", Prescreen::Smallest),
            ("\"off\"", Prescreen::Off),
            // The key's values before it had placements.
            ("true", Prescreen::All),
            ("false", Prescreen::Off),
        ] {
            let config = parse(&format!("[gpu]\nprescreen = {value}")).unwrap();
            assert_eq!(config.gpu.prescreen, placement, "{value}");
        }
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("-1s").is_err());
        assert!(
            parse_duration("99999999999999999999h").is_err(),
            "too large: an error, not a panic"
        );
        assert!(parse_duration("3d").is_err());
    }
}
