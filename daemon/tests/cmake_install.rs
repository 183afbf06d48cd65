//! scripts/install.sh into a temporary prefix, from the binaries this test
//! run built (--bin-dir), then a project that finds gevo with nothing but
//! CMAKE_PREFIX_PATH=<prefix> (or <prefix>/bin on the PATH): the installed
//! package, its gevod and gevo-client, and a build with them.

use crate::common;

use common::cmake::{copy_dir, run, text, Project};
use common::daemon::{client_binary, s};
use common::have_tools;
use std::path::{Path, PathBuf};
use std::process::Command;

fn install(prefix: &Path, bin_dir: &Path) -> std::process::Output {
    Command::new(common::repo_root().join("scripts/install.sh"))
        .arg("--prefix")
        .arg(prefix)
        .arg("--bin-dir")
        .arg(bin_dir)
        .output()
        .unwrap()
}

/// The value of a cache entry (`NAME:TYPE=value`).
fn cache_value(build: &Path, name: &str) -> String {
    let cache = std::fs::read_to_string(build.join("CMakeCache.txt")).unwrap();
    cache
        .lines()
        .find_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key.split(':').next() == Some(name)).then(|| value.to_string())
        })
        .unwrap_or_else(|| panic!("no {name} in the cache"))
}

/// stencil-app as a project outside the gevo tree: find_package(gevo)
/// without the example's hint into the repository.
fn outside_project(dir: &Path, build: &str) -> Project {
    let source = dir.join("myapp");
    if !source.exists() {
        copy_dir(&common::repo_root().join("examples/stencil-app"), &source);
        let lists = source.join("CMakeLists.txt");
        let text = std::fs::read_to_string(&lists).unwrap();
        let hinted =
            "find_package(gevo 0.1 REQUIRED HINTS \"${CMAKE_CURRENT_LIST_DIR}/../../cmake\")";
        assert!(text.contains(hinted), "{text}");
        std::fs::write(
            &lists,
            text.replace(hinted, "find_package(gevo 0.1 REQUIRED)"),
        )
        .unwrap();
    }
    let mut p = Project::new(dir, "stencil-app", build);
    p.source = source;
    p
}

#[test]
fn installed_gevo_is_found_with_only_the_prefix() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("prefix");
    let bin_dir = client_binary().parent().unwrap().to_path_buf();
    assert!(bin_dir.join("gevod").is_file());

    let out = install(&prefix, &bin_dir);
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(out.status.success(), "{said}");
    let package = prefix.join("lib/cmake/gevo");
    assert!(
        said.contains(&format!(
            "installed gevod and gevo-client in {}/bin",
            s(&prefix)
        )),
        "{said}"
    );
    for file in [
        "bin/gevod",
        "bin/gevo-client",
        "lib/cmake/gevo/gevoConfig.cmake",
        "lib/cmake/gevo/gevoConfigVersion.cmake",
        "lib/cmake/gevo/GevoOptimize.cmake",
        "lib/cmake/gevo/GevoBuildStep.cmake",
        "lib/cmake/gevo/gevo_cuda_shim.h",
        "lib/cmake/gevo/cuda-compat/texture_fetch_functions.h",
    ] {
        assert!(prefix.join(file).is_file(), "{file} is not installed");
    }
    let installed_gevod = prefix.join("bin/gevod");
    let version = run(Command::new(&installed_gevod).arg("--version"));
    assert!(version.starts_with("gevod "), "{version}");

    // Only CMAKE_PREFIX_PATH: the package, and the binaries beside it.
    let p = outside_project(dir.path(), "build");
    let log = run(&mut p.bare_configure(&[format!("-DCMAKE_PREFIX_PATH={}", s(&prefix))]));
    assert_eq!(
        PathBuf::from(cache_value(&p.build, "gevo_DIR")),
        package,
        "{log}"
    );
    assert_eq!(
        PathBuf::from(cache_value(&p.build, "GEVOD")),
        installed_gevod
    );
    assert_eq!(
        PathBuf::from(cache_value(&p.build, "GEVO_CLIENT")),
        prefix.join("bin/gevo-client")
    );
    let log = p.build();
    assert!(log.contains("gevo: original PTX of stencil"), "{log}");
    assert!(
        log.contains("using the original PTX: gevod unreachable and no export"),
        "{log}"
    );
    let ptx = Command::new(&installed_gevod)
        .args(["ptx", s(&p.gevo_file("stencil.ll")), "--arch", "sm_90"])
        .output()
        .unwrap();
    assert!(ptx.status.success(), "{ptx:?}");
    assert_eq!(p.app("--print-ptx"), text(&ptx.stdout));
    assert_eq!(p.app("--origin"), "original\n");

    // Or the prefix's bin/ on the PATH, as with ~/.local/bin.
    let q = outside_project(dir.path(), "on-path");
    let path = format!(
        "{}:{}",
        s(&prefix.join("bin")),
        std::env::var("PATH").unwrap()
    );
    run(q.bare_configure(&[]).env("PATH", &path));
    assert_eq!(PathBuf::from(cache_value(&q.build, "gevo_DIR")), package);
    assert_eq!(
        PathBuf::from(cache_value(&q.build, "GEVOD")),
        installed_gevod
    );

    // Installing again replaces the package whole.
    std::fs::write(package.join("Stale.cmake"), "").unwrap();
    let out = install(&prefix, &bin_dir);
    assert!(out.status.success(), "{out:?}");
    assert!(!package.join("Stale.cmake").exists());
    assert!(package.join("gevoConfig.cmake").is_file());

    // Relative paths are the caller's.
    let out = Command::new(common::repo_root().join("scripts/install.sh"))
        .args(["--prefix", "relative", "--bin-dir"])
        .arg(&bin_dir)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(dir.path().join("relative/bin/gevod").is_file());
    assert!(dir
        .path()
        .join("relative/lib/cmake/gevo/gevoConfig.cmake")
        .is_file());

    // Binaries that are not there: nothing is installed, and it says why.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = install(&dir.path().join("other"), &empty);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&format!("{}/gevod is missing", s(&empty))),
        "{out:?}"
    );
    assert!(!dir.path().join("other").exists());
}
