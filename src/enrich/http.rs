//! A small HTTP/1.1 client for one POST of JSON to an OpenAI-compatible endpoint, with a
//! hard deadline over the whole exchange and a cap on the answer's size. Plain `http://` is
//! spoken here (the local model servers: llama.cpp, Ollama, vLLM); `https://` (a hosted
//! provider) goes through the `curl` program (`enrich::curl`), the key never on its argv.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::HttpError;
use crate::credentials::Secret;

/// The largest response read; a chat completion is a few KiB.
const MAX_RESPONSE_BYTES: usize = 4 << 20;

#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    tls: bool,
    host: String,
    port: u16,
    /// The base path without a trailing `/`, e.g. `/v1`.
    base_path: String,
}

impl Endpoint {
    pub fn parse(url: &str) -> Result<Endpoint, HttpError> {
        let bad = |why: &str| HttpError::BadUrl {
            url: url.to_owned(),
            why: why.to_owned(),
        };
        let (tls, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => return Err(bad("it must start with http:// or https://")),
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(bad(
                "credentials in the URL are refused; use `chapters enrich model --key-stdin`",
            ));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
                let port = p
                    .parse::<u16>()
                    .map_err(|_| bad("the port is not a number"))?;
                (h, port)
            }
            _ => (authority, if tls { 443 } else { 80 }),
        };
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("the host is empty or holds spaces"));
        }
        if path.contains(['?', '#', '"', '\\'])
            || path.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(bad("the path may not hold a query, fragment or spaces"));
        }
        if host.contains(['"', '\\', '/']) {
            return Err(bad("the host holds a quote, a backslash or a slash"));
        }
        Ok(Endpoint {
            tls,
            host: host.to_owned(),
            port,
            base_path: path.trim_end_matches('/').to_owned(),
        })
    }

    /// For messages: never carries a key.
    pub fn describe(&self) -> String {
        format!(
            "{}://{}:{}{}",
            if self.tls { "https" } else { "http" },
            self.host,
            self.port,
            self.base_path
        )
    }

    /// POST `body` to `<base>/<path>`; returns the status and the body bytes.
    pub fn post_json(
        &self,
        path: &str,
        body: &[u8],
        key: Option<&Secret>,
        timeout: Duration,
    ) -> Result<(u16, Vec<u8>), HttpError> {
        let endpoint = self.describe();
        if self.tls {
            let url = format!("{endpoint}/{}", path.trim_start_matches('/'));
            return super::curl::post_json(&url, &endpoint, body, key, timeout);
        }
        let deadline = Instant::now() + timeout;
        let io = |source| HttpError::Io {
            endpoint: endpoint.clone(),
            source,
        };
        let timed_out = || HttpError::Timeout {
            endpoint: endpoint.clone(),
            ms: timeout.as_millis(),
        };
        let addrs: Vec<_> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|source| HttpError::Connect {
                endpoint: endpoint.clone(),
                source,
            })?
            .collect();
        let mut stream = None;
        let mut last = None;
        for addr in addrs {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timed_out());
            }
            match TcpStream::connect_timeout(&addr, left) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let mut stream = stream.ok_or_else(|| HttpError::Connect {
            endpoint: endpoint.clone(),
            source: last.unwrap_or_else(|| std::io::Error::other("the host has no address")),
        })?;
        let mut request = format!(
            "POST {}/{} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\nUser-Agent: dsh-chapters/{}\r\n",
            self.base_path,
            path.trim_start_matches('/'),
            self.host,
            self.port,
            body.len(),
            env!("CARGO_PKG_VERSION"),
        );
        if let Some(key) = key {
            request.push_str(&format!("Authorization: Bearer {}\r\n", key.expose()));
        }
        request.push_str("\r\n");
        let remaining = |deadline: Instant| {
            let left = deadline.saturating_duration_since(Instant::now());
            (!left.is_zero()).then_some(left)
        };
        stream
            .set_write_timeout(Some(remaining(deadline).ok_or_else(timed_out)?))
            .map_err(io)?;
        let sent = stream
            .write_all(request.as_bytes())
            .and_then(|()| stream.write_all(body))
            .and_then(|()| stream.flush());
        if let Err(e) = sent {
            return Err(if is_timeout(&e) { timed_out() } else { io(e) });
        }
        let mut response = Vec::new();
        let mut chunk = [0u8; 16 << 10];
        loop {
            let left = remaining(deadline).ok_or_else(timed_out)?;
            stream.set_read_timeout(Some(left)).map_err(io)?;
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    response.extend_from_slice(&chunk[..n]);
                    if response.len() > MAX_RESPONSE_BYTES {
                        return Err(HttpError::Malformed {
                            endpoint,
                            why: format!("the response is larger than {MAX_RESPONSE_BYTES} bytes"),
                        });
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return Err(timed_out()),
                Err(e) => return Err(io(e)),
            }
        }
        parse_response(&response).map_err(|why| HttpError::Malformed { endpoint, why })
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Status and body of a whole HTTP/1.x response (read to the connection's close).
fn parse_response(bytes: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let head_end =
        memchr::memmem::find(bytes, b"\r\n\r\n").ok_or_else(|| "no end of headers".to_owned())?;
    let head = std::str::from_utf8(&bytes[..head_end]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split(' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(format!("status line {status_line:?}"));
    }
    let status = parts
        .next()
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("status line {status_line:?}"))?;
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("header line {line:?}"));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        } else if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| format!("content-length {value:?}"))?,
            );
        }
    }
    let body = &bytes[head_end + 4..];
    let body = if chunked {
        dechunk(body)?
    } else if let Some(n) = length {
        body.get(..n)
            .ok_or_else(|| format!("the body ends after {} of {n} bytes", body.len()))?
            .to_vec()
    } else {
        body.to_vec()
    };
    Ok((status, body))
}

fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = memchr::memmem::find(body, b"\r\n").ok_or("a chunk size line is cut")?;
        let size_text = std::str::from_utf8(&body[..line_end]).map_err(|_| "bad chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = body.get(..size).ok_or("a chunk is cut")?;
        out.extend_from_slice(chunk);
        body = body.get(size + 2..).ok_or("a chunk is cut")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn urls_are_parsed_and_bad_ones_refused_with_a_reason() {
        let e = Endpoint::parse("http://127.0.0.1:8080/v1/").unwrap();
        assert_eq!(e.describe(), "http://127.0.0.1:8080/v1");
        assert_eq!(
            Endpoint::parse("http://localhost").unwrap().describe(),
            "http://localhost:80"
        );
        assert_eq!(
            Endpoint::parse("https://api.example.com/v1")
                .unwrap()
                .describe(),
            "https://api.example.com:443/v1"
        );
        for (bad, why) in [
            ("https://api.example.com/v1\"", "query"),
            ("ftp://x", "http://"),
            ("http://user:pw@host/v1", "credentials"),
            ("http://:80/v1", "host"),
            ("http://host:port/v1", "port"),
            ("http://host/v1?x=1", "query"),
            ("http://ho st/v1", "host"),
        ] {
            let err = Endpoint::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn responses_plain_chunked_and_broken() {
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi!").unwrap(),
            (200, b"hi".to_vec())
        );
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n3;x=y\r\n th\r\n0\r\n\r\n").unwrap(),
            (200, b"hi th".to_vec())
        );
        assert_eq!(
            parse_response(b"HTTP/1.0 500 Oops\r\n\r\nbad").unwrap().0,
            500
        );
        for broken in [
            &b""[..],
            b"HTTP/1.1 200 OK\r\n",
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nshort",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffff\r\nab",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        ] {
            assert!(
                parse_response(broken).is_err(),
                "{:?}",
                String::from_utf8_lossy(broken)
            );
        }
    }

    #[test]
    fn a_huge_answer_is_refused_at_the_cap() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                // Read the whole request (headers and the two-byte body) first: closing a
                // socket with unread bytes sends a reset, which would race the answer.
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.ends_with(b"\r\n\r\n{}") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n");
                let chunk = vec![b'x'; 1 << 20];
                for _ in 0..6 {
                    if stream.write_all(&chunk).is_err() {
                        break;
                    }
                }
            }
        });
        let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap();
        let err = endpoint
            .post_json("chat/completions", b"{}", None, Duration::from_secs(10))
            .unwrap_err();
        assert!(err.to_string().contains("larger than"), "{err}");
    }

    #[test]
    fn a_silent_server_times_out_and_a_closed_port_is_a_connect_error() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap();
        let err = endpoint
            .post_json("chat/completions", b"{}", None, Duration::from_millis(300))
            .unwrap_err();
        assert!(err.is_timeout(), "{err}");
        drop(listener);
        let err = endpoint
            .post_json("chat/completions", b"{}", None, Duration::from_millis(300))
            .unwrap_err();
        assert!(
            matches!(err, HttpError::Connect { .. } | HttpError::Timeout { .. }),
            "{err}"
        );
    }
}
