//! One run of a variant's PTX on one test and nothing else: the process
//! compute-sanitizer watches for the GPU safety gate (`gevod gpu-check`,
//! started under the sanitizer by `worker::sanitize`). Outputs are not
//! compared here: the variant's measurement already did that; the
//! sanitizer's report is the verdict.

use super::device_test::StagedTest;
use super::driver::{Context, Event, Kernel};
use super::pace::Pacer;
use super::CudaError;
use gevo_model::spec::{Spec, SpecError};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error("the spec has no test {0}")]
    NoTest(String),
}

/// Loads `ptx`, uploads `test`'s inputs and runs the kernel's launches once
/// on device `ordinal`, waiting at most `limit`.
pub fn run_once(
    spec: &Spec,
    test: &str,
    ptx: &str,
    kernel_names: &[String],
    ordinal: usize,
    limit: Duration,
) -> Result<(), CheckError> {
    let case = spec
        .tests(gevo_model::spec::TestSet::All)
        .into_iter()
        .find(|t| t.name == test)
        .ok_or_else(|| CheckError::NoTest(test.to_string()))?;
    let _context = Context::new(ordinal)?;
    let kernel = Kernel::load(ptx, kernel_names)?;
    let test = StagedTest::upload(&case.name, spec.instantiate(case)?)?;
    let pacer = Pacer::new()?;
    pacer.begin(limit);
    test.launch_all(&kernel, &pacer)?;
    let done = Event::new()?;
    done.record()?;
    pacer.wait(&done)?;
    Ok(())
}
