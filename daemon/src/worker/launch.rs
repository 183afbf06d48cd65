//! Where worker processes run: on this host, or as Slurm job steps inside
//! the allocation the engine runs in. A step speaks the same protocol over
//! its stdio as a local worker (`srun` forwards stdin and stdout), so the
//! pool differs only in how it starts a worker, how it stops one, and what
//! it makes of a worker that disappears mid-request: a local process only
//! dies of its variant, a step may die with its node.

use crate::config::{ClusterSection, LauncherKind};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How the pool starts its workers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "launcher", rename_all = "snake_case", deny_unknown_fields)]
pub enum Launcher {
    /// Child processes of the engine.
    #[default]
    Local,
    /// One `srun` job step per worker, in the allocation of the engine's
    /// environment (`SLURM_JOB_ID`, from `salloc` or `sbatch`).
    Slurm(SlurmLaunch),
}

/// The `srun` that starts each worker step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmLaunch {
    /// The `srun` program (found on the PATH when bare).
    #[serde(default = "default_srun")]
    pub srun: PathBuf,
    /// Extra arguments for every step, e.g. `--partition=gpu`.
    #[serde(default)]
    pub args: Vec<String>,
    /// GPU workers of the GPU backend, each a step with one GPU.
    #[serde(default = "one")]
    pub gpu_steps: usize,
}

fn one() -> usize {
    1
}

fn default_srun() -> PathBuf {
    PathBuf::from("srun")
}

impl Default for SlurmLaunch {
    fn default() -> Self {
        SlurmLaunch {
            srun: default_srun(),
            args: Vec::new(),
            gpu_steps: 1,
        }
    }
}

impl From<&ClusterSection> for Launcher {
    /// The launcher a `[cluster]` table describes.
    fn from(cluster: &ClusterSection) -> Launcher {
        match cluster.launcher {
            LauncherKind::Local => Launcher::Local,
            LauncherKind::Slurm => Launcher::Slurm(SlurmLaunch {
                srun: cluster.srun.clone(),
                args: cluster.srun_args.clone(),
                gpu_steps: cluster.gpu_steps,
            }),
        }
    }
}

/// Requests are retried this many times on another worker when theirs
/// was a Slurm step that disappeared: the first loss is the node's, a
/// second one on another step is the variant's.
pub const LOST_STEP_RETRIES: u32 = 1;

/// Requests in flight per Slurm step ([`Launcher::pipeline_depth`]).
pub const SLURM_PIPELINE_DEPTH: usize = 16;

impl Launcher {
    /// The command that starts `program args` as one worker; `gpu`: the
    /// worker needs a GPU of its own (a Slurm step asks for one with
    /// `--gres=gpu:1`, and sees it as device 0; any other step asks for
    /// none).
    pub fn command(&self, program: &Path, args: &[OsString], gpu: bool) -> Command {
        match self {
            Launcher::Local => {
                let mut command = Command::new(program);
                command.args(args);
                command
            }
            Launcher::Slurm(slurm) => {
                let mut command = Command::new(&slurm.srun);
                // One task on one node, sharing the allocation's CPUs with
                // the other steps (`--exact`); stdin to the task; the step
                // ends when its task does.
                command.args([
                    "--ntasks=1",
                    "--nodes=1",
                    "--exact",
                    "--quiet",
                    "--input=all",
                    "--kill-on-bad-exit=1",
                ]);
                // A step asks for its GPUs either way: one without a
                // `--gres` of its own takes all of the allocation's, and a
                // compile worker so holding the GPU kept the GPU worker's
                // step waiting ("Requested nodes are busy") for ever.
                command.arg(if gpu { "--gres=gpu:1" } else { "--gres=none" });
                command.args(&slurm.args).arg(program).args(args);
                command
            }
        }
    }

    /// Requests in flight per worker. A step's stdio goes through srun and
    /// slurmstepd over TCP, which adds about 45 ms to a line over 1 KiB
    /// (measured: Slurm 22.05); with several requests queued at the worker,
    /// it computes the next while the last answer travels.
    pub fn pipeline_depth(&self) -> usize {
        match self {
            Launcher::Local => 1,
            Launcher::Slurm(_) => SLURM_PIPELINE_DEPTH,
        }
    }

    /// Requests taken ahead of need (the next batch's compiles and
    /// measurements) that each worker may hold: enough that one is under way
    /// while the last answer travels back, so a step never idles for a round
    /// trip, and no more, so they never queue ahead of the batch's own work.
    pub fn ahead_per_worker(&self) -> usize {
        match self {
            Launcher::Local => 1,
            Launcher::Slurm(_) => 2,
        }
    }

    /// How often a request whose worker vanished is tried again elsewhere.
    pub fn retries_after_loss(&self) -> u32 {
        match self {
            Launcher::Local => 0,
            Launcher::Slurm(_) => LOST_STEP_RETRIES,
        }
    }

    /// Whether a worker that cannot be replaced leaves the pool (the rest
    /// go on) instead of stopping the search: a step may fail to start
    /// because its node is gone; a local process fails to start only when
    /// something is broken for every worker.
    pub fn tolerates_lost_workers(&self) -> bool {
        matches!(self, Launcher::Slurm(_))
    }

    /// The device a GPU worker is told to use: its own UUID locally; under
    /// Slurm, the step's one visible GPU.
    pub fn gpu_device_arg(&self, uuid: &str) -> String {
        match self {
            Launcher::Local => uuid.to_string(),
            Launcher::Slurm(_) => "0".to_string(),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Launcher::Local => "local",
            Launcher::Slurm(_) => "slurm",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(c: &Command) -> Vec<String> {
        std::iter::once(c.get_program())
            .chain(c.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn commands_per_launcher() {
        let args: Vec<OsString> = vec!["eval-worker".into(), "k.gevo.toml".into()];
        let local = Launcher::Local.command(Path::new("/bin/gevod"), &args, false);
        assert_eq!(argv(&local), ["/bin/gevod", "eval-worker", "k.gevo.toml"]);
        let slurm = Launcher::Slurm(SlurmLaunch {
            srun: "/usr/bin/srun".into(),
            args: vec!["--partition=gpu".into()],
            gpu_steps: 1,
        });
        let step = argv(&slurm.command(Path::new("/bin/gevod"), &args, true));
        assert_eq!(step[0], "/usr/bin/srun");
        assert!(step.contains(&"--gres=gpu:1".to_string()));
        let at = step.iter().position(|a| a == "--partition=gpu").unwrap();
        assert_eq!(
            &step[at + 1..],
            ["/bin/gevod", "eval-worker", "k.gevo.toml"]
        );
        let compile_step = argv(&slurm.command(Path::new("/bin/gevod"), &args, false));
        assert!(compile_step.contains(&"--gres=none".to_string()));
        assert!(!compile_step.contains(&"--gres=gpu:1".to_string()));
    }
}
