#![allow(dead_code)]
//! A single-node Slurm cluster for a test or a benchmark:
//! scripts/slurm-cluster.sh started in a temp dir, stopped on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Cluster {
    dir: tempfile::TempDir,
    script: PathBuf,
}

impl Cluster {
    /// Starts the cluster; `Err` says why it could not (tools missing, a
    /// daemon that would not start), for the caller's skip message.
    pub fn start(repo_root: &Path) -> Result<Cluster, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let script = repo_root.join("scripts/slurm-cluster.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg(dir.path())
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        let cluster = Cluster { dir, script };
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(cluster)
    }

    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    /// A Slurm command (`squeue`, `scancel`, `salloc`) against this cluster.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", self.conf());
        c
    }

    /// Runs a Slurm command and returns its output.
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        self.command(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    /// Job steps running now, as `JOB.STEP`.
    pub fn steps(&self) -> Vec<String> {
        let out = self.run("squeue", &["-h", "-s", "-o", "%i"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.ends_with(".extern") && !l.ends_with(".interactive"))
            .map(String::from)
            .collect()
    }

    /// Jobs (allocations) known to the controller.
    pub fn jobs(&self) -> Vec<String> {
        let out = self.run("squeue", &["-h", "-o", "%i"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .arg("stop")
            .arg(self.dir.path())
            .output();
    }
}
