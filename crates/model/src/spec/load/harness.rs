//! `[harness]`: the command that runs the kernel's application, its
//! placeholders (checked against every test), limits and output files.

use super::read::{array, integer, nonempty_string, number, string, table, Cx, Res, Tab};
use super::TYPE_NAMES;
use crate::access::{AccessError, Reader};
use crate::spec::expr::format_number;
use crate::spec::inputs::MAX_BUFFER_BYTES;
use crate::spec::model::{
    substitute, CheckedProgram, ElemType, Harness, HarnessOutput, TestCase, HARNESS_PLACEHOLDERS,
};
use crate::spec::tree::Node;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const HARNESS_KEYS: &[&str] = &[
    "command",
    "workdir",
    "timeout_s",
    "max_output_bytes",
    "rounds",
    "outputs",
];
const HARNESS_OUTPUT_KEYS: &[&str] = &["file", "type"];
/// Harness runs default to a minute and a mebibyte of output per stream or file.
const DEFAULT_HARNESS_TIMEOUT_S: f64 = 60.0;
const DEFAULT_HARNESS_OUTPUT_BYTES: i64 = 1 << 20;
const DEFAULT_HARNESS_ROUNDS: i64 = 5;

pub(super) fn read_harness(cx: &Cx, node: &Node, tests: &[TestCase]) -> Res<Harness> {
    let t = table(cx, node, "harness", HARNESS_KEYS)?;
    let (command, command_items) = read_command(cx, &t, tests)?;
    let workdir = match t.get("workdir") {
        None => cx.resolve("."),
        Some(n) => cx.resolve(&nonempty_string(cx, n, "harness.workdir")?),
    };
    let (programs, program) = command_programs(cx, &command, command_items, &workdir)?;
    let timeout_s = match t.get("timeout_s") {
        None => DEFAULT_HARNESS_TIMEOUT_S,
        Some(n) => {
            let v = number(cx, n, "harness.timeout_s")?.as_f64();
            if !(v > 0.0 && v <= 86_400.0) {
                return Err(cx.err(
                    &n.span,
                    "harness.timeout_s",
                    format!("expected seconds in (0, 86400], found {}", format_number(v)),
                ));
            }
            v
        }
    };
    let positive = |key: &str, default: i64, max: i64| -> Res<i64> {
        let field = format!("harness.{key}");
        match t.get(key) {
            None => Ok(default),
            Some(n) => {
                let v = integer(cx, n, &field)?;
                if v < 1 || v > max {
                    return Err(cx.err(&n.span, &field, format!("expected 1 to {max}, found {v}")));
                }
                Ok(v)
            }
        }
    };
    let max_output_bytes = positive(
        "max_output_bytes",
        DEFAULT_HARNESS_OUTPUT_BYTES,
        MAX_BUFFER_BYTES as i64,
    )? as u64;
    let rounds = positive("rounds", DEFAULT_HARNESS_ROUNDS, 1000)? as u32;
    let outputs = read_outputs(cx, &t)?;
    Ok(Harness {
        command,
        programs,
        program,
        workdir,
        timeout: std::time::Duration::from_secs_f64(timeout_s),
        max_output_bytes,
        rounds,
        outputs,
    })
}

/// Reads `command`, checking that every placeholder has a value in every
/// test, of every backend; returns the arguments and their nodes.
fn read_command<'n>(cx: &Cx, t: &Tab<'n>, tests: &[TestCase]) -> Res<(Vec<String>, &'n [Node])> {
    let expected = "an array of strings: the program and its arguments, e.g. [\"./app\", \"--ptx\", \"{ptx}\", \"--out\", \"{out}\"]";
    let c = t.req(cx, "command", expected)?;
    let items = array(cx, c, "harness.command", expected)?;
    if items.is_empty() {
        return Err(cx.err(
            &c.span,
            "harness.command",
            format!("empty; expected {expected}"),
        ));
    }
    let mut command = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("harness.command[{i}]");
        let arg = if i == 0 {
            nonempty_string(cx, item, &field)?
        } else {
            string(cx, item, &field)?
        };
        for test in tests {
            substitute(&arg, |name| {
                (HARNESS_PLACEHOLDERS.contains(&name) || test.params.contains_key(name))
                    .then(String::new)
            })
            .map_err(|e| {
                cx.err(
                    &item.span,
                    &field,
                    format!(
                        "{e} in test {}; placeholders are {{ptx}}, {{out}}, {{test}}, {{seed}} and the test's parameters",
                        test.name
                    ),
                )
            })?;
        }
        command.push(arg);
    }
    Ok((command, items))
}

/// Lists the files the command runs: the program given as a path (a bare
/// name is looked up on the run's root-owned PATH), and every argument
/// naming a file in the workdir (an interpreter's script). For a spec's
/// owner (the daemon), each must be a file only they and root can change,
/// reached through links only they and root own, and the command may not
/// hand a shell its commands as text (`sh -c`); the identities of the
/// listed files are part of the job's fingerprint. The program itself is
/// opened once, here: runs execute that descriptor.
fn command_programs(
    cx: &Cx,
    command: &[String],
    items: &[Node],
    workdir: &Path,
) -> Res<(Vec<PathBuf>, Option<CheckedProgram>)> {
    let on_behalf = matches!(cx.reader, Reader::OnBehalf { .. });
    if on_behalf {
        if let Some((i, words)) = inline_code(command) {
            return Err(cx.err(
                &items[i].span,
                &format!("harness.command[{i}]"),
                format!(
                    "`{words}` runs commands given as text, which gevod cannot check; put them in a \
                     script owned by the spec's owner and name it, e.g. [\"/bin/sh\", \"run.sh\", \"{{out}}\"]"
                ),
            ));
        }
    }
    let program = open_program(cx, &command[0], &items[0], workdir)?;
    let mut programs = Vec::new();
    for (i, arg) in command.iter().enumerate() {
        let path = workdir.join(arg);
        let names_file = if i == 0 {
            arg.contains('/')
        } else {
            !arg.contains('{') && !arg.starts_with('-') && path.is_file()
        };
        if !names_file {
            continue;
        }
        if on_behalf && i > 0 {
            let field = format!("harness.command[{i}]");
            checked_file(&cx.reader, &path)
                .map_err(|e| cx.err(&items[i].span, &field, format!("file {e}")))?;
        }
        programs.push(path);
    }
    Ok((programs, program))
}

/// Opens the program `command[0]` names, once: a path against `workdir`, a
/// bare name on [`Harness::PATH`]. For the daemon it must pass
/// [`checked_file`], or the spec is refused; for the command line's own
/// specs a program that cannot be opened now is left to the run to report.
fn open_program(cx: &Cx, first: &str, item: &Node, workdir: &Path) -> Res<Option<CheckedProgram>> {
    let on_behalf = matches!(cx.reader, Reader::OnBehalf { .. });
    let refuse = |message: String| cx.err(&item.span, "harness.command[0]", message);
    // What the run's argv[0] will be; a placeholder would make it another
    // program per test than the one checked.
    let Ok(name) = substitute(first, |_| None) else {
        if !on_behalf {
            return Ok(None);
        }
        return Err(refuse(
            "the program holds a placeholder; gevod runs only the program it checked when the spec loaded".into(),
        ));
    };
    let path = if name.contains('/') {
        workdir.join(&name)
    } else {
        match on_path(&name) {
            Some(p) => p,
            None if on_behalf => {
                return Err(refuse(format!(
                    "program \"{name}\" is not on the harness PATH {}",
                    Harness::PATH
                )))
            }
            None => return Ok(None),
        }
    };
    let opened = checked_file(&cx.reader, &path).and_then(|file| {
        pin(&path, &file).map_err(|source| AccessError::Io {
            path: path.clone(),
            source,
        })
    });
    match opened {
        Ok(program) => Ok(Some(program)),
        Err(e) if on_behalf => Err(refuse(format!("program {e}"))),
        Err(_) => Ok(None),
    }
}

/// Where a program named without a `/` is found on [`Harness::PATH`]: the
/// first regular file with an execute bit, as `execvp` would.
fn on_path(name: &str) -> Option<PathBuf> {
    Harness::PATH
        .split(':')
        .map(|dir| Path::new(dir).join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

/// An `O_PATH` descriptor of the very file `file` is (reopened through
/// `/proc/self/fd`, never through `path`), for runs to execute.
fn pin(path: &Path, file: &File) -> std::io::Result<CheckedProgram> {
    let pinned = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let (checked, reopened) = (file.metadata()?, pinned.metadata()?);
    let id = (checked.dev(), checked.ino());
    if (reopened.dev(), reopened.ino()) != id {
        return Err(std::io::Error::other("it changed while it was opened"));
    }
    Ok(CheckedProgram {
        path: path.to_path_buf(),
        fd: Arc::new(OwnedFd::from(pinned)),
        id,
    })
}

/// Opens a file the command runs for `reader`: for the daemon, one only
/// the spec's owner and root can change ([`Reader::open`]: the file and
/// every directory above it), and every symbolic link on the way to it
/// theirs too.
fn checked_file(reader: &Reader, path: &Path) -> Result<File, AccessError> {
    let file = reader.open(path)?;
    if let Reader::OnBehalf { uid, root } = reader {
        if let Some(why) = foreign_link(path, *uid, root) {
            return Err(AccessError::Writable {
                path: path.to_path_buf(),
                why,
            });
        }
    }
    Ok(file)
}

/// Why someone besides `uid` and root could redirect `path`: a symbolic
/// link on its way (its own components, then each link's target in turn)
/// that another user owns (a link is its maker's, whatever it points to),
/// or a directory a link leads through that others may write (as
/// [`Reader::open`] judges directories: not the watch root and above for a
/// path inside it). `None` when there is none.
fn foreign_link(path: &Path, uid: u32, root: &Path) -> Option<String> {
    const STICKY: u32 = 0o1000;
    let mut pending = vec![std::path::absolute(path).ok()?];
    let mut links = 0;
    while let Some(p) = pending.pop() {
        let mut prefix = PathBuf::new();
        for component in p.components() {
            prefix.push(component);
            // What is gone was judged by the open.
            let Ok(meta) = std::fs::symlink_metadata(&prefix) else {
                break;
            };
            let owner = meta.uid();
            let foreign = owner != uid && owner != 0;
            let kind = meta.file_type();
            if kind.is_symlink() {
                if foreign {
                    return Some(format!(
                        "the symbolic link {} on its way is owned by uid {owner}, not the spec's owner \
                         (uid {uid}) or root: its owner could point it elsewhere (replace it with the file or your own link)",
                        prefix.display()
                    ));
                }
                links += 1;
                // The open would have failed on a loop.
                if links > 40 {
                    return None;
                }
                if let Ok(target) = std::fs::read_link(&prefix) {
                    let base = prefix.parent().unwrap_or(Path::new("/"));
                    pending.push(base.join(target));
                }
            } else if kind.is_dir()
                && links > 0
                && !(p.starts_with(root) && root.starts_with(&prefix))
            {
                let writable = meta.mode() & STICKY == 0 && meta.mode() & 0o022 != 0;
                if foreign || writable {
                    return Some(format!(
                        "the directory {} a symbolic link on its way leads through could be changed by others \
                         (owned by uid {owner}, mode {:o})",
                        prefix.display(),
                        meta.mode() & 0o7777
                    ));
                }
            }
        }
    }
    None
}

/// Shells and interpreters, by the start of their file name, and the
/// options that give them their program as text on the command line.
const INLINE_CODE: &[(&[&str], &[&str])] = &[
    (
        &[
            "sh", "bash", "dash", "zsh", "ksh", "mksh", "pdksh", "ash", "yash", "posh", "rbash",
            "fish", "csh", "tcsh", "busybox",
        ],
        &["-c"],
    ),
    (&["python", "pypy"], &["-c"]),
    (&["perl"], &["-e", "-E"]),
    (&["ruby"], &["-e"]),
    (&["node", "nodejs"], &["-e", "--eval", "-p", "--print"]),
    (&["php"], &["-r"]),
    (&["lua"], &["-e"]),
];

/// The first shell or interpreter in `command` given its commands as text
/// (`sh -c '...'`, `python3 -c`, `perl -e`, also behind `env` or another
/// program): the index of the option and the two words.
fn inline_code(command: &[String]) -> Option<(usize, String)> {
    for (i, word) in command.iter().enumerate() {
        let base = word.rsplit('/').next().unwrap_or(word);
        let Some((names, flags)) = INLINE_CODE.iter().find(|(names, _)| {
            names.iter().any(|n| {
                base.strip_prefix(n).is_some_and(|rest| {
                    // python3, python3.12, perl5.36, lua5.4, but not shred.
                    rest.chars().all(|c| c.is_ascii_digit() || c == '.')
                })
            })
        }) else {
            continue;
        };
        let shell = names.contains(&"sh");
        let mut j = i + 1;
        while let Some(arg) = command.get(j) {
            if arg == "--" || !(arg.starts_with('-') || (shell && arg.starts_with('+'))) {
                // The script (or a busybox applet: judged in its turn).
                break;
            }
            let is_flag = flags.contains(&arg.as_str())
                || (!arg.starts_with("--")
                    && flags.iter().any(|f| {
                        let letter = &f[1..];
                        f.len() == 2 && arg.starts_with('-') && {
                            let cluster = &arg[1..];
                            // A shell reads -c anywhere in a cluster (-ec);
                            // others when it ends one (-Bc, -le).
                            if shell {
                                cluster.contains(letter)
                            } else {
                                cluster.ends_with(letter)
                            }
                        }
                    }));
            if is_flag {
                return Some((j, format!("{base} {arg}")));
            }
            // Options that take the next word: a shell's -o/-O and rc files,
            // python's -W/-X.
            let takes_value = if shell {
                (arg.len() == 2 && (arg.ends_with('o') || arg.ends_with('O')))
                    || arg == "--rcfile"
                    || arg == "--init-file"
            } else {
                names.contains(&"python") && (arg == "-W" || arg == "-X")
            };
            j += if takes_value { 2 } else { 1 };
        }
    }
    None
}

/// Reads `outputs`: plain, distinct file names inside `{out}`, each with
/// its element type.
fn read_outputs(cx: &Cx, t: &Tab) -> Res<Vec<HarnessOutput>> {
    let expected =
        "an array of output files, e.g. outputs = [{ file = \"out.f32\", type = \"f32\" }]";
    let o = t.req(cx, "outputs", expected)?;
    let items = array(cx, o, "harness.outputs", expected)?;
    if items.is_empty() {
        return Err(cx.err(
            &o.span,
            "harness.outputs",
            format!("empty; expected {expected}"),
        ));
    }
    let mut outputs: Vec<HarnessOutput> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("harness.outputs[{i}]");
        let ot = table(cx, item, &field, HARNESS_OUTPUT_KEYS)?;
        let f = ot.req(cx, "file", "a file name inside {out}")?;
        let file = nonempty_string(cx, f, &ot.path("file"))?;
        if file.contains('/') || file == "." || file == ".." {
            return Err(cx.err(
                &f.span,
                &ot.path("file"),
                format!("\"{file}\" is not a plain file name; outputs are files directly inside {{out}}"),
            ));
        }
        if outputs.iter().any(|o| o.file == file) {
            return Err(cx.err(
                &f.span,
                &ot.path("file"),
                format!("\"{file}\" is listed twice"),
            ));
        }
        let ty = ot.req(cx, "type", &format!("an element type: {TYPE_NAMES}"))?;
        let name = string(cx, ty, &ot.path("type"))?;
        let elem = ElemType::from_name(&name).ok_or_else(|| {
            cx.err(
                &ty.span,
                &ot.path("type"),
                format!("unknown type \"{name}\"; expected one of {TYPE_NAMES}"),
            )
        })?;
        outputs.push(HarnessOutput { file, elem });
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{parse_as, Spec, SpecError};
    use std::os::unix::fs::PermissionsExt;

    fn words(c: &[&str]) -> Vec<String> {
        c.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn commands_given_as_text_are_found() {
        /// A command, and the option found with its words.
        type Case<'a> = (&'a [&'a str], Option<(usize, &'a str)>);
        let cases: &[Case] = &[
            (&["sh", "-c", "x"], Some((1, "sh -c"))),
            (
                &["/bin/bash", "-e", "-o", "pipefail", "-c", "x"],
                Some((4, "bash -c")),
            ),
            (&["/usr/bin/dash", "-ec", "x"], Some((1, "dash -ec"))),
            (&["env", "A=1", "zsh", "-c", "x"], Some((3, "zsh -c"))),
            (&["busybox", "sh", "-c", "x"], Some((2, "sh -c"))),
            (&["python3.12", "-B", "-c", "x"], Some((2, "python3.12 -c"))),
            (&["perl", "-le", "x"], Some((1, "perl -le"))),
            (&["node", "--eval", "x"], Some((1, "node --eval"))),
            // A script's own arguments are its business.
            (&["/bin/sh", "run.sh", "-c"], None),
            (&["python3", "-m", "app", "-c", "x"], None),
            (&["./heat", "--out", "{out}"], None),
            (&["shred", "-c"], None),
            (&["sh", "--", "-c"], None),
        ];
        for (command, expected) in cases {
            let found = inline_code(&words(command));
            assert_eq!(
                found.as_ref().map(|(i, w)| (*i, w.as_str())),
                *expected,
                "{command:?}"
            );
        }
    }

    struct Dir {
        tmp: tempfile::TempDir,
    }

    impl Dir {
        fn new() -> Dir {
            let tmp = tempfile::tempdir().unwrap();
            std::fs::write(tmp.path().join("k.ll"), "").unwrap();
            Dir { tmp }
        }

        fn path(&self, name: &str) -> PathBuf {
            std::fs::canonicalize(self.tmp.path()).unwrap().join(name)
        }

        fn script(&self, name: &str, mode: u32) -> PathBuf {
            let p = self.path(name);
            std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
            std::fs::set_permissions(&p, PermissionsExt::from_mode(mode)).unwrap();
            p
        }

        fn owner(&self) -> Reader {
            Reader::OnBehalf {
                // SAFETY: geteuid cannot fail and touches no memory.
                uid: unsafe { libc::geteuid() },
                root: self.path(""),
            }
        }

        fn load(&self, command: &str, reader: &Reader) -> Result<Spec, SpecError> {
            let text = format!(
                "version = 1\nir = \"k.ll\"\nkernel = \"k\"\n[harness]\ncommand = {command}\n\
                 outputs = [{{ file = \"r.bin\", type = \"u8\" }}]\n\
                 [tests]\ntrain = [{{ seed = 1 }}]\nheldout = [{{ seed = 2 }}]\n\
                 [acceptance]\nmetric = \"exact\"\n"
            );
            parse_as(&self.path("k.gevo.toml"), &text, reader)
        }
    }

    fn id(p: &Path) -> (u64, u64) {
        let m = std::fs::metadata(p).unwrap();
        (m.dev(), m.ino())
    }

    #[test]
    fn the_daemon_refuses_shell_text_and_the_command_line_accepts_it() {
        let d = Dir::new();
        let command = r#"["/bin/sh", "-c", ". ./h.sh"]"#;
        let e = d.load(command, &d.owner()).unwrap_err().to_string();
        assert!(e.contains("harness.command[1]"), "{e}");
        assert!(e.contains("`sh -c` runs commands given as text"), "{e}");
        assert!(e.contains("script owned by the spec's owner"), "{e}");
        let spec = d.load(command, &Reader::Caller).unwrap();
        let program = spec.harness.unwrap().program.unwrap();
        assert_eq!(program.id, id(Path::new("/bin/sh")));
    }

    /// The program is opened once: the descriptor names the file checked,
    /// wherever its link points afterwards.
    #[test]
    fn the_program_is_the_file_checked_when_the_spec_loaded() {
        let d = Dir::new();
        let good = d.script("good.sh", 0o755);
        let other = d.script("other.sh", 0o755);
        let link = d.path("hq.sh");
        std::os::unix::fs::symlink("good.sh", &link).unwrap();
        let spec = d.load(r#"["./hq.sh", "{out}"]"#, &d.owner()).unwrap();
        let harness = spec.harness.unwrap();
        let program = harness.program.clone().unwrap();
        assert_eq!(program.id, id(&good));
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink("other.sh", &link).unwrap();
        let pinned = File::from(program.fd.try_clone().unwrap())
            .metadata()
            .unwrap();
        assert_eq!((pinned.dev(), pinned.ino()), id(&good));
        assert_ne!(id(&other), id(&good));
        // Another run of the check sees the other file.
        let again = d.load(r#"["./hq.sh", "{out}"]"#, &d.owner()).unwrap();
        assert_eq!(again.harness.unwrap().program.unwrap().id, id(&other));
        assert_ne!(harness.program, None);
    }

    #[test]
    fn programs_others_could_change_or_redirect_are_refused() {
        let d = Dir::new();
        d.script("open.sh", 0o777);
        let e = d
            .load(r#"["./open.sh"]"#, &d.owner())
            .unwrap_err()
            .to_string();
        assert!(e.contains("harness.command[0]: program"), "{e}");
        assert!(e.contains("world-writable"), "{e}");
        let sub = d.path("sub");
        std::fs::create_dir(&sub).unwrap();
        d.script("sub/p.sh", 0o755);
        std::fs::set_permissions(&sub, PermissionsExt::from_mode(0o777)).unwrap();
        let e = d
            .load(r#"["./sub/p.sh"]"#, &d.owner())
            .unwrap_err()
            .to_string();
        assert!(e.contains("sub is world-writable"), "{e}");
        // Sticky, as /tmp: only an entry's owner may replace it.
        std::fs::set_permissions(&sub, PermissionsExt::from_mode(0o1777)).unwrap();
        d.load(r#"["./sub/p.sh"]"#, &d.owner()).unwrap();
        // A placeholder would make the program another file per test.
        let e = d
            .load(r#"["./{test}.sh"]"#, &d.owner())
            .unwrap_err()
            .to_string();
        assert!(e.contains("the program holds a placeholder"), "{e}");
        let e = d
            .load(r#"["no-such-gevo-program"]"#, &d.owner())
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not on the harness PATH"), "{e}");
        // A link through a directory anyone may write, to another link:
        // whoever writes there could replace that second link.
        d.script("real2.sh", 0o755);
        let mid = d.path("mid");
        std::fs::create_dir(&mid).unwrap();
        std::os::unix::fs::symlink("../real2.sh", mid.join("l2")).unwrap();
        std::fs::set_permissions(&mid, PermissionsExt::from_mode(0o777)).unwrap();
        std::os::unix::fs::symlink("mid/l2", d.path("chain.sh")).unwrap();
        let e = d
            .load(r#"["./chain.sh"]"#, &d.owner())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mid a symbolic link on its way leads through could be changed by others"),
            "{e}"
        );
        // The command line's own spec: left to the run.
        let spec = d
            .load(r#"["no-such-gevo-program"]"#, &Reader::Caller)
            .unwrap();
        assert_eq!(spec.harness.unwrap().program, None);

        // SAFETY: geteuid cannot fail and touches no memory.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: a link owned by another user needs root to make");
            return;
        }
        // In a sticky directory another user's link to the owner's script:
        // its maker could point it at any file the owner trusts.
        d.script("real.sh", 0o755);
        std::os::unix::fs::symlink(d.path("real.sh"), sub.join("theirs.sh")).unwrap();
        std::os::unix::fs::lchown(sub.join("theirs.sh"), Some(65534), Some(65534)).unwrap();
        let e = d
            .load(r#"["./sub/theirs.sh"]"#, &d.owner())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the symbolic link")
                && e.contains("theirs.sh on its way is owned by uid 65534"),
            "{e}"
        );
        // Theirs as an argument (a script the shell runs) likewise.
        let e = d
            .load(r#"["/bin/sh", "sub/theirs.sh"]"#, &d.owner())
            .unwrap_err()
            .to_string();
        assert!(e.contains("harness.command[1]: file"), "{e}");
        assert!(e.contains("owned by uid 65534"), "{e}");
    }
}
