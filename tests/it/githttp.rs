//! A small smart-HTTP git server for tests: a CGI host around `git http-backend` on
//! 127.0.0.1, std only (a thread per connection, one request per connection with
//! `Connection: close`). With a token set it requires `Authorization: Basic
//! base64(<any user>:<token>)` and answers `401` with `WWW-Authenticate` otherwise.
//! Also: [`SilentServer`], which accepts connections and never answers, and
//! [`closed_port_url`], where nothing listens.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const MAX_HEAD: usize = 64 * 1024;
/// An idle client is dropped after this, so no connection thread lives forever.
const IDLE: Duration = Duration::from_secs(60);

struct State {
    root: PathBuf,
    token: Mutex<Option<String>>,
    /// The user name the token must come with (a forge that checks it); `None`: any.
    user: Mutex<Option<String>>,
    stop: AtomicBool,
    chunked_requests: AtomicUsize,
    unauthorized: AtomicUsize,
}

pub struct GitHttpServer {
    addr: SocketAddr,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

impl GitHttpServer {
    /// Serve every repository under `project_root` (e.g. `<root>/pool.git`).
    pub fn start(project_root: &Path, token: Option<&str>) -> GitHttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(State {
            root: project_root.to_path_buf(),
            token: Mutex::new(token.map(str::to_owned)),
            user: Mutex::new(None),
            stop: AtomicBool::new(false),
            chunked_requests: AtomicUsize::new(0),
            unauthorized: AtomicUsize::new(0),
        });
        let shared = Arc::clone(&state);
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let state = Arc::clone(&shared);
                std::thread::spawn(move || {
                    // A client that went away mid-request is not the server's problem.
                    let _ = serve(stream, &state);
                });
            }
        });
        GitHttpServer {
            addr,
            state,
            accept: Some(accept),
        }
    }

    pub fn url(&self, repo_name: &str) -> String {
        format!("http://{}/{repo_name}", self.addr)
    }

    /// Change (or revoke, or drop) the required token; applies to the next request.
    pub fn set_token(&self, token: Option<String>) {
        *self.state.token.lock().expect("token lock") = token;
    }

    /// Require this user name with the token (or any, with `None`).
    pub fn set_user(&self, user: Option<&str>) {
        *self.state.user.lock().expect("user lock") = user.map(str::to_owned);
    }

    /// How many requests came with a chunked body (git sends large pushes that way).
    pub fn chunked_requests(&self) -> usize {
        self.state.chunked_requests.load(Ordering::SeqCst)
    }

    /// How many requests were answered 401.
    pub fn unauthorized(&self) -> usize {
        self.state.unauthorized.load(Ordering::SeqCst)
    }

    pub fn stop(&mut self) {
        if let Some(accept) = self.accept.take() {
            self.state.stop.store(true, Ordering::SeqCst);
            // Wake the accept loop so it sees the flag.
            let _ = TcpStream::connect(self.addr);
            let _ = accept.join();
        }
    }
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Request {
    method: String,
    path: String,
    query: String,
    /// Header names lowercased, in arrival order.
    headers: Vec<(String, String)>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn bad_request(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// Request line and headers; `None` when the client closed before sending any.
fn read_head(reader: &mut impl BufRead) -> io::Result<Option<Request>> {
    let mut total = 0;
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        let n = reader.by_ref().take(MAX_HEAD as u64).read_line(&mut line)?;
        if n == 0 {
            if lines.is_empty() {
                return Ok(None);
            }
            return Err(bad_request("truncated request head"));
        }
        total += n;
        if total > MAX_HEAD {
            return Err(bad_request("request head too large"));
        }
        let line = line.trim_end_matches(['\r', '\n']).to_owned();
        if line.is_empty() {
            break;
        }
        lines.push(line);
    }
    let mut request_line = lines[0].split(' ');
    let (Some(method), Some(target), Some(_version)) = (
        request_line.next(),
        request_line.next(),
        request_line.next(),
    ) else {
        return Err(bad_request("bad request line"));
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut headers = Vec::new();
    for line in &lines[1..] {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| bad_request("bad header line"))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    Ok(Some(Request {
        method: method.to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        headers,
    }))
}

/// Copy the request body to `out`, decoding `Transfer-Encoding: chunked`.
fn copy_body(req: &Request, reader: &mut impl BufRead, out: &mut impl Write) -> io::Result<()> {
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    if !chunked {
        let len: u64 = match req.header("content-length") {
            Some(v) => v.parse().map_err(|_| bad_request("bad Content-Length"))?,
            None => 0,
        };
        let copied = io::copy(&mut reader.by_ref().take(len), out)?;
        if copied != len {
            return Err(bad_request("body shorter than Content-Length"));
        }
        return Ok(());
    }
    loop {
        let mut size_line = String::new();
        reader.by_ref().take(1024).read_line(&mut size_line)?;
        let size_hex = size_line.trim().split(';').next().unwrap_or("");
        let size = u64::from_str_radix(size_hex, 16).map_err(|_| bad_request("bad chunk size"))?;
        if size == 0 {
            // Trailers, then the empty line.
            loop {
                let mut trailer = String::new();
                let n = reader
                    .by_ref()
                    .take(MAX_HEAD as u64)
                    .read_line(&mut trailer)?;
                if n == 0 || trailer.trim().is_empty() {
                    return Ok(());
                }
            }
        }
        let copied = io::copy(&mut reader.by_ref().take(size), out)?;
        if copied != size {
            return Err(bad_request("truncated chunk"));
        }
        let mut crlf = String::new();
        reader.by_ref().take(2).read_line(&mut crlf)?;
    }
}

fn authorized(req: &Request, token: Option<&str>, user: Option<&str>) -> bool {
    let Some(token) = token else { return true };
    let Some(credentials) = req
        .header("authorization")
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b64| base64_decode(b64.trim()))
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&credentials);
    text.split_once(':')
        .is_some_and(|(sent, password)| password == token && user.is_none_or(|u| u == sent))
}

fn serve(stream: TcpStream, state: &State) -> io::Result<()> {
    stream.set_read_timeout(Some(IDLE))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let Some(req) = read_head(&mut reader)? else {
        return Ok(());
    };
    if req
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        state.chunked_requests.fetch_add(1, Ordering::SeqCst);
    }
    let token = state.token.lock().expect("token lock").clone();
    let user = state.user.lock().expect("user lock").clone();
    if !authorized(&req, token.as_deref(), user.as_deref()) {
        state.unauthorized.fetch_add(1, Ordering::SeqCst);
        // Read the body first, so the client sees the 401 and not a reset connection.
        if req
            .header("expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
        {
            // Answer without inviting the body.
        } else {
            copy_body(&req, &mut reader, &mut io::sink())?;
        }
        writer.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"pool\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        writer.flush()?;
        return Ok(());
    }
    if req
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }

    let mut cmd = Command::new("git");
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_PROJECT_ROOT", &state.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("SERVER_SOFTWARE", "githttp-test")
        .env("REQUEST_METHOD", &req.method)
        .env("PATH_INFO", &req.path)
        .env("QUERY_STRING", &req.query)
        .env("REMOTE_ADDR", "127.0.0.1")
        // http-backend allows receive-pack only for an authenticated user.
        .env(
            "REMOTE_USER",
            if token.is_some() {
                "token-user"
            } else {
                "anonymous"
            },
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (header, var) in [
        ("content-type", "CONTENT_TYPE"),
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "HTTP_GIT_PROTOCOL"),
    ] {
        if let Some(v) = req.header(header) {
            cmd.env(var, v);
        }
    }
    if let Some(len) = req.header("content-length") {
        cmd.env("CONTENT_LENGTH", len);
    }
    let mut child = cmd.spawn()?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let relay = std::thread::spawn(move || relay_cgi(stdout, writer));
    // http-backend may answer without reading the body (an error): a broken pipe is fine.
    let _ = copy_body(&req, &mut reader, &mut stdin);
    drop(stdin);
    let relayed = relay.join().expect("relay thread");
    child.wait()?;
    relayed
}

/// Turn the CGI response (headers, blank line, body) into an HTTP/1.1 response.
fn relay_cgi(stdout: impl Read, mut client: TcpStream) -> io::Result<()> {
    let mut cgi = BufReader::new(stdout);
    let mut status = "200 OK".to_owned();
    let mut headers = String::new();
    loop {
        let mut line = String::new();
        if cgi.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("status") => {
                status = value.trim().to_owned()
            }
            Some(_) => {
                headers.push_str(line);
                headers.push_str("\r\n");
            }
            None => {}
        }
    }
    client
        .write_all(format!("HTTP/1.1 {status}\r\n{headers}Connection: close\r\n\r\n").as_bytes())?;
    io::copy(&mut cgi, &mut client)?;
    client.flush()?;
    client.shutdown(Shutdown::Write)
}

/// Standard base64 (RFC 4648, padding optional); `None` for anything else.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let body = text.trim_end_matches('=');
    if text.len() - body.len() > 2 || body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.as_bytes().chunks(4) {
        let mut acc = 0u32;
        for &c in chunk {
            acc = (acc << 6) | value(c)?;
        }
        acc <<= 6 * (4 - chunk.len() as u32);
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// Standard base64 with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let mut acc = 0u32;
        for (i, &b) in chunk.iter().enumerate() {
            acc |= u32::from(b) << (16 - 8 * i);
        }
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(acc >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Accepts connections and never answers (holds them open until dropped).
pub struct SilentServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    held: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<JoinHandle<()>>,
}

impl SilentServer {
    pub fn start() -> SilentServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let stop = Arc::new(AtomicBool::new(false));
        let held = Arc::new(Mutex::new(Vec::new()));
        let (stop2, held2) = (Arc::clone(&stop), Arc::clone(&held));
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    held2.lock().expect("held lock").push(stream);
                }
            }
        });
        SilentServer {
            addr,
            stop,
            held,
            accept: Some(accept),
        }
    }

    pub fn url(&self, repo_name: &str) -> String {
        format!("http://{}/{repo_name}", self.addr)
    }

    /// How many connections it accepted (and left hanging).
    pub fn connections(&self) -> usize {
        self.held.lock().expect("held lock").len()
    }
}

impl Drop for SilentServer {
    fn drop(&mut self) {
        if let Some(accept) = self.accept.take() {
            self.stop.store(true, Ordering::SeqCst);
            let _ = TcpStream::connect(self.addr);
            let _ = accept.join();
        }
        self.held.lock().expect("held lock").clear();
    }
}

/// Answers every request with a web page (a forge's login page), as a wrong URL or an
/// intercepting proxy does: a web server, not git.
pub struct WebPageServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl WebPageServer {
    pub fn start() -> WebPageServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                // Read the request's head (and whatever body came with it), then answer.
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let page =
                    b"<!DOCTYPE html><html><body><form action=/login>Sign in</form></body></html>";
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    page.len()
                );
                let _ = stream.write_all(answer.as_bytes());
                let _ = stream.write_all(page);
            }
        });
        WebPageServer {
            addr,
            stop,
            accept: Some(accept),
        }
    }

    pub fn url(&self, repo_name: &str) -> String {
        format!("http://{}/{repo_name}", self.addr)
    }
}

impl Drop for WebPageServer {
    fn drop(&mut self) {
        if let Some(accept) = self.accept.take() {
            self.stop.store(true, Ordering::SeqCst);
            let _ = TcpStream::connect(self.addr);
            let _ = accept.join();
        }
    }
}

/// An http URL on 127.0.0.1 where nothing listens (a port just bound and released).
pub fn closed_port_url(repo_name: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    drop(listener);
    format!("http://{addr}/{repo_name}")
}

#[test]
fn base64_round_trips_and_refuses_garbage() {
    for (plain, encoded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("x-access-token:s3cr3t", "eC1hY2Nlc3MtdG9rZW46czNjcjN0"),
    ] {
        assert_eq!(base64_encode(plain.as_bytes()), encoded);
        assert_eq!(base64_decode(encoded).unwrap(), plain.as_bytes());
        assert_eq!(
            base64_decode(encoded.trim_end_matches('=')).unwrap(),
            plain.as_bytes()
        );
    }
    let all: Vec<u8> = (0..=255).collect();
    assert_eq!(base64_decode(&base64_encode(&all)).unwrap(), all);
    for bad in ["Z", "Zg===", "Zm9v!", "Zm 9v", "====", "Zm9vY"] {
        assert_eq!(base64_decode(bad), None, "{bad}");
    }
}

#[test]
fn head_parser_refuses_garbage() {
    let parse = |raw: &[u8]| read_head(&mut BufReader::new(raw));
    assert!(parse(b"").unwrap().is_none());
    assert!(parse(b"GET /x HTTP/1.1\r\n").is_err(), "truncated");
    assert!(parse(b"GARBAGE\r\n\r\n").is_err());
    assert!(parse(b"GET /x HTTP/1.1\r\nno-colon\r\n\r\n").is_err());
    let huge = format!("GET /x HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
    assert!(parse(huge.as_bytes()).is_err());
    let req =
        parse(b"POST /p.git/git-receive-pack?a=b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap()
            .unwrap();
    assert_eq!(
        (req.method.as_str(), req.path.as_str(), req.query.as_str()),
        ("POST", "/p.git/git-receive-pack", "a=b")
    );
    let mut body = Vec::new();
    copy_body(
        &req,
        &mut BufReader::new(&b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: x\r\n\r\n"[..]),
        &mut body,
    )
    .unwrap();
    assert_eq!(body, b"abcde");
    assert!(copy_body(&req, &mut BufReader::new(&b"zz\r\n"[..]), &mut Vec::new()).is_err());
    assert!(copy_body(&req, &mut BufReader::new(&b"5\r\nab"[..]), &mut Vec::new()).is_err());
}
