//! The socket's bounds (docs/daemon.md, "API") against a real `gevod
//! serve`, over raw streams as a misbehaving client would use them: huge,
//! slow, idle and malformed requests each get one short answer line, and
//! the daemon's memory and threads stay within stated bounds.

use crate::common;

use common::daemon::Daemon;
use gevo_client::proto::{Body, Command, Reply};
use gevod::api::{MAX_CONNECTIONS, MAX_REQUEST_BYTES, REQUEST_DEADLINE};
use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::Path;
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
            Err(e) => panic!("{e}"),
        }
    }
}

/// 300 idle connections at once: [`MAX_CONNECTIONS`] are served (and cut
/// off at the deadline), each of the others is answered at once and closed,
/// and the daemon runs no thread for them.
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
    let busy = format!("too many connections ({MAX_CONNECTIONS}); try again");
    let answered_busy = |got: &[Vec<u8>]| {
        got.iter()
            .filter(|g| String::from_utf8_lossy(g).contains(&busy))
            .count()
    };
    let connected = opened.elapsed();
    let mut most_threads = 0;
    while answered_busy(&got) < OPENED - MAX_CONNECTIONS {
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
    assert_eq!(answered_busy(&got), OPENED - MAX_CONNECTIONS);
    most_threads = most_threads.max(proc_status(pid, "Threads"));
    let bound = idle_threads + MAX_CONNECTIONS as u64 + THREAD_SLACK;
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
