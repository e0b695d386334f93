//! `chapters demo`: a small, realistic DSH session written as a real zstd log into a
//! scratch home, for the README's first command. The log is a recording
//! (`demo/session.v4.jsonl.zst`, embedded), written by the test kit's generator
//! (`testkit::demo_session`) for [`RECORDED_WORKSPACE`]; the demo writes it back for its
//! own workspace, frame by frame. The shipped program holds no generator. Shell (it writes
//! files).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::session::discover::session_log_path;

/// Where the demo put things.
pub struct DemoSetup {
    pub dsh_home: PathBuf,
    pub workspace: PathBuf,
    pub session_id: String,
    pub log: PathBuf,
}

pub const DEMO_SESSION_ID: &str = "session-0b7e3c2a-5d1f-4e8a-9c6b-2f4d8a1e7c30";
/// 2025-11-29T07:06:40Z: a fixed clock so the demo's chapters are the same on every run.
pub const DEMO_START_MS: i64 = 1_764_400_000_000;
/// The workspace the recording was written for: the demo puts its own in its place.
pub const RECORDED_WORKSPACE: &str = "/home/demo/widgets";
/// The demo's session log as recorded (six turns, the last still in flight).
const RECORDED_LOG: &[u8] = include_bytes!("demo/session.v4.jsonl.zst");
/// zstd level for the frames written back (the harness's default).
const ZSTD_LEVEL: i32 = 3;

/// Write a workspace (a git checkout with an `origin` remote, so the project key is the
/// stable remote-derived one) and one session log of six turns, the last still in flight.
pub fn prepare(root: &Path) -> io::Result<DemoSetup> {
    let dsh_home = root.join("dsh-home");
    let workspace = root.join("widgets");
    let ws = workspace.to_string_lossy().into_owned();
    // The workspace goes into JSON strings (and tool arguments, JSON inside them) as it is.
    if ws.chars().any(|c| c == '"' || c == '\\' || c.is_control()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the demo's directory has a quote, a backslash or a control character in its path; give --dir a plainer one",
        ));
    }
    std::fs::create_dir_all(workspace.join(".git"))?;
    std::fs::create_dir_all(workspace.join("src/auth"))?;
    std::fs::write(
        workspace.join(".git/config"),
        "[core]\n\trepositoryformatversion = 0\n[remote \"origin\"]\n\turl = git@github.com:example/widgets.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
    )?;
    let log = session_log_path(&dsh_home, &ws, DEMO_SESSION_ID, 4, true);
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let bytes = replay(RECORDED_LOG, &ws)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&log)?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    Ok(DemoSetup {
        dsh_home,
        workspace,
        session_id: DEMO_SESSION_ID.to_owned(),
        log,
    })
}

/// The recorded log with `ws` in place of [`RECORDED_WORKSPACE`], one frame for each
/// recorded frame (the header, then one per turn, as the harness writes them).
fn replay(recorded: &[u8], ws: &str) -> io::Result<Vec<u8>> {
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let mut out = Vec::with_capacity(recorded.len() + 1024);
    let mut rest = recorded;
    while !rest.is_empty() {
        let len = zstd::zstd_safe::find_frame_compressed_size(rest).map_err(|code| {
            bad(format!(
                "the recorded demo log has a bad frame: {}",
                zstd::zstd_safe::get_error_name(code)
            ))
        })?;
        let (frame, tail) = rest.split_at(len.min(rest.len()));
        let text = String::from_utf8(zstd::stream::decode_all(frame)?)
            .map_err(|_| bad("the recorded demo log is not UTF-8".to_owned()))?;
        let text = text.replace(RECORDED_WORKSPACE, ws);
        out.extend(zstd::stream::encode_all(text.as_bytes(), ZSTD_LEVEL)?);
        rest = tail;
    }
    Ok(out)
}
