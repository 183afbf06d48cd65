//! The socket's resource bounds. One allowed client (a build script gone
//! wrong will do) must not grow the daemon, hold its threads, or read its
//! own input back at length: connections served at once are capped, in all
//! and per peer uid (so one user's idle connections leave room for the
//! others), and the rest turned away with an answer, a request has one deadline from accept
//! to its newline and a size far below the protocol's, and error messages
//! quote at most a short prefix of what the client sent.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Connections served at once, each on its own thread; the next one is
/// answered "too many connections" and closed.
pub const MAX_CONNECTIONS: usize = 64;

/// Connections of one peer uid served at once (root and the daemon's own
/// user included), well below [`MAX_CONNECTIONS`]: one user's idle or slow
/// connections cannot take every place; the next one of that uid is
/// answered "too many connections from uid N" and closed.
pub const MAX_CONNECTIONS_PER_UID: usize = 16;

/// From accept to the request's newline: a per-read timeout would let a
/// client sending a byte every few seconds hold its thread forever.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// Longest request line read. A request is a command with a kernel name, an
/// arch or a directory (PTX only flows the other way), so a few hundred
/// bytes; the protocol's 64 MiB is for answers.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// From a ready answer to its last byte: a client that stops reading a
/// megabyte of PTX must not hold its thread either.
pub const ANSWER_DEADLINE: Duration = Duration::from_secs(30);

/// Characters of a client's string that an error message quotes.
pub const QUOTE_CHARS: usize = 80;

/// How long a turned-away connection is kept, reading, before it is closed.
const TURN_AWAY_GRACE: Duration = Duration::from_secs(1);
/// Turned-away connections kept at once; more are closed right after their
/// answer.
const TURNED_AWAY_HELD: usize = 256;
const TURN_AWAY_TICK: Duration = Duration::from_millis(20);

/// Why no request line came.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("the request is longer than {limit} bytes (this gevod's limit); a request is one short JSON line")]
    TooLong { limit: usize },
    #[error("no complete request line within {} s of connecting (got {got} bytes); send one JSON line ending in a newline", after.as_secs_f64())]
    Deadline { after: Duration, got: usize },
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// At most [`QUOTE_CHARS`] characters of `s`, then "..." where it was cut.
pub fn quote(s: &str) -> Cow<'_, str> {
    gevo_client::text::shorten(s, QUOTE_CHARS)
}

/// [`quote`] over a path, lossy for bytes that are not UTF-8.
pub fn quote_path(p: &Path) -> String {
    quote(&p.to_string_lossy()).into_owned()
}

/// `value` with every string and key cut as [`quote`] cuts it: serde's
/// messages quote what they could not use ("unknown variant `aaaa...`").
pub fn quoted_value(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(quote(s).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(quoted_value).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (quote(k).into_owned(), quoted_value(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Counts the connections being served, in all and per peer uid; a
/// [`Permit`] is one of them.
#[derive(Debug, Clone)]
pub struct Connections {
    counts: Arc<Mutex<Counts>>,
    max: usize,
    per_uid: usize,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    /// Only uids with a connection served: at most `max` entries.
    by_uid: HashMap<u32, usize>,
}

/// Why a connection got no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Its uid already has its `per_uid` connections served.
    Uid,
    /// All `max` places are taken.
    All,
}

/// One connection's place among the [`Connections`], given back on drop.
#[derive(Debug)]
pub struct Permit {
    counts: Arc<Mutex<Counts>>,
    uid: u32,
}

/// The counts, also after a panic elsewhere (they are updated in one step).
fn lock(counts: &Mutex<Counts>) -> MutexGuard<'_, Counts> {
    counts
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Connections {
    pub fn new(max: usize, per_uid: usize) -> Connections {
        Connections {
            counts: Arc::default(),
            max,
            per_uid,
        }
    }

    /// A place for a connection of `uid`, or why there is none: its uid's
    /// share is taken (said first: that is the asker's own doing), or all
    /// places are.
    pub fn take(&self, uid: u32) -> Result<Permit, Full> {
        let mut counts = lock(&self.counts);
        if counts.by_uid.get(&uid).copied().unwrap_or(0) >= self.per_uid {
            return Err(Full::Uid);
        }
        if counts.total >= self.max {
            return Err(Full::All);
        }
        counts.total += 1;
        *counts.by_uid.entry(uid).or_insert(0) += 1;
        Ok(Permit {
            counts: self.counts.clone(),
            uid,
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut counts = lock(&self.counts);
        counts.total -= 1;
        if let Some(n) = counts.by_uid.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                counts.by_uid.remove(&self.uid);
            }
        }
    }
}

/// Reads one line (without its newline; end of input ends it too) by
/// `deadline`, holding at most `limit` + 1 bytes of it.
pub fn read_line(
    mut stream: &UnixStream,
    limit: usize,
    deadline: Instant,
    after: Duration,
) -> Result<Vec<u8>, RequestError> {
    let mut line = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(RequestError::Deadline {
                after,
                got: line.len(),
            });
        }
        stream.set_read_timeout(Some(left))?;
        let want = chunk.len().min(limit + 1 - line.len());
        let n = match stream.read(&mut chunk[..want]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_timeout(&e) => {
                return Err(RequestError::Deadline {
                    after,
                    got: line.len(),
                })
            }
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            return Ok(line);
        }
        let (got, ended) = match chunk[..n].iter().position(|&b| b == b'\n') {
            Some(end) => (&chunk[..end], true),
            None => (&chunk[..n], false),
        };
        line.extend_from_slice(got);
        if line.len() > limit {
            return Err(RequestError::TooLong { limit });
        }
        if ended {
            return Ok(line);
        }
    }
}

/// Reads and drops input up to a newline or its end, at most `most` bytes,
/// by `deadline`. After a too-long request has been answered, this lets a
/// client that writes its whole line before reading finish writing and
/// read the answer, instead of failing with EPIPE.
pub fn discard_line(mut stream: &UnixStream, most: usize, deadline: Instant) {
    let mut chunk = vec![0u8; 64 << 10];
    let mut read = 0;
    while read < most {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) if chunk[..n].contains(&b'\n') => return,
            Ok(n) => read += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Writes all of `bytes` by `deadline`.
pub fn write_all_by(
    mut stream: &UnixStream,
    mut bytes: &[u8],
    deadline: Instant,
) -> io::Result<()> {
    while !bytes.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Answers the connections beyond the caps, all on one thread: each gets its
/// answer at once and is kept open a moment, reading, since closing a
/// connection whose client has not written its request yet would fail that
/// write before the client reads the answer.
pub struct TurnAway {
    queue: SyncSender<(UnixStream, Arc<[u8]>)>,
}

impl TurnAway {
    /// Starts the thread.
    pub fn start() -> io::Result<TurnAway> {
        let (queue, arrivals) = std::sync::mpsc::sync_channel(TURNED_AWAY_HELD);
        std::thread::Builder::new()
            .name("gevod-api-busy".into())
            .spawn(move || turn_away(arrivals))?;
        Ok(TurnAway { queue })
    }

    /// Answers `stream` with `answer` (one line) and closes it, now or after
    /// the grace period.
    pub fn hand_over(&self, stream: UnixStream, answer: Arc<[u8]>) {
        match self.queue.try_send((stream, answer)) {
            Ok(()) => {}
            Err(TrySendError::Full((stream, answer)))
            | Err(TrySendError::Disconnected((stream, answer))) => {
                let _ = answer_now(&stream, &answer);
            }
        }
    }
}

fn turn_away(arrivals: Receiver<(UnixStream, Arc<[u8]>)>) {
    let mut held: Vec<(UnixStream, Instant)> = Vec::new();
    loop {
        // Block only while nothing is held; else wake to read and expire.
        let first = if held.is_empty() {
            match arrivals.recv() {
                Ok(stream) => Some(stream),
                Err(_) => return,
            }
        } else {
            arrivals.recv_timeout(TURN_AWAY_TICK).ok()
        };
        for (stream, answer) in first.into_iter().chain(arrivals.try_iter()) {
            if answer_now(&stream, &answer).is_ok() && held.len() < TURNED_AWAY_HELD {
                held.push((stream, Instant::now() + TURN_AWAY_GRACE));
            }
        }
        let now = Instant::now();
        held.retain(|(stream, until)| now < *until && !request_over(stream));
    }
}

/// Writes `answer` without waiting: it is short and the socket fresh.
fn answer_now(mut stream: &UnixStream, answer: &[u8]) -> io::Result<()> {
    stream.set_nonblocking(true)?;
    match stream.write(answer)? {
        n if n == answer.len() => Ok(()),
        _ => Err(io::ErrorKind::WriteZero.into()),
    }
}

/// Reads what a turned-away client has sent so far (a bounded amount): true
/// once its request line or its input ended, or the connection failed.
fn request_over(mut stream: &UnixStream) -> bool {
    let mut chunk = [0u8; 4096];
    for _ in 0..16 {
        match stream.read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) if chunk[..n].contains(&b'\n') => return true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return e.kind() != io::ErrorKind::WouldBlock,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    #[test]
    fn quotes_keep_a_short_prefix() {
        let long = "a".repeat(1000);
        let cut = format!("{}...", "a".repeat(QUOTE_CHARS));
        let exact = "é".repeat(QUOTE_CHARS);
        for (input, expected) in [
            ("stencil", "stencil"),
            ("", ""),
            (exact.as_str(), exact.as_str()),
            (long.as_str(), cut.as_str()),
        ] {
            assert_eq!(quote(input), expected, "{input:?}");
        }
        let multibyte = "é".repeat(QUOTE_CHARS + 1);
        assert_eq!(quote(&multibyte).chars().count(), QUOTE_CHARS + 3);
        let value = serde_json::json!({"kernel": long, "n": [long, 1], &long: true});
        let quoted = serde_json::to_string(&quoted_value(&value)).unwrap();
        assert!(quoted.len() < 4 * (QUOTE_CHARS + 20), "{quoted}");
        assert!(
            quoted.contains(&format!("\"kernel\":\"{cut}\"")),
            "{quoted}"
        );
    }

    #[test]
    fn connections_are_counted_up_to_the_cap() {
        let connections = Connections::new(2, 2);
        let a = connections.take(7).unwrap();
        let b = connections.take(7).unwrap();
        assert_eq!(connections.take(8).unwrap_err(), Full::All);
        drop(a);
        let c = connections.take(8).unwrap();
        assert_eq!(connections.take(8).unwrap_err(), Full::All);
        drop((b, c));
        let counts = lock(&connections.counts);
        assert_eq!((counts.total, counts.by_uid.len()), (0, 0));
    }

    /// One uid's share is full while others still get places, up to the
    /// cap in all; its places come back as its connections end.
    #[test]
    fn one_uid_cannot_take_every_place() {
        let connections = Connections::new(5, 2);
        let hog: Vec<Permit> = (0..2).map(|_| connections.take(0).unwrap()).collect();
        assert_eq!(connections.take(0).unwrap_err(), Full::Uid);
        let others: Vec<Permit> = [1000, 1000, 1001]
            .into_iter()
            .map(|uid| connections.take(uid).unwrap())
            .collect();
        // All five taken: a uid with room is told so; a full one, its share.
        assert_eq!(connections.take(1002).unwrap_err(), Full::All);
        assert_eq!(connections.take(1000).unwrap_err(), Full::Uid);
        drop(hog);
        assert_eq!(connections.take(1000).unwrap_err(), Full::Uid);
        let again = connections.take(0).unwrap();
        drop((others, again));
        let counts = lock(&connections.counts);
        assert_eq!((counts.total, counts.by_uid.len()), (0, 0));
    }

    /// What `read_line` makes of `sent` (the writer then closes its end).
    fn read(sent: &[u8], limit: usize) -> Result<Vec<u8>, String> {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        theirs.write_all(sent).unwrap();
        drop(theirs);
        let deadline = Instant::now() + Duration::from_secs(5);
        read_line(&ours, limit, deadline, Duration::from_secs(5)).map_err(|e| e.to_string())
    }

    #[test]
    fn lines_are_read_to_their_newline_within_the_limit() {
        let line = |s: &str| Ok(s.as_bytes().to_vec());
        let too_long = Err("the request is longer than 8 bytes (this gevod's limit); a request is one short JSON line".to_string());
        for (sent, expected) in [
            (&b"{}\n"[..], line("{}")),
            (b"{}\nmore", line("{}")),
            (b"no newline", too_long.clone()),
            (b"12345678\n", line("12345678")),
            (b"123456789\n", too_long.clone()),
            (b"1234567", line("1234567")),
            (b"", line("")),
            (b"\xff\xfe\n", Ok(vec![0xff, 0xfe])),
        ] {
            assert_eq!(read(sent, 8), expected, "{sent:?}");
        }
    }

    #[test]
    fn a_slow_line_meets_the_deadline() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        theirs.write_all(b"{\"ver").unwrap();
        let after = Duration::from_millis(300);
        let started = Instant::now();
        let e = read_line(&ours, 100, started + after, after).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(
            e.to_string(),
            "no complete request line within 0.3 s of connecting (got 5 bytes); send one JSON line ending in a newline"
        );
    }

    #[test]
    fn a_turned_away_client_gets_its_answer_and_then_the_end() {
        let turn_away = TurnAway::start().unwrap();
        let (ours, theirs) = UnixStream::pair().unwrap();
        turn_away.hand_over(ours, b"busy\n".to_vec().into());
        (&theirs).write_all(b"{\"version\":1}\n").unwrap();
        theirs
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut lines = std::io::BufReader::new(&theirs).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "busy");
        assert!(lines.next().is_none());
    }
}
