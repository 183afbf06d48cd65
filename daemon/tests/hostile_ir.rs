//! IR made to crash or bloat whoever parses it: nesting that overflows
//! LLVM's recursive parser, chains of definitions its metadata resolution,
//! verifier and type layout recurse through, aliases of aliases its
//! verifier walks again for every alias, files larger than gevo reads. Each
//! costs its command or its job an error line naming the file (and where),
//! never the process: `gevod ids` exits 1, not on a signal, and the daemon
//! shows the problem in `jobs` and goes on evolving a good kernel beside it.

use crate::common;

use common::daemon::{build_dir, Daemon};
use common::{s, text};
use gevo_client::proto::JobState;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const HEADER: &str = "target datalayout = \"e-i64:64-i128:128-v16:16-v32:32-n16:32:64\"
target triple = \"nvptx64-nvidia-cuda\"
";

/// A valid kernel, so that nothing but the hostile part is wrong.
const KERNEL: &str = "
define void @k(ptr %p) {
  store i32 0, ptr %p
  ret void
}
!nvvm.annotations = !{!0}
!0 = !{ptr @k, !\"kernel\", i32 1}
";

/// A hostile IR file: its name, how to write it, and the words its error
/// must hold after `<path>` (`:<line>:` for text).
struct Hostile {
    name: &'static str,
    write: fn(&Path),
    says: &'static str,
}

fn module(hostile: &str) -> String {
    format!("{HEADER}{hostile}{KERNEL}")
}

/// The reported case: a constant expression 20,000 `add (` deep.
fn deep_constant(path: &Path) {
    let n = 20_000;
    let text = format!(
        "@h = global i64 {}1{}\n",
        "add (i64 1, i64 ".repeat(n),
        ")".repeat(n)
    );
    std::fs::write(path, module(&text)).unwrap();
}

fn deep_struct(path: &Path) {
    let n = 20_000;
    let text = format!(
        "@h = global {}i32{} zeroinitializer\n",
        "{ ".repeat(n),
        " }".repeat(n)
    );
    std::fs::write(path, module(&text)).unwrap();
}

/// `!1 = !{!2}`, `!2 = !{!3}`, ...: no bracket nests, yet LLVM resolves the
/// forward references through as many recursive calls.
fn metadata_chain(path: &Path) {
    let n = 100_000;
    let mut text = String::from("!named = !{!1}\n");
    for i in 1..n {
        text += &format!("!{i} = !{{!{}}}\n", i + 1);
    }
    text += &format!("!{n} = !{{}}\n");
    std::fs::write(path, format!("{HEADER}{KERNEL}{text}")).unwrap();
}

/// `%T0 = type { %T1 }`, ...: the data layout recurses through them.
fn type_chain(path: &Path) {
    let n = 200_000;
    let mut text = String::from("@g = global %T0 zeroinitializer\n");
    for i in 0..n {
        text += &format!("%T{i} = type {{ %T{} }}\n", i + 1);
    }
    text += &format!("%T{n} = type {{ i32 }}\n");
    std::fs::write(path, module(&text)).unwrap();
}

/// Twenty chains of 2,000 aliases: the verifier walks each alias's chain,
/// seconds of it here, minutes for 64 MiB of them.
fn alias_chains(path: &Path) {
    let mut text = String::from("@g = global i32 0\n");
    for c in 0..20 {
        text += &format!("@a{c}_0 = alias i32, ptr @g\n");
        for i in 1..2000 {
            text += &format!("@a{c}_{i} = alias i32, ptr @a{c}_{}\n", i - 1);
        }
    }
    std::fs::write(path, module(&text)).unwrap();
}

/// Valid IR followed by a hole: 65 MiB that take no disk.
fn oversized(path: &Path) {
    let file = std::fs::File::create(path).unwrap();
    std::io::Write::write_all(&mut &file, module("").as_bytes()).unwrap();
    file.set_len(65 << 20).unwrap();
}

const HOSTILE: [Hostile; 6] = [
    Hostile {
        name: "deep",
        write: deep_constant,
        says: ":3:4117: nesting deeper than 256 brackets (gevo's limit for untrusted IR)",
    },
    Hostile {
        name: "nested_types",
        write: deep_struct,
        says: ":3:525: nesting deeper than 256 brackets",
    },
    Hostile {
        name: "metadata_chain",
        write: metadata_chain,
        says: ":10:1: !named starts a chain of definitions 100001 deep, deeper than 2048",
    },
    Hostile {
        name: "type_chain",
        write: type_chain,
        says: ":3:1: @g starts a chain of definitions 200002 deep",
    },
    Hostile {
        name: "alias_chains",
        write: alias_chains,
        says: ":2003:1: aliases of aliases, from @a0_1999 on, take LLVM's verifier 40020000 steps",
    },
    Hostile {
        name: "oversized",
        write: oversized,
        says: ": IR larger than 64 MiB (gevo's limit)",
    },
];

/// Writes every hostile file into `dir`, as `<name>.ll`.
fn write_all(dir: &Path) {
    for h in &HOSTILE {
        (h.write)(&dir.join(format!("{}.ll", h.name)));
    }
}

#[test]
fn hostile_ir_is_an_error_line_from_gevod_ids_not_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    write_all(dir.path());
    for h in &HOSTILE {
        let path = dir.path().join(format!("{}.ll", h.name));
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_gevod"))
            .args(["ids", s(&path)])
            .output()
            .unwrap();
        let took = started.elapsed();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.signal(), None, "{}: {stderr}", h.name);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", h.name);
        let expected = format!("{}{}", path.display(), h.says);
        assert!(stderr.contains(&expected), "{}: {stderr}", h.name);
        assert!(out.stdout.is_empty(), "{}", h.name);
        // Refused before LLVM: no parse, no verifier.
        assert!(took < Duration::from_secs(20), "{}: {took:?}", h.name);
    }
    // IR nested as deep as the limit allows loads.
    let ok = dir.path().join("ok.ll");
    let n = gevo_ir::bounds::MAX_NESTING as usize;
    let deepest = format!(
        "@h = global i64 {}1{}\n",
        "add (i64 1, i64 ".repeat(n),
        ")".repeat(n)
    );
    std::fs::write(&ok, module(&deepest)).unwrap();
    let out = common::succeeded(
        Command::new(env!("CARGO_BIN_EXE_gevod"))
            .args(["ids", s(&ok)])
            .output()
            .unwrap(),
        &["ids", "ok.ll"],
    );
    assert!(text(&out.stdout).contains("ret void"));
}

/// An IR file larger than the limit is refused from its size: a 3 GiB one
/// (sparse) is neither read nor mapped.
#[test]
fn a_3_gib_ir_file_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.ll");
    let file = std::fs::File::create(&path).unwrap();
    std::io::Write::write_all(&mut &file, module("").as_bytes()).unwrap();
    file.set_len(3 << 30).unwrap();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_gevod"))
        .args(["ids", s(&path)])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: IR larger than 64 MiB (gevo's limit)",
            path.display()
        )),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Every hostile file in a watched build directory, each named by a spec,
/// beside the stencil kernel: the daemon stays up, each spec is a problem
/// naming its file in `jobs`, and the stencil job evolves.
#[test]
fn the_daemon_survives_hostile_ir_in_a_watched_directory() {
    let dir = tempfile::tempdir().unwrap();
    let build = build_dir(dir.path(), "app");
    let spec = std::fs::read_to_string(build.join("stencil.gevo.toml")).unwrap();
    write_all(&build);
    for h in &HOSTILE {
        let ir = format!("ir = \"{}.ll\"", h.name);
        let text = spec.replace("ir = \"stencil.ll\"", &ir);
        assert_ne!(text, spec);
        std::fs::write(build.join(format!("{}.gevo.toml", h.name)), text).unwrap();
    }
    let mut d = Daemon::start(dir.path(), &["--watch", s(&dir.path().join("app"))]);
    let jobs = d.wait_for("a problem per hostile file and a running job", |d| {
        let jobs = d.jobs();
        let errors = jobs.iter().filter(|j| j.state == JobState::Error).count();
        let good = jobs
            .iter()
            .any(|j| j.kernel == "app/stencil" && j.generations > 0);
        (errors == HOSTILE.len() && good).then_some(jobs)
    });
    let alive = d.child.as_mut().unwrap().try_wait().unwrap();
    assert!(alive.is_none(), "gevod exited: {alive:?}\n{}", d.log_text());
    let table = text(&d.client(&["jobs"]).stdout);
    for h in &HOSTILE {
        let kernel = format!("app/{}", h.name);
        let job = jobs.iter().find(|j| j.kernel == kernel).unwrap();
        let message = job.message.as_deref().unwrap_or_default();
        // `<spec>: <ir>...: <what>`. The daemon reads an oversized file
        // through its size cap, which refuses it before the IR parser.
        let says = match h.name {
            "oversized" => " is larger than 64 MiB (gevo's limit)",
            _ => h.says,
        };
        let expected = format!("{}{}", build.join(format!("{}.ll", h.name)).display(), says);
        assert!(message.contains(&expected), "{kernel}: {message}");
        assert!(message.starts_with(s(&build)), "{kernel}: {message}");
        assert!(table.contains(&kernel), "{table}");
        assert!(table.contains(&expected), "{table}");
    }
}
