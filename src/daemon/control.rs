//! The control socket: JSON lines over a Unix socket at `$DSH_HOME/dsh-chapters/daemon.sock`
//! (mode 0600 in a 0700 home: only its owner can reach it).
//!
//! On connect the daemon writes its hello, `{"v":1,"hello":"dsh-chapters-daemon","pid":…,
//! "version":"…"}`. Then each request is one line, `{"v":1,"request":"status"}` (also
//! `sync-now`, `reload`, `stop`), answered by one line `{"v":1,"ok":true,…}` or
//! `{"v":1,"ok":false,"error":"…"}`. A line longer than [`MAX_REQUEST_BYTES`] is refused
//! with an error and the connection closed; so is a request line not complete within
//! [`REQUEST_DEADLINE`] of the hello or of the previous answer — a deadline over the whole
//! line, so a client trickling a byte at a time cannot hold a connection. Connections are
//! served on threads of their own, at most [`MAX_CONNECTIONS`]; when all are taken, a new
//! client closes the one that has waited longest for its request line (never one whose
//! request is being answered), so slow or idle clients can never lock the socket out.
//! The parsing and framing here are pure; [`serve`] and [`Client`] are the thin socket
//! shell around them.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The protocol version this program speaks.
pub const PROTOCOL_VERSION: u64 = 1;
/// The hello's name.
pub const HELLO: &str = "dsh-chapters-daemon";
/// The longest request line accepted, newline included.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// A request line must be complete this long after the hello or the previous answer, or
/// the connection is closed (also the deadline of each answer's write).
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// Connections served at once; a new one beyond closes the one waiting longest for its
/// request line, or is refused with an error line when every one is being answered.
pub const MAX_CONNECTIONS: usize = 8;
/// How long a connection waits for the daemon's answer to its request.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// What a client may ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Status,
    SyncNow,
    Reload,
    Stop,
}

impl Request {
    pub fn as_str(self) -> &'static str {
        match self {
            Request::Status => "status",
            Request::SyncNow => "sync-now",
            Request::Reload => "reload",
            Request::Stop => "stop",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("request line is longer than {MAX_REQUEST_BYTES} bytes; refused")]
    TooLong,
    #[error("request is not valid JSON: {0}")]
    NotJson(String),
    #[error("request must be a JSON object with `v` and `request`")]
    NotAnObject,
    #[error("protocol version {0} is not spoken here (this daemon speaks v{PROTOCOL_VERSION})")]
    Version(String),
    #[error("unknown request {0:?}; the requests are status, sync-now, reload, stop")]
    Unknown(String),
    #[error("the daemon's hello is not a dsh-chapters hello: {0}")]
    BadHello(String),
}

/// Parse one request line (without its newline).
pub fn parse_request(line: &[u8]) -> Result<Request, ProtocolError> {
    if line.len() >= MAX_REQUEST_BYTES {
        return Err(ProtocolError::TooLong);
    }
    let value: Value =
        serde_json::from_slice(line).map_err(|e| ProtocolError::NotJson(e.to_string()))?;
    let Some(object) = value.as_object() else {
        return Err(ProtocolError::NotAnObject);
    };
    match object.get("v") {
        Some(v) if v.as_u64() == Some(PROTOCOL_VERSION) => {}
        Some(v) => return Err(ProtocolError::Version(v.to_string())),
        None => return Err(ProtocolError::NotAnObject),
    }
    let Some(name) = object.get("request").and_then(Value::as_str) else {
        return Err(ProtocolError::NotAnObject);
    };
    match name {
        "status" => Ok(Request::Status),
        "sync-now" => Ok(Request::SyncNow),
        "reload" => Ok(Request::Reload),
        "stop" => Ok(Request::Stop),
        other => Err(ProtocolError::Unknown(other.chars().take(64).collect())),
    }
}

/// The request line a client sends.
pub fn request_line(request: Request) -> String {
    format!(
        "{}\n",
        json!({"v": PROTOCOL_VERSION, "request": request.as_str()})
    )
}

/// The hello line.
pub fn hello_line(pid: u32) -> String {
    format!(
        "{}\n",
        json!({"v": PROTOCOL_VERSION, "hello": HELLO, "pid": pid, "version": env!("CARGO_PKG_VERSION")})
    )
}

/// Check a hello line; returns the daemon's pid.
pub fn parse_hello(line: &str) -> Result<u32, ProtocolError> {
    let value: Value = serde_json::from_str(line.trim_end())
        .map_err(|e| ProtocolError::BadHello(e.to_string()))?;
    if value.get("hello").and_then(Value::as_str) != Some(HELLO) {
        return Err(ProtocolError::BadHello(line.chars().take(120).collect()));
    }
    match value.get("v").and_then(Value::as_u64) {
        Some(PROTOCOL_VERSION) => {}
        other => {
            return Err(ProtocolError::Version(
                other.map_or("none".into(), |v| v.to_string()),
            ))
        }
    }
    value
        .get("pid")
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok())
        .ok_or_else(|| ProtocolError::BadHello("no pid".into()))
}

/// An answer line: `ok` with `body`'s fields merged in, or an error.
pub fn answer_line(result: &Result<Value, String>) -> String {
    let mut out = json!({"v": PROTOCOL_VERSION});
    match result {
        Ok(body) => {
            out["ok"] = json!(true);
            if let Some(fields) = body.as_object() {
                for (k, v) in fields {
                    out[k.as_str()] = v.clone();
                }
            }
        }
        Err(e) => {
            out["ok"] = json!(false);
            out["error"] = json!(e);
        }
    }
    format!("{out}\n")
}

/// Read one line of at most [`MAX_REQUEST_BYTES`] without buffering more than that.
/// `Ok(None)` at a clean end of stream.
pub fn read_bounded_line(reader: &mut impl BufRead) -> Result<Option<Vec<u8>>, ReadLineError> {
    let mut line = Vec::new();
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadLineError::Io(e)),
        };
        if available.is_empty() {
            return if line.is_empty() {
                Ok(None)
            } else {
                Ok(Some(line))
            };
        }
        let (take, done) = match memchr::memchr(b'\n', available) {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if line.len() + take > MAX_REQUEST_BYTES {
            return Err(ReadLineError::TooLong);
        }
        line.extend_from_slice(&available[..take]);
        reader.consume(take);
        if done {
            line.pop();
            return Ok(Some(line));
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReadLineError {
    #[error("request line is longer than {MAX_REQUEST_BYTES} bytes; refused")]
    TooLong,
    #[error("{0}")]
    Io(io::Error),
}

/// What the socket server hands the daemon: a request and where to send its answer.
pub struct Incoming {
    pub request: Request,
    pub reply: std::sync::mpsc::Sender<Result<Value, String>>,
}

/// The connections being served: what eviction needs to choose and close one.
#[derive(Default)]
struct Registry {
    next_id: u64,
    conns: BTreeMap<u64, Conn>,
}

struct Conn {
    /// A handle on the connection's socket, to shut it down from the accept thread.
    stream: UnixStream,
    /// When it began waiting for its current request line; `None` while its request is
    /// being answered (never evicted then).
    waiting_since: Option<Instant>,
}

type Shared = Arc<Mutex<Registry>>;

fn registry(shared: &Shared) -> std::sync::MutexGuard<'_, Registry> {
    // A connection thread that panicked leaves the map usable: recover it.
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Registry {
    /// Make room for a new connection: `true` when there is (a slot free, or the
    /// connection waiting longest for its line was closed to free one).
    fn make_room(&mut self) -> bool {
        if self.conns.len() < MAX_CONNECTIONS {
            return true;
        }
        let oldest = self
            .conns
            .iter()
            .filter_map(|(id, c)| c.waiting_since.map(|t| (t, *id)))
            .min();
        let Some((_, id)) = oldest else {
            return false;
        };
        if let Some(conn) = self.conns.remove(&id) {
            // Its thread sees the end of stream and exits; the slot is ours from now.
            let _ = conn.stream.shutdown(Shutdown::Both);
        }
        true
    }
}

/// Accept connections until the listener fails; each is served on its own short-lived
/// thread (at most [`MAX_CONNECTIONS`] at once, see the module's note on eviction).
/// `forward` hands a request to the daemon.
pub fn serve(
    listener: UnixListener,
    pid: u32,
    forward: impl Fn(Incoming) -> bool + Send + Sync + 'static,
) {
    let forward = Arc::new(forward);
    let shared: Shared = Arc::default();
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else {
            continue;
        };
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        let id = {
            let mut reg = registry(&shared);
            if !reg.make_room() {
                drop(reg);
                let _ = stream.set_write_timeout(Some(REQUEST_DEADLINE));
                let _ = stream.write_all(
                    answer_line(&Err(format!(
                        "too many control requests in progress (at most {MAX_CONNECTIONS}); try again"
                    )))
                    .as_bytes(),
                );
                continue;
            }
            let id = reg.next_id;
            reg.next_id += 1;
            reg.conns.insert(
                id,
                Conn {
                    stream: handle,
                    waiting_since: Some(Instant::now()),
                },
            );
            id
        };
        let forward = Arc::clone(&forward);
        let conn_shared = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("control-conn".into())
            .spawn(move || {
                if let Err(e) = serve_one(stream, pid, &*forward, &conn_shared, id) {
                    tracing::debug!(error = %e, "control connection ended");
                }
                registry(&conn_shared).conns.remove(&id);
            });
        if spawned.is_err() {
            registry(&shared).conns.remove(&id);
        }
    }
}

/// A socket read under a deadline over the whole request line: each read waits at most
/// what is left of it, and once it has passed every read fails with `TimedOut`.
struct DeadlineReader {
    stream: UnixStream,
    deadline: Instant,
}

impl Read for DeadlineReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request line not complete in time",
            ));
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

fn set_waiting(shared: &Shared, id: u64, waiting: Option<Instant>) -> bool {
    match registry(shared).conns.get_mut(&id) {
        Some(conn) => {
            conn.waiting_since = waiting;
            true
        }
        // Evicted meanwhile: its socket is shut down.
        None => false,
    }
}

fn serve_one(
    stream: UnixStream,
    pid: u32,
    forward: &(dyn Fn(Incoming) -> bool + Send + Sync),
    shared: &Shared,
    id: u64,
) -> io::Result<()> {
    stream.set_write_timeout(Some(REQUEST_DEADLINE))?;
    let mut writer = stream.try_clone()?;
    writer.write_all(hello_line(pid).as_bytes())?;
    let mut reader = BufReader::with_capacity(
        8 * 1024,
        DeadlineReader {
            stream,
            deadline: Instant::now() + REQUEST_DEADLINE,
        },
    );
    loop {
        let line = match read_bounded_line(&mut reader) {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(()),
            Err(ReadLineError::TooLong) => {
                writer
                    .write_all(answer_line(&Err(ProtocolError::TooLong.to_string())).as_bytes())?;
                return Ok(());
            }
            Err(ReadLineError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                let _ = writer.write_all(
                    answer_line(&Err(format!(
                        "no complete request line within {} s; closing",
                        REQUEST_DEADLINE.as_secs()
                    )))
                    .as_bytes(),
                );
                return Ok(());
            }
            Err(ReadLineError::Io(e)) => return Err(e),
        };
        if !set_waiting(shared, id, None) {
            return Ok(());
        }
        let answer = match parse_request(&line) {
            Err(e) => Err(e.to_string()),
            Ok(request) => {
                let (tx, rx) = std::sync::mpsc::channel();
                if forward(Incoming { request, reply: tx }) {
                    rx.recv_timeout(ANSWER_WAIT)
                        .unwrap_or_else(|_| Err("the daemon did not answer in time".into()))
                } else {
                    Err("the daemon is stopping".into())
                }
            }
        };
        writer.write_all(answer_line(&answer).as_bytes())?;
        let now = Instant::now();
        reader.get_mut().deadline = now + REQUEST_DEADLINE;
        if !set_waiting(shared, id, Some(now)) {
            return Ok(());
        }
    }
}

/// A client connection: reads the hello, then sends requests.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    pub pid: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no daemon answers on {socket}: {source}; start one with `chapters daemon` (or `chapters daemon install`)")]
    Connect {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the daemon's socket {socket}: {source}")]
    Io {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the daemon's socket {socket}: {source}")]
    Protocol {
        socket: PathBuf,
        #[source]
        source: ProtocolError,
    },
    /// The daemon closed the connection without answering — a daemon that is exiting (a
    /// `stop` it accepted can end the process before its answer is written).
    #[error("the daemon on {socket} closed the connection without answering")]
    Closed { socket: PathBuf },
    #[error("the daemon refused {request}: {error}")]
    Refused {
        request: &'static str,
        error: String,
    },
}

impl Client {
    pub fn connect(socket: &Path, timeout: Duration) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(socket).map_err(|source| ClientError::Connect {
            socket: socket.to_path_buf(),
            source,
        })?;
        let io_err = |source| ClientError::Io {
            socket: socket.to_path_buf(),
            source,
        };
        stream.set_read_timeout(Some(timeout)).map_err(io_err)?;
        let writer = stream.try_clone().map_err(io_err)?;
        let mut reader = BufReader::new(stream);
        let mut hello = String::new();
        (&mut reader)
            .take(MAX_REQUEST_BYTES as u64)
            .read_line(&mut hello)
            .map_err(io_err)?;
        let pid = parse_hello(&hello).map_err(|source| ClientError::Protocol {
            socket: socket.to_path_buf(),
            source,
        })?;
        Ok(Client {
            reader,
            writer,
            pid,
        })
    }

    /// Send one request; the answer's fields on success.
    pub fn request(&mut self, request: Request, socket: &Path) -> Result<Value, ClientError> {
        let io_err = |source| ClientError::Io {
            socket: socket.to_path_buf(),
            source,
        };
        self.writer
            .write_all(request_line(request).as_bytes())
            .map_err(io_err)?;
        let mut line = String::new();
        (&mut self.reader)
            .take(64 << 20)
            .read_line(&mut line)
            .map_err(io_err)?;
        if line.is_empty() {
            return Err(ClientError::Closed {
                socket: socket.to_path_buf(),
            });
        }
        let value: Value =
            serde_json::from_str(line.trim_end()).map_err(|e| ClientError::Protocol {
                socket: socket.to_path_buf(),
                source: ProtocolError::NotJson(e.to_string()),
            })?;
        if value.get("ok").and_then(Value::as_bool) == Some(true) {
            Ok(value)
        } else {
            Err(ClientError::Refused {
                request: request.as_str(),
                error: value
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given")
                    .to_owned(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse() {
        for r in [
            Request::Status,
            Request::SyncNow,
            Request::Reload,
            Request::Stop,
        ] {
            let line = request_line(r);
            assert!(line.ends_with('\n'));
            assert_eq!(parse_request(line.trim_end().as_bytes()), Ok(r));
        }
    }

    #[test]
    fn garbled_and_hostile_requests_are_refused_by_name() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "not valid JSON"),
            (b"{", "not valid JSON"),
            (b"\xff\xfe", "not valid JSON"),
            (b"[1,2]", "JSON object"),
            (b"\"status\"", "JSON object"),
            (br#"{"request":"status"}"#, "JSON object"),
            (br#"{"v":2,"request":"status"}"#, "version 2"),
            (br#"{"v":"1","request":"status"}"#, "version \"1\""),
            (br#"{"v":1}"#, "JSON object"),
            (br#"{"v":1,"request":7}"#, "JSON object"),
            (br#"{"v":1,"request":"rm -rf /"}"#, "unknown request"),
        ];
        for (line, want) in cases {
            let err = parse_request(line).unwrap_err().to_string();
            assert!(err.contains(want), "{line:?}: {err}");
        }
        let huge = vec![b' '; MAX_REQUEST_BYTES];
        assert_eq!(parse_request(&huge), Err(ProtocolError::TooLong));
        // An unknown name is echoed back cut short, never whole.
        let long_name = format!(r#"{{"v":1,"request":"{}"}}"#, "x".repeat(10_000));
        let err = parse_request(long_name.as_bytes()).unwrap_err().to_string();
        assert!(err.len() < 200, "{err}");
    }

    #[test]
    fn bounded_lines() {
        let mut r = BufReader::with_capacity(7, &b"abc\ndef\n\nlast"[..]);
        assert_eq!(read_bounded_line(&mut r).unwrap(), Some(b"abc".to_vec()));
        assert_eq!(read_bounded_line(&mut r).unwrap(), Some(b"def".to_vec()));
        assert_eq!(read_bounded_line(&mut r).unwrap(), Some(b"".to_vec()));
        assert_eq!(read_bounded_line(&mut r).unwrap(), Some(b"last".to_vec()));
        assert_eq!(read_bounded_line(&mut r).unwrap(), None);
        // Over the cap: refused before the rest is read.
        let big = vec![b'a'; MAX_REQUEST_BYTES * 3];
        let mut r = BufReader::new(&big[..]);
        assert!(matches!(
            read_bounded_line(&mut r),
            Err(ReadLineError::TooLong)
        ));
        // Exactly at the cap with its newline: refused too (the line itself is cap bytes).
        let mut at_cap = vec![b'a'; MAX_REQUEST_BYTES];
        at_cap.push(b'\n');
        let mut r = BufReader::new(&at_cap[..]);
        assert!(matches!(
            read_bounded_line(&mut r),
            Err(ReadLineError::TooLong)
        ));
    }

    #[test]
    fn hello_round_trip_and_refusals() {
        assert_eq!(parse_hello(&hello_line(42)), Ok(42));
        assert!(parse_hello("").is_err());
        assert!(parse_hello(r#"{"v":1,"hello":"other","pid":1}"#).is_err());
        assert!(matches!(
            parse_hello(r#"{"v":9,"hello":"dsh-chapters-daemon","pid":1}"#),
            Err(ProtocolError::Version(_))
        ));
        assert!(parse_hello(r#"{"v":1,"hello":"dsh-chapters-daemon","pid":-1}"#).is_err());
    }

    #[test]
    fn answers() {
        let ok: Value = serde_json::from_str(&answer_line(&Ok(json!({"queued": 2})))).unwrap();
        assert_eq!(ok, json!({"v": 1, "ok": true, "queued": 2}));
        let err: Value = serde_json::from_str(&answer_line(&Err("no".into()))).unwrap();
        assert_eq!(err, json!({"v": 1, "ok": false, "error": "no"}));
    }

    #[test]
    fn clients_stuck_mid_request_cannot_lock_the_socket_out() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("d.sock");
        let listener = UnixListener::bind(&sock).unwrap();
        std::thread::spawn(move || {
            serve(listener, 7, |incoming: Incoming| {
                let _ = incoming
                    .reply
                    .send(Ok(json!({"echo": incoming.request.as_str()})));
                true
            })
        });
        // More clients than slots, each stuck half-way through a request line.
        let mut stuck = Vec::new();
        for _ in 0..MAX_CONNECTIONS + 3 {
            let mut s = UnixStream::connect(&sock).unwrap();
            let mut hello = String::new();
            BufReader::new(s.try_clone().unwrap())
                .read_line(&mut hello)
                .unwrap();
            let _ = s.write_all(b"{\"v\":1,");
            stuck.push(s);
        }
        // A client with a whole request is served while they hang.
        let mut c = Client::connect(&sock, Duration::from_secs(5)).unwrap();
        assert_eq!(c.request(Request::Status, &sock).unwrap()["echo"], "status");
        // A served client is not evicted while it waits for its answer, nor after.
        assert_eq!(c.request(Request::Stop, &sock).unwrap()["echo"], "stop");
        drop(stuck);
    }

    /// A daemon that exits on `stop` may close before its answer is written: the client
    /// says so as its own error, never as garbled JSON.
    #[test]
    fn a_connection_closed_without_an_answer_is_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("d.sock");
        let listener = UnixListener::bind(&sock).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(hello_line(7).as_bytes()).unwrap();
            let mut line = String::new();
            BufReader::new(s.try_clone().unwrap())
                .read_line(&mut line)
                .unwrap();
            // Gone without answering.
        });
        let mut c = Client::connect(&sock, Duration::from_secs(5)).unwrap();
        let err = c.request(Request::Stop, &sock).unwrap_err();
        assert!(matches!(err, ClientError::Closed { .. }), "{err}");
        assert!(!err.to_string().contains("JSON"), "{err}");
        server.join().unwrap();
    }

    #[test]
    fn a_served_socket_survives_hostile_clients() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("d.sock");
        let listener = UnixListener::bind(&sock).unwrap();
        std::thread::spawn(move || {
            serve(listener, 7, |incoming: Incoming| {
                let _ = incoming
                    .reply
                    .send(Ok(json!({"echo": incoming.request.as_str()})));
                true
            })
        });
        // A huge line: an error answer, then the connection closes.
        let mut s = UnixStream::connect(&sock).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut hello = String::new();
        r.read_line(&mut hello).unwrap();
        assert_eq!(parse_hello(&hello), Ok(7));
        let _ = s.write_all(&vec![b'x'; MAX_REQUEST_BYTES + 10]);
        let mut answer = String::new();
        r.read_line(&mut answer).unwrap();
        assert!(answer.contains("longer than"), "{answer}");
        // Garbage: an error answer, and the connection still serves.
        let mut c = Client::connect(&sock, Duration::from_secs(5)).unwrap();
        c.writer.write_all(b"garbage\n").unwrap();
        let mut answer = String::new();
        c.reader.read_line(&mut answer).unwrap();
        assert!(answer.contains("\"ok\":false"), "{answer}");
        let v = c.request(Request::Status, &sock).unwrap();
        assert_eq!(v["echo"], "status");
    }
}
