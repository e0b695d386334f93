//! The spring-2025 TypeScript CLI's rollouts (G0): `sessions/rollout-YYYY-MM-DD-<uuid>.json`,
//! one pretty-printed object `{session: {timestamp, id, instructions}, items: [ResponseItem…]}`
//! rewritten whole on every save.
//!
//! Read as the G1 lines they carry: a bare header `{id, timestamp, cwd}`, then each item on
//! a line of its own, so the rest of the reader (and its resume offsets, into these lines)
//! is the same. The file records no cwd: the first `shell` call's `workdir` is the only
//! path it holds, and stands for it. Each save of the CLI of that time wrote a new file
//! holding every item so far: [`conversation_key`] tells such files apart.

use std::io::Read;
use std::path::Path;

use serde_json::{json, Value};

use crate::session::reader::ReadError;

/// The largest G0 rollout read (the whole object is held while it is turned into lines).
pub(crate) const MAX_BYTES: u64 = 64 << 20;

/// Whether `path` is a G0 rollout by its name.
pub(crate) fn is_g0(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

fn parse(path: &Path) -> Result<Value, ReadError> {
    let io_err = |source| ReadError::Io {
        file: path.to_path_buf(),
        source,
    };
    let file = crate::session::reader::open_regular(path)?;
    let len = file.metadata().map_err(io_err)?.len();
    if len > MAX_BYTES {
        return Err(ReadError::LineTooLong {
            file: path.to_path_buf(),
            after_seq: None,
            limit: usize::try_from(MAX_BYTES).unwrap_or(usize::MAX),
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(MAX_BYTES)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    serde_json::from_slice(&bytes).map_err(|e| ReadError::BadLine {
        file: path.to_path_buf(),
        after_seq: None,
        detail: format!("a TypeScript-era rollout that is not one JSON object: {e}"),
    })
}

/// The first `shell` call's `workdir` among `items`.
fn workdir(items: &[Value]) -> Option<String> {
    items.iter().find_map(|i| {
        if i.get("type").and_then(Value::as_str) != Some("function_call") {
            return None;
        }
        let args: Value = serde_json::from_str(i.get("arguments")?.as_str()?).ok()?;
        args.get("workdir")
            .and_then(Value::as_str)
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
    })
}

/// The G1 lines a G0 rollout holds (see the module doc), each ending in `\n`.
pub(crate) fn to_lines(path: &Path) -> Result<Vec<u8>, ReadError> {
    let doc = parse(path)?;
    let empty = Vec::new();
    let items = doc.get("items").and_then(Value::as_array).unwrap_or(&empty);
    let session = doc.get("session").cloned().unwrap_or(Value::Null);
    let mut header = json!({
        "id": session.get("id").cloned().unwrap_or(Value::Null),
        "timestamp": session.get("timestamp").cloned().unwrap_or(Value::Null),
    });
    if let Some(cwd) = workdir(items) {
        header["cwd"] = cwd.into();
    }
    let mut out = Vec::new();
    for v in std::iter::once(&header).chain(items.iter()) {
        serde_json::to_writer(&mut out, v).map_err(|e| ReadError::BadLine {
            file: path.to_path_buf(),
            after_seq: None,
            detail: e.to_string(),
        })?;
        out.push(b'\n');
    }
    Ok(out)
}

/// Which conversation a G0 rollout holds (its first item) and how many items: of the
/// files one session's saves left, the one with the most items holds all the others hold.
pub(crate) fn conversation_key(path: &Path) -> Option<(String, usize)> {
    let doc = parse(path).ok()?;
    let items = doc.get("items")?.as_array()?;
    let first = items.first()?;
    let key = first
        .get("id")
        .and_then(Value::as_str)
        .map_or_else(|| first.to_string(), str::to_owned);
    Some((key, items.len()))
}
