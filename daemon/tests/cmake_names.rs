//! Which daemon a CMake build talks to and under which name
//! (docs/cmake.md, "Kernel names" and "Which daemon"): two build
//! directories of one project are two kernels to one daemon; GEVO_PROJECT
//! names them; GEVO_SOCKET (from the environment at the first configure,
//! then the cache) names the daemon; without it the client's search, and
//! every place it looked is in the log when nothing answers.

use crate::common;

use common::cmake::{run, Project};
use common::daemon::{client_binary, s, Daemon};
use common::have_tools;
use gevo_client::paths::SYSTEM_SOCKET;
use gevo_client::proto::JobState;

fn flat(log: &str) -> String {
    log.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn assert_said(log: &str, wanted: &str) {
    assert!(flat(log).contains(wanted), "wanted: {wanted}\nin:\n{log}");
}

/// gevo's tools without a daemon's place.
fn tools() -> Vec<String> {
    vec![
        format!("-Dgevo_DIR={}", s(&common::repo_root().join("cmake"))),
        format!("-DGEVO_CLIENT={}", s(&client_binary())),
        format!("-DGEVOD={}", env!("CARGO_BIN_EXE_gevod")),
    ]
}

#[test]
fn two_build_directories_of_one_project_are_two_kernels_to_the_daemon() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("daemon")).unwrap();
    let d = Daemon::start(&dir.path().join("daemon"), &[]);
    let debug = Project::new(dir.path(), "stencil-app", "debug");
    let release = Project::new(dir.path(), "stencil-app", "release");
    let pinned = Project::new(dir.path(), "stencil-app", "pinned");
    for (p, extra) in [
        (&debug, vec!["-DCMAKE_BUILD_TYPE=Debug".to_string()]),
        (&release, vec!["-DCMAKE_BUILD_TYPE=Release".to_string()]),
        (&pinned, vec!["-DGEVO_PROJECT=stencil app".to_string()]),
    ] {
        let log = p.configure_with(&extra);
        let watched = p.build.join("gevo").canonicalize().unwrap();
        assert_said(&log, &format!("gevod: watching {}", watched.display()));
        if p.build == pinned.build {
            assert_said(
                &log,
                "gevo: stencil: gevod names it stencil_app/stencil: GEVO_PROJECT",
            );
        } else {
            let real = p.build.canonicalize().unwrap();
            let kernel = p.kernel("stencil");
            let tag = &kernel["stencil-app.".len()..kernel.len() - "/stencil".len()];
            assert_said(
                &log,
                &format!(
                    "gevo: stencil: gevod names it {kernel}: the CMake project's name, and {tag} \
                     for this build directory ({}) so that each build directory's kernels are \
                     its own (GEVO_PROJECT sets the whole name)",
                    s(&real)
                ),
            );
            // The same directory keeps its name.
            let again = p.configure_with(&extra);
            assert_said(&again, &format!("gevod names it {kernel}:"));
        }
        p.build();
    }
    let names = [
        debug.kernel("stencil"),
        release.kernel("stencil"),
        "stencil_app/stencil".to_string(),
    ];
    assert_ne!(names[0], names[1]);
    // All three are jobs; none is refused for a name another one has.
    let jobs = d.wait_for("a job per build directory", |d| {
        let jobs = d.jobs();
        names
            .iter()
            .all(|name| jobs.iter().any(|j| &j.kernel == name))
            .then_some(jobs)
    });
    for job in &jobs {
        assert_ne!(job.state, JobState::Error, "{job:?}");
    }
    assert_eq!(jobs.len(), 3, "{jobs:#?}");
}

#[test]
fn gevo_socket_names_the_daemon_and_without_it_every_place_looked_is_said() {
    if !have_tools(&["cmake", "clang-19"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("daemon")).unwrap();
    let d = Daemon::start(&dir.path().join("daemon"), &[]);

    // GEVO_SOCKET in the environment of the first configure is the cache's
    // default, and from then on the cache decides.
    let p = Project::new(dir.path(), "stencil-app", "env");
    let log = run(p.bare_configure(&tools()).env("GEVO_SOCKET", &d.socket));
    let watched = p.build.join("gevo").canonicalize().unwrap();
    assert_said(&log, &format!("gevod: watching {}", watched.display()));
    let cache = std::fs::read_to_string(p.build.join("CMakeCache.txt")).unwrap();
    assert!(
        cache.contains(&format!("GEVO_SOCKET:STRING={}\n", s(&d.socket))),
        "{cache}"
    );
    let log = run(&mut p.bare_configure(&tools()));
    assert_said(
        &log,
        &format!("gevod: already watching {}", watched.display()),
    );
    let log = p.build();
    // Right after configure the daemon may not have taken the spec yet: it
    // says so, and does not send the user to re-register the directory.
    let said = flat(&log);
    assert!(
        said.contains("using the original PTX: no validated variant yet:")
            || said.contains("using the original PTX: gevod has not taken this build's spec yet:"),
        "{log}"
    );
    assert!(!said.contains("does gevod watch"), "{log}");

    // A named daemon that is not there: its place, and where the name came
    // from, at configure and at every build.
    let dead = dir.path().join("dead.sock");
    let q = Project::new(dir.path(), "stencil-app", "dead");
    let mut args = tools();
    args.push(format!("-DGEVO_SOCKET={}", s(&dead)));
    let log = run(&mut q.bare_configure(&args));
    assert_said(
        &log,
        &format!(
            "gevo: could not register {} with gevod (cannot reach gevod at {} (GEVO_SOCKET): no \
             socket there (is it running? start it with: gevod serve))",
            s(&q.build.join("gevo")),
            s(&dead)
        ),
    );
    let log = q.build();
    assert_said(
        &log,
        &format!(
            "using the original PTX: gevod unreachable and no export: cannot reach gevod at {} \
             (GEVO_SOCKET): no socket there;",
            s(&dead)
        ),
    );

    // Nothing named: the client searches its default places and, when
    // none answers, the log names each.
    if std::path::Path::new(SYSTEM_SOCKET).exists() {
        println!("{SYSTEM_SOCKET} exists here: the check that nothing answers is left out");
        return;
    }
    let r = Project::new(dir.path(), "stencil-app", "search");
    let log = run(&mut r.bare_configure(&tools()));
    // SAFETY: geteuid cannot fail.
    let places = if unsafe { libc::geteuid() } == 0 {
        format!("at {SYSTEM_SOCKET} (the system daemon): no socket there")
    } else {
        format!(
            "at any of 2 places: {} (your user daemon): no socket there; {SYSTEM_SOCKET} (the \
             system daemon): no socket there",
            s(&r.xdg.join("run/gevo/gevod.sock"))
        )
    };
    assert_said(
        &log,
        &format!(
            "could not register {} with gevod (cannot reach gevod {places}",
            s(&r.build.join("gevo"))
        ),
    );
    drop(d);
}
