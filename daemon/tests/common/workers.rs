//! Worker processes for tests: pools of the real `gevod eval-worker`, and
//! the GPU a stand-in GPU worker claims to be.

use gevo_model::device::DeviceInfo;
use gevod::worker::pool::PoolOptions;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

/// `workers` `gevod eval-worker` processes on the spec at `spec`, with a
/// minute for each request and for the start.
pub fn eval_workers(spec: &Path, workers: usize) -> PoolOptions {
    PoolOptions::local(
        env!("CARGO_BIN_EXE_gevod").into(),
        vec!["eval-worker".into(), spec.into()],
        workers,
        Duration::from_secs(60),
        Duration::from_secs(60),
    )
}

/// `count` stand-in GPU workers (tests/fixtures/fake/gpu-worker.sh) on
/// devices GPU-0, GPU-1, ..., each with `env` and a minute for each
/// request and for the start.
pub fn fake_gpus(count: usize, env: Vec<(OsString, OsString)>) -> PoolOptions {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/fake/gpu-worker.sh");
    PoolOptions {
        env,
        slot_args: (0..count)
            .map(|i| vec!["--device".into(), format!("GPU-{i}").into()])
            .collect(),
        ..PoolOptions::local(
            script,
            Vec::new(),
            count,
            Duration::from_secs(60),
            Duration::from_secs(60),
        )
    }
}

/// The device tests/fixtures/fake/gpu-worker.sh stands in for.
pub fn fake_device() -> DeviceInfo {
    DeviceInfo {
        ordinal: 0,
        uuid: "GPU-00000000-0000-0000-0000-000000000000".into(),
        name: "Fake GPU".into(),
        compute_capability: (9, 0),
        driver_version: "13.0".into(),
        l2_bytes: 1 << 20,
    }
}
