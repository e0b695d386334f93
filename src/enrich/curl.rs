//! `https://` endpoints go through the `curl` program (as the pool's network transport goes
//! through `git`): TLS without a TLS stack in this build. The API key never reaches argv — it
//! is written, with the URL and headers, to a curl config file (0600, in a private temp
//! directory removed after the call) that `-K` names; the body goes through stdin. A hard
//! deadline kills curl if its own `--max-time` does not end it.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::HttpError;
use crate::credentials::Secret;

/// Environment curl may need (certificates, proxies, home for its own config); nothing else
/// of ours reaches it.
const PASSED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "http_proxy",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
];

/// Largest answer read back.
const MAX_RESPONSE_BYTES: u64 = 4 << 20;

/// A value inside double quotes in a curl config file.
fn quoted(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

/// POST `body` to `url` (https); returns the status and the body.
pub fn post_json(
    url: &str,
    endpoint: &str,
    body: &[u8],
    key: Option<&Secret>,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), HttpError> {
    let io = |source| HttpError::Io {
        endpoint: endpoint.to_owned(),
        source,
    };
    let scratch = tempfile::Builder::new()
        .prefix("dsh-chapters-curl-")
        .tempdir()
        .map_err(io)?;
    let config_path = scratch.path().join("request.cfg");
    let mut config = format!(
        "url = {}\nrequest = \"POST\"\nheader = \"Content-Type: application/json\"\nheader = \"Accept: application/json\"\n",
        quoted(url)
    );
    if let Some(key) = key {
        config.push_str(&format!(
            "header = {}\n",
            quoted(&format!("Authorization: Bearer {}", key.expose()))
        ));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&config_path)
        .and_then(|mut f| f.write_all(config.as_bytes()))
        .map_err(io)?;
    let seconds = timeout.as_secs_f64().max(0.1);
    let mut cmd = Command::new("curl");
    cmd.env_clear();
    for name in PASSED_ENV {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.args(["--silent", "--show-error", "--no-progress-meter"])
        .args(["--max-time", &format!("{seconds:.3}")])
        .args(["--max-filesize", &MAX_RESPONSE_BYTES.to_string()])
        .args(["--data-binary", "@-", "--write-out", "\n%{http_code}"])
        .arg("-K")
        .arg(&config_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| HttpError::Connect {
        endpoint: format!("{endpoint} (through `curl`, needed for https endpoints; install curl)"),
        source,
    })?;
    if let Some(mut stdin) = child.stdin.take() {
        // A curl that died at once leaves a closed pipe: its exit status says why.
        let _ = stdin.write_all(body);
    }
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = (&mut stdout)
            .take(MAX_RESPONSE_BYTES + 16)
            .read_to_end(&mut out);
        out
    });
    let err_reader = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = (&mut stderr).take(4096).read_to_string(&mut err);
        err
    });
    // curl's own --max-time ends it; this deadline is for a curl that does not.
    let deadline = Instant::now() + timeout + Duration::from_secs(2);
    let status = loop {
        if let Some(status) = child.try_wait().map_err(io)? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(HttpError::Timeout {
                endpoint: endpoint.to_owned(),
                ms: timeout.as_millis(),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    drop(scratch);
    match status.code() {
        Some(0) => {}
        Some(28) => {
            return Err(HttpError::Timeout {
                endpoint: endpoint.to_owned(),
                ms: timeout.as_millis(),
            })
        }
        code => {
            let why = err.trim();
            let source = std::io::Error::other(format!(
                "curl exited with {}: {}",
                code.map_or("a signal".to_owned(), |c| c.to_string()),
                if why.is_empty() { "no message" } else { why }
            ));
            return Err(match code {
                Some(6) | Some(7) => HttpError::Connect {
                    endpoint: endpoint.to_owned(),
                    source,
                },
                _ => HttpError::Io {
                    endpoint: endpoint.to_owned(),
                    source,
                },
            });
        }
    }
    let cut = out
        .iter()
        .rposition(|&b| b == b'\n')
        .ok_or_else(|| HttpError::Malformed {
            endpoint: endpoint.to_owned(),
            why: "curl printed no status".into(),
        })?;
    let status = std::str::from_utf8(&out[cut + 1..])
        .ok()
        .and_then(|s| s.trim().parse::<u16>().ok())
        .ok_or_else(|| HttpError::Malformed {
            endpoint: endpoint.to_owned(),
            why: "curl printed no status".into(),
        })?;
    Ok((status, out[..cut].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_values_are_quoted_so_nothing_breaks_out() {
        assert_eq!(quoted(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(quoted("https://x/v1"), "\"https://x/v1\"");
    }
}
