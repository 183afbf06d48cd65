//! `gevod sim-launch`: one kernel launch of a harness program, run on the
//! simulator. `gevo_harness.h` writes a launch file and each buffer's bytes
//! to files, runs `$GEVO_SIMULATOR sim-launch --ir $GEVO_IR --kernel K
//! --launch FILE --result FILE`, and reads the buffers back.
//!
//! The launch file, one item per line, arguments in the kernel's order:
//!
//! ```text
//! gevo-launch 1
//! grid 4 4 1
//! block 16 16 1
//! shared 0
//! buffer /tmp/x/arg0.bin
//! value 40000000
//! ```
//!
//! A `buffer` argument points at the start of that file's bytes (which are
//! written back after the launch); a `value` is the parameter's bytes in hex,
//! little-endian. The result file gets `cost <n>` and `steps <n>`.

use gevo_ir::{IrError, KernelIr};
use gevo_model::sim::{self, pointer, GlobalMemory, LaunchDims, Limits, RunStats, Verdict};
use std::path::{Path, PathBuf};

/// The launch file's first line.
pub const LAUNCH_HEADER: &str = "gevo-launch 1";

#[derive(Debug, Clone, PartialEq)]
pub enum LaunchArg {
    Buffer(PathBuf),
    /// Raw bytes, little-endian (at most 8).
    Value(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct LaunchFile {
    pub dims: LaunchDims,
    pub args: Vec<LaunchArg>,
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{}:{line}: {message}", file.display())]
    Parse {
        file: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}: {message}", file.display())]
    Io { file: PathBuf, message: String },
    #[error(transparent)]
    Ir(#[from] IrError),
    #[error("kernel {kernel}: {message}")]
    Arguments { kernel: String, message: String },
    /// The kernel failed on the simulator (out of bounds, race, ...).
    #[error("the kernel failed on the simulator: {0}")]
    Verdict(Box<Verdict>),
}

fn io(file: &Path, e: std::io::Error) -> LaunchError {
    LaunchError::Io {
        file: file.to_path_buf(),
        message: e.to_string(),
    }
}

/// Parses a launch file's text (`file` names it in errors).
pub fn parse(file: &Path, text: &str) -> Result<LaunchFile, LaunchError> {
    let err = |line: usize, message: String| LaunchError::Parse {
        file: file.to_path_buf(),
        line,
        message,
    };
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim()));
    match lines.next() {
        Some((_, LAUNCH_HEADER)) => {}
        other => {
            return Err(err(
                1,
                format!(
                    "expected `{LAUNCH_HEADER}`, found {:?}",
                    other.map_or("", |(_, l)| l)
                ),
            ))
        }
    }
    let mut grid = None;
    let mut block = None;
    let mut shared = 0u64;
    let mut args = Vec::new();
    for (n, line) in lines {
        if line.is_empty() {
            continue;
        }
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        let rest = rest.trim();
        let dims = |rest: &str| -> Result<[u32; 3], LaunchError> {
            let v: Vec<u32> = rest
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|_| {
                    err(
                        n,
                        format!("{key}: expected three positive integers, found {rest:?}"),
                    )
                })?;
            match v.as_slice() {
                &[x, y, z] if x > 0 && y > 0 && z > 0 => Ok([x, y, z]),
                _ => Err(err(
                    n,
                    format!("{key}: expected three positive integers, found {rest:?}"),
                )),
            }
        };
        match key {
            "grid" => grid = Some(dims(rest)?),
            "block" => block = Some(dims(rest)?),
            "shared" => {
                shared = rest
                    .parse()
                    .map_err(|_| err(n, format!("shared: expected a byte count, found {rest:?}")))?
            }
            "buffer" if !rest.is_empty() => args.push(LaunchArg::Buffer(PathBuf::from(rest))),
            "value" => {
                let bytes = decode_hex(rest)
                    .filter(|b| !b.is_empty() && b.len() <= 8)
                    .ok_or_else(|| {
                        err(
                            n,
                            format!("value: expected 1 to 8 bytes in hex, found {rest:?}"),
                        )
                    })?;
                args.push(LaunchArg::Value(bytes));
            }
            _ => {
                return Err(err(
                    n,
                    format!("unknown line {line:?}; expected grid, block, shared, buffer or value"),
                ))
            }
        }
    }
    let (Some(grid), Some(block)) = (grid, block) else {
        return Err(err(1, "missing `grid` or `block`".into()));
    };
    Ok(LaunchFile {
        dims: LaunchDims {
            grid,
            block,
            dynamic_shared_bytes: shared,
        },
        args,
    })
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Runs the launch on the simulator, writes the buffers back to their files
/// and returns the run's stats.
pub fn run_launch(
    ir_path: &Path,
    kernel: Option<&str>,
    launch_path: &Path,
    workers: usize,
) -> Result<RunStats, LaunchError> {
    let text = std::fs::read_to_string(launch_path).map_err(|e| io(launch_path, e))?;
    let launch = parse(launch_path, &text)?;
    let ir = KernelIr::load(ir_path, kernel)?;
    let program = ir.lower(&ir.empty_patch())?;
    let arguments = |message: String| LaunchError::Arguments {
        kernel: program.kernel.clone(),
        message,
    };
    if launch.args.len() != program.params.len() {
        return Err(arguments(format!(
            "the launch passes {} arguments; the kernel takes {}",
            launch.args.len(),
            program.params.len()
        )));
    }
    let mut contents = Vec::new();
    let mut buffer_files = Vec::new();
    for (i, (arg, param)) in launch.args.iter().zip(&program.params).enumerate() {
        match (arg, param.is_pointer) {
            (LaunchArg::Buffer(path), true) => {
                contents.push(std::fs::read(path).map_err(|e| io(path, e))?);
                buffer_files.push(path.clone());
            }
            (LaunchArg::Value(bytes), false) if bytes.len() * 8 == param.bits as usize => {}
            (LaunchArg::Value(bytes), false) => {
                return Err(arguments(format!(
                    "argument {i} has {} bytes; the parameter has {} bits",
                    bytes.len(),
                    param.bits
                )))
            }
            (_, pointer) => {
                return Err(arguments(format!(
                    "argument {i}: the parameter is {}",
                    if pointer {
                        "a pointer: pass a buffer"
                    } else {
                        "not a pointer: pass a value"
                    }
                )))
            }
        }
    }
    let slices: Vec<&[u8]> = contents.iter().map(Vec::as_slice).collect();
    let memory = GlobalMemory::new(&slices);
    let mut next_buffer = 0u64;
    let raw: Vec<u64> = launch
        .args
        .iter()
        .map(|a| match a {
            LaunchArg::Buffer(_) => {
                next_buffer += 1;
                pointer::make(pointer::GLOBAL, next_buffer - 1, 0)
            }
            LaunchArg::Value(bytes) => {
                let mut word = [0u8; 8];
                word[..bytes.len()].copy_from_slice(bytes);
                u64::from_le_bytes(word)
            }
        })
        .collect();
    let limits = Limits {
        block_step_budget: u64::MAX,
    };
    let stats = sim::run(&program, &launch.dims, &raw, &memory, limits, workers)
        .map_err(|v| LaunchError::Verdict(Box::new(v)))?;
    for (i, path) in buffer_files.iter().enumerate() {
        std::fs::write(path, memory.contents(i)).map_err(|e| io(path, e))?;
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_format() {
        let text = "gevo-launch 1\ngrid 4 2 1\nblock 16 16 1\nshared 128\n\nbuffer /tmp/a.bin\nvalue 40000000\nvalue 0a00\n";
        let l = parse(Path::new("l.txt"), text).unwrap();
        assert_eq!(l.dims.grid, [4, 2, 1]);
        assert_eq!(l.dims.block, [16, 16, 1]);
        assert_eq!(l.dims.dynamic_shared_bytes, 128);
        assert_eq!(
            l.args,
            [
                LaunchArg::Buffer("/tmp/a.bin".into()),
                LaunchArg::Value(vec![0x40, 0, 0, 0]),
                LaunchArg::Value(vec![0x0a, 0]),
            ]
        );
    }

    /// Each broken line is named with its number and what was expected.
    #[test]
    fn broken_launch_files_name_the_line() {
        let cases = [
            ("grid 1 1 1\n", ":1: expected `gevo-launch 1`"),
            (
                "gevo-launch 1\ngrid 1 1\nblock 1 1 1\n",
                ":2: grid: expected three positive integers",
            ),
            (
                "gevo-launch 1\ngrid 1 1 1\nblock 0 1 1\n",
                ":3: block: expected three",
            ),
            (
                "gevo-launch 1\ngrid 1 1 1\nblock 1 1 1\nvalue 123\n",
                ":4: value: expected 1 to 8 bytes",
            ),
            (
                "gevo-launch 1\ngrid 1 1 1\nblock 1 1 1\npointer 5\n",
                ":4: unknown line",
            ),
            ("gevo-launch 1\nblock 1 1 1\n", "missing `grid`"),
        ];
        for (text, want) in cases {
            let e = parse(Path::new("l.txt"), text).unwrap_err().to_string();
            assert!(e.starts_with("l.txt:") && e.contains(want), "{text:?}: {e}");
        }
    }
}
