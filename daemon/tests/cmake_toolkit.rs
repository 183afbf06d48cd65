//! Where gevo_optimize() finds the CUDA toolkit that MODE REPLACE and clang's
//! `--cuda-path` use (cmake/GevoToolkit.cmake): Debian's and Ubuntu's
//! nvidia-cuda-toolkit, spread over /usr, and NVIDIA's layout under one
//! root, each found without any setting; GEVO_CUDA_PATH as the override;
//! and every configure line naming the same toolkit. Runs on the
//! distribution's toolkit (scripts/install-deps.sh installs it; NVIDIA's
//! layout is made of links to its files) and says it skipped without one.

use crate::common;

use common::cmake::Project;
use common::daemon::s;
use common::have_tools;
use std::path::{Path, PathBuf};
use std::process::Command;

/// cmake's output without its line breaks and indentation.
fn flat(log: &str) -> String {
    log.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The environment variables that would point gevo at a toolkit.
const CUDA_VARIABLES: [&str; 3] = ["CUDA_PATH", "CUDA_HOME", "CUDAToolkit_ROOT"];

/// The distribution's toolkit's files, or why there are none.
struct Distribution {
    /// The top-level entries of /usr/include that nvidia-cuda-dev installs.
    headers: Vec<String>,
    cudart: PathBuf,
}

fn distribution() -> Result<Distribution, String> {
    let listed = Command::new("dpkg-query")
        .args(["-L", "nvidia-cuda-dev"])
        .output()
        .map_err(|e| format!("no dpkg-query ({e})"))?;
    if !listed.status.success() {
        return Err(
            "nvidia-cuda-dev is not installed (scripts/install-deps.sh installs it)".into(),
        );
    }
    let listed = String::from_utf8_lossy(&listed.stdout);
    let mut headers: Vec<String> = listed
        .lines()
        .filter_map(|line| line.strip_prefix("/usr/include/"))
        .map(|rest| rest.split('/').next().unwrap().to_string())
        .collect();
    headers.sort();
    headers.dedup();
    let cudart = listed
        .lines()
        .find(|line| line.ends_with("/libcudart_static.a"))
        .map(PathBuf::from)
        .ok_or("nvidia-cuda-dev has no libcudart_static.a")?;
    for needed in [
        "/usr/lib/cuda/nvvm/libdevice/libdevice.10.bc",
        "/usr/bin/ptxas",
        "/usr/bin/fatbinary",
    ] {
        if !Path::new(needed).is_file() {
            return Err(format!("{needed} is missing (nvidia-cuda-toolkit)"));
        }
    }
    Ok(Distribution { headers, cudart })
}

/// NVIDIA's layout under dir/cuda, made of links to the distribution's
/// files: bin/, include/, nvvm/libdevice and lib64/.
fn nvidia_layout(dir: &Path, dist: &Distribution) -> PathBuf {
    use std::os::unix::fs::symlink;
    let root = dir.join("cuda");
    for sub in ["bin", "include", "lib64", "nvvm"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    for tool in ["ptxas", "fatbinary"] {
        symlink(
            Path::new("/usr/bin").join(tool),
            root.join("bin").join(tool),
        )
        .unwrap();
    }
    for header in &dist.headers {
        symlink(
            Path::new("/usr/include").join(header),
            root.join("include").join(header),
        )
        .unwrap();
    }
    symlink(
        "/usr/lib/nvidia-cuda-toolkit/libdevice",
        root.join("nvvm/libdevice"),
    )
    .unwrap();
    symlink(&dist.cudart, root.join("lib64/libcudart_static.a")).unwrap();
    root
}

/// One way of finding a toolkit: the environment and options configure
/// gets, and what it must say (REPLACE on), or the reason REPLACE is off
/// (configure stops: the example without a CUDA compiler).
struct Case {
    name: &'static str,
    env: Vec<(&'static str, PathBuf)>,
    options: Vec<String>,
    said: Result<String, String>,
}

/// Configures examples/stencil-replace as a project without the CUDA
/// language (so REPLACE alone compiles its kernel), in the case's
/// environment.
fn configure(p: &Project, case: &Case) -> (bool, String) {
    let mut options = case.options.clone();
    options.push("-DCMAKE_CUDA_COMPILER=NOTFOUND".into());
    let mut command = p.configure_command(&options);
    for var in CUDA_VARIABLES {
        command.env_remove(var);
    }
    for (var, value) in &case.env {
        command.env(var, value);
    }
    let out = command.output().unwrap();
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), log)
}

#[test]
fn the_toolkit_is_found_in_the_distributions_layout_and_nvidias() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dist = match distribution() {
        Ok(dist) => dist,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let nvidia = nvidia_layout(d, &dist);
    let libdevice = "libdevice /usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc";
    let debian_parts = format!(
        "{libdevice}, headers /usr/include, ptxas /usr/bin/ptxas, fatbinary /usr/bin/fatbinary, \
         cudart {}",
        s(&dist.cudart)
    );
    let mut cases = vec![
        Case {
            name: "NVIDIA's layout, through $CUDA_HOME",
            env: vec![("CUDA_HOME", nvidia.clone())],
            options: vec![],
            said: Ok(format!(
                "found: --cuda-path {0} ($CUDA_HOME), {libdevice}, headers {0}/include, ptxas \
                 {0}/bin/ptxas, fatbinary {0}/bin/fatbinary, cudart {0}/lib64/libcudart_static.a",
                s(&nvidia)
            )),
        },
        Case {
            name: "GEVO_CUDA_PATH naming the distribution's",
            env: vec![],
            options: vec!["-DGEVO_CUDA_PATH=/usr/lib/cuda".into()],
            said: Ok(format!(
                "found: --cuda-path /usr/lib/cuda (GEVO_CUDA_PATH), {debian_parts}"
            )),
        },
        Case {
            name: "GEVO_CUDA_PATH naming /usr, where ptxas and the headers are",
            env: vec![],
            options: vec!["-DGEVO_CUDA_PATH=/usr".into()],
            said: Err(
                "MODE REPLACE is off (GEVO_CUDA_PATH /usr is not a CUDA installation clang \
                       can use: it lacks nvvm/libdevice/libdevice.10.bc (NVIDIA's toolkit is at \
                       /usr/local/cuda, Debian's and Ubuntu's at /usr/lib/cuda))"
                    .into(),
            ),
        },
    ];
    // By itself: NVIDIA's comes first where there is one.
    if Path::new("/usr/local/cuda").exists() {
        println!(
            "the distribution's toolkit found by itself: skipped, /usr/local/cuda comes first"
        );
    } else {
        cases.push(Case {
            name: "the distribution's, by itself",
            env: vec![],
            options: vec![],
            said: Ok(format!(
                "found: --cuda-path /usr/lib/cuda (Debian's and Ubuntu's place), {debian_parts}"
            )),
        });
    }

    for (i, case) in cases.iter().enumerate() {
        let p = Project::new(d, "stencil-replace", &format!("build-{i}"));
        let (ok, log) = configure(&p, case);
        let log = flat(&log);
        let name = case.name;
        match &case.said {
            Ok(said) => {
                assert!(ok, "{name}: configure failed:\n{log}");
                assert!(log.contains(said), "{name}: wanted {said}\nin:\n{log}");
                let root = said.split(' ').nth(2).unwrap();
                let replace = format!(
                    "MODE REPLACE: stencil-replace runs the chosen PTX for the kernels of \
                     kernels/stencil.cu (CUDA at {root})"
                );
                assert!(
                    log.contains(&replace),
                    "{name}: wanted {replace}\nin:\n{log}"
                );
            }
            Err(off) => {
                assert!(!ok, "{name}: configure succeeded:\n{log}");
                assert!(log.contains(off), "{name}: wanted {off}\nin:\n{log}");
                assert!(!log.contains(" found: --cuda-path"), "{name}:\n{log}");
            }
        }
    }

    // EMBED's device IR is compiled against the same installation, and
    // says so.
    let app = Project::new(d, "stencil-app", "app");
    let (ok, log) = configure(&app, &cases[0]);
    assert!(ok, "{log}");
    let wanted = format!(
        "finds a CUDA installation for sm_90 at {} ($CUDA_HOME)",
        s(&nvidia)
    );
    assert!(flat(&log).contains(&wanted), "wanted {wanted}\nin:\n{log}");
}
