//! The range of every numeric key of the shared tables and the daemon's
//! own, checked when a file is loaded (`gevod serve` at start and on
//! reload, `gevod --check-config`, `gevod evolve --config`) and, for the
//! keys `gevod evolve` takes as flags, on its command line. Each is
//! documented beside its key in config/gevod.toml (a test below holds them
//! to it); the search's own are in [`gevo_search::evolve::ranges`].

use gevo_model::ranges::SettingRange;
use std::time::Duration;

type Every = SettingRange<Duration>;

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
const fn s(n: u64) -> Duration {
    Duration::from_secs(n)
}
const DAY: Duration = s(86_400);

pub const SCAN_INTERVAL: Every = Every::new("daemon.scan_interval", s(1), DAY);
pub const SETTLE: Every = Every::new("daemon.settle", s(0), s(3600));
pub const DEBOUNCE: Every = Every::new("daemon.debounce", s(0), s(600));
pub const SLICE: Every = Every::new("schedule.slice", ms(100), DAY);
pub const IMPROVED_WEIGHT: SettingRange<f64> =
    SettingRange::new("schedule.improved_weight", 1.0, 1000.0);
pub const RECENT_GENERATIONS: SettingRange<u64> =
    SettingRange::new("schedule.recent_generations", 0, 1_000_000);
pub const STALLED_GENERATIONS: SettingRange<u64> =
    SettingRange::new("schedule.stalled_generations", 0, 1_000_000);
/// Above 0: a stalled job still gets some of the slots.
pub const STALLED_FLOOR: SettingRange<f64> = SettingRange::new("schedule.stalled_floor", 0.01, 1.0);
pub const DEVICES_PER_JOB: SettingRange<usize> = SettingRange::new("gpu.devices_per_job", 1, 64);
pub const IDLE_UTILIZATION: SettingRange<u32> = SettingRange::new("gpu.idle_utilization", 0, 100);
pub const IDLE_GRACE: Every = Every::new("gpu.idle_grace", s(0), DAY);
pub const POLL_INTERVAL: Every = Every::new("gpu.poll_interval", ms(100), s(600));
/// 0: one per core. Each is a process of its own, and a job's batch is
/// spread over them: beyond a thousand the machine spends its time forking.
pub const WORKER_COUNT: SettingRange<usize> = SettingRange::new("workers.count", 0, 1024);
/// `gevod evolve --workers`: as `[workers] count`, without the 0.
pub const WORKERS_FLAG: SettingRange<usize> = SettingRange::new("--workers", 1, 1024);
pub const WORKER_TIMEOUT: Every = Every::new("workers.timeout", s(1), DAY);
pub const GPU_STEPS: SettingRange<usize> = SettingRange::new("cluster.gpu_steps", 1, 1024);

/// Each range's key and text (`1s to 24h`), for the documentation's test.
pub fn documented() -> Vec<(&'static str, String)> {
    let durations = [
        SCAN_INTERVAL,
        SETTLE,
        DEBOUNCE,
        SLICE,
        IDLE_GRACE,
        POLL_INTERVAL,
        WORKER_TIMEOUT,
    ];
    let mut all: Vec<(&'static str, String)> =
        durations.iter().map(|r| (r.key, r.text())).collect();
    for r in [DEVICES_PER_JOB, WORKER_COUNT, GPU_STEPS] {
        all.push((r.key, r.text()));
    }
    all.push((IMPROVED_WEIGHT.key, IMPROVED_WEIGHT.text()));
    all.push((RECENT_GENERATIONS.key, RECENT_GENERATIONS.text()));
    all.push((STALLED_GENERATIONS.key, STALLED_GENERATIONS.text()));
    all.push((STALLED_FLOOR.key, STALLED_FLOOR.text()));
    all.push((IDLE_UTILIZATION.key, IDLE_UTILIZATION.text()));
    all.extend(gevo_search::evolve::ranges::documented());
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The setting line `# name = default  # range` of `section`'s `name`
    /// in config/gevod.toml.
    fn setting_line<'t>(text: &'t str, key: &str) -> Option<&'t str> {
        let (section, name) = key.split_once('.').expect("a dotted key");
        let mut current = "";
        for line in text.lines() {
            if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                current = s;
            } else if current == section && line.starts_with(&format!("# {name} = ")) {
                return Some(line);
            }
        }
        None
    }

    #[test]
    fn every_range_is_documented_beside_its_key() {
        let config = include_str!("../../../config/gevod.toml");
        let evolve_doc = include_str!("../../../docs/evolve.md");
        for (key, range) in documented() {
            let line = setting_line(config, key)
                .unwrap_or_else(|| panic!("config/gevod.toml does not show {key}"));
            assert!(
                line.ends_with(&format!("# {range}")) || line.contains(&format!("# {range} ")),
                "config/gevod.toml: {key} should say its range {range:?}: {line}"
            );
            if let Some(name) = key.strip_prefix("evolve.") {
                let row = evolve_doc
                    .lines()
                    .find(|l| l.starts_with(&format!("| `{name}` |")))
                    .unwrap_or_else(|| panic!("docs/evolve.md has no row for {name}"));
                assert!(
                    row.contains(&format!("| {range} |")),
                    "docs/evolve.md: {name} should say its range {range:?}: {row}"
                );
            }
        }
    }
}
