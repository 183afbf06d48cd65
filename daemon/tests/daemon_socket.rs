//! The socket's bounds (docs/daemon.md, "API") against a real `gevod
//! serve`, over raw streams as a misbehaving client would use them: huge,
//! slow, idle and malformed requests each get one short answer line, the
//! daemon's memory and threads stay within stated bounds, one uid's idle
//! connections leave room for other uids, and `gevo-client best` turned
//! away (or facing a stopped daemon) falls back on the export.

use crate::common;

use common::daemon::{client_binary, s, Daemon, CONFIG};
use gevo_client::proto::{Best, BestRecord, Body, Command, Reply};
use gevod::api::{MAX_CONNECTIONS, MAX_CONNECTIONS_PER_UID, MAX_REQUEST_BYTES, REQUEST_DEADLINE};
use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Output};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How soon a request that cannot be served is answered.
const PROMPT: Duration = Duration::from_secs(1);
/// How much a client's junk may grow the daemon's resident memory.
const RSS_GROWTH_KB: u64 = 32 << 10;
/// Threads the daemon may run beyond its idle count and one per connection.
const THREAD_SLACK: u64 = 4;

/// A field of /proc/<pid>/status as a number ("VmRSS" in kB, "Threads").
fn proc_status(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"));
    line.split_whitespace().next().unwrap().parse().unwrap()
}

fn pid(d: &Daemon) -> u32 {
    d.child.as_ref().unwrap().id()
}

/// Everything the daemon sends until it closes the connection (a reset
/// after the answer counts as closing), and how long the first byte took.
fn answer(stream: &UnixStream, within: Duration) -> (String, Duration) {
    let started = Instant::now();
    let mut first = None;
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let left = within.saturating_sub(started.elapsed());
        assert!(!left.is_zero(), "not closed within {within:?}: {got:?}");
        stream.set_read_timeout(Some(left)).unwrap();
        match (&*stream).read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                first.get_or_insert(started.elapsed());
                got.extend_from_slice(&chunk[..n]);
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset && !got.is_empty() => break,
            // A signal to this test process (another test's child exiting)
            // interrupts the read; it is no answer.
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => panic!("reading the answer: {e} (got {got:?})"),
        }
    }
    let text = String::from_utf8(got).expect("answers are UTF-8");
    (text, first.unwrap_or(within))
}

/// Asserts `text` is one answer line and returns it without its newline.
fn one_line(text: &str) -> &str {
    let line = text
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("no newline: {text:?}"));
    assert!(!line.contains('\n'), "more than one line: {text:?}");
    line
}

/// Sends `request` (then closes the write half) and returns the one answer
/// line and how long it took.
fn exchange(socket: &Path, request: &[u8]) -> (String, Duration) {
    let stream = UnixStream::connect(socket).unwrap();
    (&stream).write_all(request).unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    let (text, took) = answer(&stream, Duration::from_secs(10));
    (one_line(&text).to_string(), took)
}

/// Each case: what a client sends (its write half then closed), and words
/// its one answer line must contain.
#[test]
fn bad_requests_each_get_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let long = "a".repeat(10_000);
    let cut = format!("{}...", "a".repeat(80));
    let cases: Vec<(Vec<u8>, String)> = vec![
        (
            b"\xff\xfe\n".to_vec(),
            "the request is not UTF-8 text (byte 0 is not)".into(),
        ),
        (
            b"{\"version\":1,\"command\":\"st\xe9tus\"}\n".to_vec(),
            "not UTF-8 text (byte 26 is not)".into(),
        ),
        (
            br#"{"version":"1","command":"status"}"#.to_vec(),
            r#"request's \"version\" is \"1\" (a string); this gevod speaks protocol 1"#.into(),
        ),
        (b"\n".to_vec(), "not a JSON request".into()),
        (
            format!(r#"{{"version":1,"command":"best","kernel":"{long}"}}"#).into_bytes(),
            format!("no kernel named {cut} (see gevo-client jobs)"),
        ),
        (
            format!(r#"{{"version":1,"command":"{long}"}}"#).into_bytes(),
            format!("unknown variant `{cut}`"),
        ),
        (
            format!(r#"{{"version":1,"command":"watch","dir":"{long}"}}"#).into_bytes(),
            format!("{cut}: give an absolute path"),
        ),
        // A last line without its newline is still a request.
        (
            br#"{"version":1,"command":"jobs"}"#.to_vec(),
            r#""ok":{"jobs":[]}"#.into(),
        ),
    ];
    for (request, words) in cases {
        let shown = String::from_utf8_lossy(&request[..request.len().min(60)]).into_owned();
        let (line, took) = exchange(&d.socket, &request);
        assert!(line.contains(&words), "{shown}: {line}");
        assert!(line.len() < 1024, "{shown}: a {} byte answer", line.len());
        assert!(took < PROMPT, "{shown}: answered after {took:?}");
    }
}

/// Requests at and over [`MAX_REQUEST_BYTES`], all at once (four of 50 MB):
/// each is answered at once in a short line, each client's whole line is
/// taken (no EPIPE), and the daemon's memory barely moves.
#[test]
fn huge_requests_get_a_short_answer_and_the_daemon_stays_small() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let pid = pid(&d);
    let idle_kb = proc_status(pid, "VmRSS");

    // A best request whose kernel name pads it to `size` bytes, newline included.
    let padded = |size: usize| {
        let head = r#"{"version":1,"command":"best","kernel":""#;
        let tail = "\"}\n";
        let mut line = head.as_bytes().to_vec();
        line.resize(size - tail.len(), b'a');
        line.extend_from_slice(tail.as_bytes());
        Arc::new(line)
    };
    let too_long = format!("the request is longer than {MAX_REQUEST_BYTES} bytes");
    let huge = padded(50_000_000);
    let cases = [
        (huge.clone(), too_long.clone()),
        (huge.clone(), too_long.clone()),
        (huge.clone(), too_long.clone()),
        (huge, too_long.clone()),
        (padded(MAX_REQUEST_BYTES + 2), too_long),
        // At the limit (its newline aside) it is a request, quoted short.
        (padded(MAX_REQUEST_BYTES + 1), "no kernel named aaaa".into()),
    ];

    let sampling = Arc::new(AtomicBool::new(true));
    let peak_kb = Arc::new(AtomicU64::new(idle_kb));
    let sampler = {
        let (sampling, peak_kb) = (sampling.clone(), peak_kb.clone());
        std::thread::spawn(move || {
            while sampling.load(Ordering::Relaxed) {
                peak_kb.fetch_max(proc_status(pid, "VmRSS"), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let clients: Vec<_> = cases
        .into_iter()
        .map(|(request, words)| {
            let stream = UnixStream::connect(&d.socket).unwrap();
            let writer = {
                let stream = stream.try_clone().unwrap();
                std::thread::spawn(move || (&stream).write_all(&request))
            };
            let reader = std::thread::spawn(move || {
                let (text, took) = answer(&stream, Duration::from_secs(10));
                (text, took)
            });
            (writer, reader, words)
        })
        .collect();
    for (writer, reader, words) in clients {
        let (text, took) = reader.join().unwrap();
        let line = one_line(&text);
        assert!(line.contains(&words), "{line}");
        assert!(line.len() < 1024, "a {} byte answer", line.len());
        assert!(took < PROMPT, "answered after {took:?}");
        writer
            .join()
            .unwrap()
            .expect("the daemon takes the whole line");
    }
    sampling.store(false, Ordering::Relaxed);
    sampler.join().unwrap();
    let peak_kb = peak_kb.load(Ordering::Relaxed);
    assert!(
        peak_kb < idle_kb + RSS_GROWTH_KB,
        "VmRSS grew from {idle_kb} kB to {peak_kb} kB"
    );
    assert!(matches!(d.call(Command::Status), Reply::Status(_)));
}

/// Reads what the stream has now (it is non-blocking) into `got`: true
/// once the daemon has closed it.
fn poll(stream: &UnixStream, got: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 1024];
    loop {
        match (&*stream).read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => panic!("{e}"),
        }
    }
}

/// The answer to a connection of `uid` beyond its share.
fn busy_for(uid: u32) -> String {
    format!(
        "too many connections from uid {uid} (at most {MAX_CONNECTIONS_PER_UID} at once per uid); try again"
    )
}

/// The answer to a connection beyond the cap in all.
fn busy_for_all() -> String {
    format!("too many connections ({MAX_CONNECTIONS}); try again")
}

fn our_uid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Opens `n` connections (non-blocking) and waits until all but `held` of
/// them have been answered `busy` (promptly): the rest are held, served
/// and silent until the deadline. Returns them all.
fn hog(socket: &Path, n: usize, held: usize, busy: &str) -> Vec<UnixStream> {
    let streams: Vec<UnixStream> = (0..n)
        .map(|_| UnixStream::connect(socket).unwrap())
        .collect();
    wait_turned_away(&streams, held, busy);
    streams
}

/// Waits until all but `held` of `streams` have been answered `busy`,
/// within [`PROMPT`] (they are closed a moment later: the daemon waits a
/// second for a request they never send); the `held` ones are served, so
/// they hear nothing until the deadline.
fn wait_turned_away(streams: &[UnixStream], held: usize, busy: &str) {
    for s in streams {
        s.set_nonblocking(true).unwrap();
    }
    let mut got = vec![Vec::new(); streams.len()];
    let answered_busy = |got: &[Vec<u8>]| {
        got.iter()
            .filter(|g| String::from_utf8_lossy(g).contains(busy))
            .count()
    };
    let started = Instant::now();
    loop {
        for (i, s) in streams.iter().enumerate() {
            poll(s, &mut got[i]);
        }
        if answered_busy(&got) == streams.len() - held {
            break;
        }
        assert!(
            started.elapsed() < PROMPT,
            "{} of {} answered {busy:?} after {:?}",
            answered_busy(&got),
            streams.len(),
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The held ones stay open and unanswered.
    std::thread::sleep(Duration::from_millis(100));
    let mut silent = 0;
    for (i, s) in streams.iter().enumerate() {
        let closed = poll(s, &mut got[i]);
        silent += usize::from(got[i].is_empty() && !closed);
    }
    assert_eq!(silent, held, "connections served");
    assert_eq!(answered_busy(&got), streams.len() - held);
}

/// 300 idle connections of one uid at once: [`MAX_CONNECTIONS_PER_UID`]
/// are served (and cut off at the deadline), each of the others is answered
/// at once, naming the per-uid limit, and closed, and the daemon runs no
/// thread for them.
#[test]
fn connections_beyond_the_cap_are_answered_and_threads_stay_bounded() {
    const OPENED: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let pid = pid(&d);
    let idle_threads = proc_status(pid, "Threads");

    let opened = Instant::now();
    let streams: Vec<UnixStream> = (0..OPENED)
        .map(|_| UnixStream::connect(&d.socket).unwrap())
        .collect();
    for s in &streams {
        s.set_nonblocking(true).unwrap();
    }
    let mut got = vec![Vec::new(); OPENED];
    let mut closed = vec![false; OPENED];
    let busy = busy_for(our_uid());
    let answered_busy = |got: &[Vec<u8>]| {
        got.iter()
            .filter(|g| String::from_utf8_lossy(g).contains(&busy))
            .count()
    };
    let connected = opened.elapsed();
    let mut most_threads = 0;
    while answered_busy(&got) < OPENED - MAX_CONNECTIONS_PER_UID {
        assert!(
            opened.elapsed() < connected + PROMPT,
            "{} of {OPENED} turned away after {:?}",
            answered_busy(&got),
            opened.elapsed()
        );
        most_threads = most_threads.max(proc_status(pid, "Threads"));
        for (i, s) in streams.iter().enumerate() {
            closed[i] |= poll(s, &mut got[i]);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(answered_busy(&got), OPENED - MAX_CONNECTIONS_PER_UID);
    most_threads = most_threads.max(proc_status(pid, "Threads"));
    let bound = idle_threads + MAX_CONNECTIONS_PER_UID as u64 + THREAD_SLACK;
    assert!(
        most_threads <= bound,
        "{most_threads} threads (idle {idle_threads}, bound {bound})"
    );

    // The served ones hear from the deadline; every client got one line.
    while closed.iter().any(|c| !c) {
        assert!(
            opened.elapsed() < REQUEST_DEADLINE + Duration::from_secs(2),
            "{} connections still open after {:?}",
            closed.iter().filter(|c| !**c).count(),
            opened.elapsed()
        );
        for (i, s) in streams.iter().enumerate() {
            closed[i] |= poll(s, &mut got[i]);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let cut_off = format!(
        "no complete request line within {} s",
        REQUEST_DEADLINE.as_secs()
    );
    for g in &got {
        let line = one_line(std::str::from_utf8(g).unwrap());
        assert!(line.contains(&busy) || line.contains(&cut_off), "{line}");
    }
    // A thread gives its place back just after closing its connection.
    let closed_at = Instant::now();
    while !matches!(
        d.try_call(Command::Status).map(|r| r.body),
        Some(Body::Ok(Reply::Status(_)))
    ) {
        assert!(closed_at.elapsed() < PROMPT, "status is not served again");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn root_or_skip(what: &str) -> bool {
    let root = our_uid() == 0;
    if !root {
        println!("skipped: {what} needs another uid, so root");
    }
    root
}

/// The uid that plays another user: nobody.
const OTHER: u32 = 65534;

/// A daemon in `dir` that [`OTHER`] may use too ([api] allowed_uids, the
/// socket and its directory open), with gevo-client copied where it can
/// run it.
fn daemon_for_two(dir: &Path) -> (Daemon, PathBuf) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.join("gevod.toml"),
        format!("{CONFIG}\n[api]\nallowed_uids = [{OTHER}]\n"),
    )
    .unwrap();
    let d = Daemon::start(dir, &[]);
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    // The checkout may sit where nobody cannot reach (/root): run a copy.
    let client = dir.join("gevo-client");
    std::fs::copy(client_binary(), &client).unwrap();
    std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
    (d, client)
}

/// `gevo-client args` run as `uid`, and how long it took.
fn client_as(d: &Daemon, client: &Path, uid: u32, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let out = Process::new(client)
        .args(["--socket", s(&d.socket), "--state", s(&d.state)])
        .args(args)
        .env("HOME", "/")
        .current_dir("/")
        .uid(uid)
        .gid(uid)
        .output()
        .unwrap();
    (out, started.elapsed())
}

/// One uid (ours) holds more idle connections than the cap in all: it gets
/// its share and the rest are turned away at once; another uid's
/// `gevo-client status` is still answered at once, not after the deadline.
#[test]
fn another_uid_is_served_while_one_holds_idle_connections() {
    if !root_or_skip("a client of another uid") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (d, client) = daemon_for_two(dir.path());
    let _held = hog(
        &d.socket,
        MAX_CONNECTIONS + 4,
        MAX_CONNECTIONS_PER_UID,
        &busy_for(our_uid()),
    );
    let (out, took) = client_as(&d, &client, OTHER, &["status"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        common::text(&out.stdout).contains(&format!("pid {}", pid(&d))),
        "{out:?}"
    );
    // Well under the deadline the idle connections are cut off at.
    assert!(took < Duration::from_secs(3), "status took {took:?}");
    // And ours, the hog's, is turned away until its connections end.
    let (out, _) = client_as(&d, &client, our_uid(), &["status"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        common::text(&out.stderr)
            .contains(&format!("turned this client away: {}", busy_for(our_uid()))),
        "{out:?}"
    );
}

/// A validated variant of app/stencil for sm_90, exported to `state` with
/// a report, as the daemon would have; returns its PTX.
fn export_stencil(state: &Path) -> String {
    let ptx = ".version 8.0\n.target sm_90\n.entry stencil5() { ret; }\n// exported\n";
    let best = Best {
        record: BestRecord {
            configuration: None,
            kernel: "app/stencil".into(),
            job: "exported".into(),
            version: 1,
            target: "sm_90".into(),
            backend: "sim".into(),
            speedup: 1.5,
            interval: (1.4, 1.6),
            generation: 3,
            ptx_hash: gevo_client::export::ptx_hash(ptx),
            spec_hash: String::new(),
            ir_hash: String::new(),
            validated_at: 0,
        },
        ptx: ptx.into(),
    };
    gevo_client::export::write(state, &best, Default::default()).unwrap();
    gevo_client::export::write_report(
        state,
        "app/stencil",
        "<html>exported report</html>",
        Default::default(),
    )
    .unwrap();
    ptx.into()
}

/// `gevo-client best` and `report` of the exported kernel: both exit 0 with
/// the export, saying on stderr that the daemon was `why`.
fn falls_back(d: &Daemon, ptx: &str, extra: &[&str], why: &str) {
    let out_file = d.dir.join("k.ptx");
    let _ = std::fs::remove_file(&out_file);
    let mut args = extra.to_vec();
    args.extend(["best", "stencil", "--arch", "sm_90", "-o", s(&out_file)]);
    let out = d.client(&args);
    let err = common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "best: {err}");
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), ptx);
    let from = format!("(from the export in {}, {why}", d.state.display());
    assert!(err.contains(&from), "best: {err}");

    let mut args = extra.to_vec();
    args.extend(["report", "app/stencil"]);
    let out = d.client(&args);
    let err = common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "report: {err}");
    assert_eq!(common::text(&out.stdout), "<html>exported report</html>");
    assert!(
        err.contains("the report exported with the best variant"),
        "{err}"
    );
    assert!(err.contains(why), "report: {err}");
}

/// Connections made as `uid` (root only): a thread of ours takes that
/// effective uid for its connects, which SO_PEERCRED then reports. The raw
/// system call changes only the calling thread's credentials (libc's
/// setresuid would change every thread's), and the thread ends with them.
fn connect_as(socket: &Path, uid: u32, n: usize) -> Vec<UnixStream> {
    let socket = socket.to_path_buf();
    std::thread::spawn(move || {
        let keep = -1 as libc::c_long;
        // SAFETY: setresuid on this thread alone; it holds no locks and
        // ends right after its connects.
        let rc = unsafe { libc::syscall(libc::SYS_setresuid, keep, uid as libc::c_long, keep) };
        assert_eq!(rc, 0, "setresuid: {}", std::io::Error::last_os_error());
        (0..n)
            .map(|_| UnixStream::connect(&socket).unwrap())
            .collect()
    })
    .join()
    .unwrap()
}

/// Turned away for its uid's share, `best` and `report` fall back on the
/// export (exit 0, saying why), as when the daemon is down; `status` exits
/// 2 naming the limit.
#[test]
fn best_falls_back_on_the_export_when_its_uid_is_turned_away() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let ptx = export_stencil(&d.state);
    let busy = busy_for(our_uid());
    // Ours: accepted before the clients below, so served first.
    let _held = hog(
        &d.socket,
        MAX_CONNECTIONS_PER_UID,
        MAX_CONNECTIONS_PER_UID,
        &busy,
    );
    falls_back(&d, &ptx, &[], &format!("daemon busy: {busy}"));
    let out = d.client(&["status"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        common::text(&out.stderr).contains(&format!("turned this client away: {busy}")),
        "{out:?}"
    );
}

/// The cap in all, taken by other uids' shares: ours has room, yet it is
/// turned away, and `best` and `report` fall back on the export.
#[test]
fn best_falls_back_on_the_export_when_every_place_is_taken() {
    if !root_or_skip("filling the cap in all from uids with room") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (d, _) = daemon_for_two(dir.path());
    let ptx = export_stencil(&d.state);
    let others: Vec<UnixStream> = (0..MAX_CONNECTIONS.div_ceil(MAX_CONNECTIONS_PER_UID))
        .flat_map(|i| connect_as(&d.socket, 4200 + i as u32, MAX_CONNECTIONS_PER_UID))
        .collect();
    wait_turned_away(&others, MAX_CONNECTIONS, &busy_for_all());
    falls_back(&d, &ptx, &[], &format!("daemon busy: {}", busy_for_all()));
}

/// A daemon that accepts nothing (stopped): `best` and `report` fall back
/// once the client's timeout passes.
#[test]
fn best_falls_back_on_the_export_when_the_daemon_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let ptx = export_stencil(&d.state);
    let pid = pid(&d) as i32;
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    falls_back(
        &d,
        &ptx,
        &["--timeout", "0.5"],
        "daemon unreachable: no answer within 0.5 s",
    );
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
}

/// One byte a second, never a newline: answered and closed at the deadline.
#[test]
fn a_slow_client_is_cut_off_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let stream = UnixStream::connect(&d.socket).unwrap();
    let connected = Instant::now();
    let writer = {
        let stream = stream.try_clone().unwrap();
        std::thread::spawn(move || {
            let request = br#"{"version":1,"command":"status"}"#;
            // Until the daemon closes the connection (EPIPE), or 20 s.
            for byte in request.iter().cycle().take(20) {
                if (&stream).write_all(&[*byte]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };
    let (text, _) = answer(&stream, REQUEST_DEADLINE + Duration::from_secs(3));
    let took = connected.elapsed();
    let line = one_line(&text);
    assert!(
        line.contains(&format!(
            "no complete request line within {} s of connecting",
            REQUEST_DEADLINE.as_secs()
        )),
        "{line}"
    );
    assert!(
        took >= REQUEST_DEADLINE - Duration::from_millis(500)
            && took < REQUEST_DEADLINE + Duration::from_secs(2),
        "closed after {took:?}"
    );
    writer.join().unwrap();
}
