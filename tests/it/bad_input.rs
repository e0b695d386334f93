//! Bad input: each gets a message naming the file (and seq where there is one), exit 1,
//! no panic, and nothing already archived is touched; the other sessions still archive.

use std::io::Write;
use std::path::Path;
use std::process::Output;

use crate::support::{two_task_turns, Sandbox};

const GOOD: &str = "session-aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa";
const BAD: &str = "session-bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb";

/// A workspace with one good session already archived, and one bad session next to it.
fn setup() -> (Sandbox, std::collections::BTreeMap<String, Vec<u8>>) {
    let sb = Sandbox::new();
    sb.write_session(GOOD, 4, true, &two_task_turns(&sb.ws));
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let snap = sb.snapshot();
    assert!(!snap.is_empty());
    (sb, snap)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The bad session fails with exit 1 naming `file`, the good one is untouched, and no
/// panic message appears.
fn assert_refused(
    sb: &Sandbox,
    before: &std::collections::BTreeMap<String, Vec<u8>>,
    file: &Path,
    needle: &str,
) {
    let out = sb.run(&["archive"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let name = file
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(
        err.contains(&name),
        "the message names the file {name}: {err}"
    );
    assert!(err.contains(needle), "the message says `{needle}`: {err}");
    let after = sb.snapshot();
    for (path, bytes) in before {
        assert_eq!(after.get(path), Some(bytes), "{path} was touched");
    }
    let bad_tree: Vec<_> = after.keys().filter(|k| k.starts_with(BAD)).collect();
    assert!(
        bad_tree.iter().all(|k| k.contains("/collections/")),
        "no chapters from a bad log: {bad_tree:?}"
    );
}

fn plain_lines(sb: &Sandbox, lines: &[Vec<u8>]) -> std::path::PathBuf {
    let path = sb.log_path(BAD, 4, false);
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    let mut f = std::fs::File::create(&path).expect("create");
    for l in lines {
        f.write_all(l).expect("write");
        f.write_all(b"\n").expect("write");
    }
    path
}

fn header(sb: &Sandbox, id: &str) -> Vec<u8> {
    serde_json::json!({"type":"session","version":4,"id":id,"createdAt":1,"cwd":sb.ws_str()})
        .to_string()
        .into_bytes()
}

fn event(seq: u64, kind: &str) -> Vec<u8> {
    serde_json::json!({"type":kind,"seq":seq,"time":1,"data":{"turn":1}})
        .to_string()
        .into_bytes()
}

#[test]
fn garbled_line_names_file_and_seq() {
    let (sb, before) = setup();
    let file = plain_lines(
        &sb,
        &[
            header(&sb, BAD),
            event(0, "turn/start"),
            b"{\"type\":\"user/mess".to_vec(),
            event(1, "turn/end"),
        ],
    );
    assert_refused(&sb, &before, &file, "seq");
}

#[test]
fn not_zstd_at_all() {
    let (sb, before) = setup();
    let path = sb.log_path(BAD, 4, true);
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    std::fs::write(&path, b"this is not a zstd frame, just text\n").expect("write");
    assert_refused(&sb, &before, &path, "zstd");
}

#[test]
fn corrupt_frame_in_the_middle() {
    let (sb, before) = setup();
    let path = sb.write_session(BAD, 4, true, &two_task_turns(&sb.ws));
    let mut bytes = std::fs::read(&path).expect("read");
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 64] {
        *b ^= 0x5a;
    }
    std::fs::write(&path, &bytes).expect("write");
    // Damage costs only itself: the turns before the corrupt frame are archived, the
    // session is still reported (exit 1) by file with what to do.
    let out = sb.run(&["archive"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    // Flipped bytes either break the frame or decode to a garbled line: damage either way.
    assert!(
        err.contains("session.v4.jsonl.zstd") && err.contains("damaged"),
        "{err}"
    );
    assert!(
        err.contains("is archived") || err.contains("No turn completed before it"),
        "{err}"
    );
    // The good session's files are untouched (the store's ledgers gain the bad one's lines).
    let after = sb.snapshot();
    for (path, bytes) in before.iter().filter(|(p, _)| p.starts_with(GOOD)) {
        assert_eq!(after.get(path), Some(bytes), "{path} was touched");
    }
}

#[test]
fn a_100_mb_single_line_is_refused() {
    let (sb, before) = setup();
    let path = sb.log_path(BAD, 4, false);
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
    f.write_all(&header(&sb, BAD)).expect("w");
    f.write_all(b"\n{\"type\":\"tool/result\",\"seq\":0,\"data\":{\"x\":\"")
        .expect("w");
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..100 {
        f.write_all(&chunk).expect("w");
    }
    f.write_all(b"\"}}\n").expect("w");
    drop(f);
    assert_refused(&sb, &before, &path, "longer than");
}

#[test]
fn invalid_utf8() {
    let (sb, before) = setup();
    let mut line = event(1, "user/message");
    line.splice(10..10, [0xff, 0xfe, 0xc3]);
    let file = plain_lines(&sb, &[header(&sb, BAD), event(0, "turn/start"), line]);
    assert_refused(&sb, &before, &file, "UTF-8");
}

#[test]
fn seq_gap_and_repeat() {
    let (sb, before) = setup();
    let file = plain_lines(
        &sb,
        &[
            header(&sb, BAD),
            event(0, "turn/start"),
            event(2, "turn/end"),
        ],
    );
    assert_refused(&sb, &before, &file, "seq");
    let file = plain_lines(
        &sb,
        &[
            header(&sb, BAD),
            event(0, "turn/start"),
            event(0, "turn/end"),
        ],
    );
    assert_refused(&sb, &before, &file, "repeated");
}

#[test]
fn hostile_session_ids_are_refused() {
    for id in ["../../escape", "a/b", "..", "session-x/../../y"] {
        let (sb, before) = setup();
        let file = plain_lines(
            &sb,
            &[
                header(&sb, id),
                event(0, "turn/start"),
                event(1, "turn/end"),
            ],
        );
        assert_refused(&sb, &before, &file, id);
        let root = sb.ws.parent().expect("parent");
        assert!(
            !root.join("escape").exists() && !root.join("y").exists(),
            "wrote outside the store"
        );
    }
}

#[test]
fn unreadable_log() {
    let (sb, before) = setup();
    // A directory where the log should be: reading it fails whoever we run as.
    let path = sb.log_path(BAD, 4, true);
    std::fs::create_dir_all(&path).expect("mkdir");
    assert_refused(&sb, &before, &path, "session log");
}

#[test]
fn log_truncated_between_two_runs() {
    let sb = Sandbox::new();
    let path = sb.write_session(GOOD, 4, true, &two_task_turns(&sb.ws));
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let before = sb.snapshot();
    let len = std::fs::metadata(&path).expect("meta").len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    f.set_len(len / 3).expect("truncate");
    let out = sb.run(&["archive"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("truncated"), "{err}");
    assert!(
        err.contains(
            &path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned()
        ),
        "{err}"
    );
    assert_eq!(sb.snapshot(), before, "nothing archived touched");
}

#[test]
fn torn_last_frame_is_a_note_not_an_error() {
    let sb = Sandbox::new();
    let path = sb.write_session(GOOD, 4, true, &two_task_turns(&sb.ws));
    // Half a frame more, as a writer killed mid-append leaves it.
    let tail =
        zstd::encode_all(&b"{\"type\":\"turn/start\",\"seq\":999}\n"[..], 3).expect("encode");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open");
    f.write_all(&tail[..tail.len() / 2]).expect("write");
    drop(f);
    sb.ok(&["init"]);
    let r = sb.json(&["archive", "--json"]);
    assert_eq!(r["sessions"][0]["turnsArchived"], 5);
    let notes = r["sessions"][0]["notes"].to_string();
    assert!(notes.contains("torn"), "{notes}");
}

#[test]
fn a_credential_inside_a_damaged_line_is_never_shown_back() {
    // A damaged event whose bad field holds a credential: the parser's message may quote
    // the value, and `status` and `archive` print that message.
    let (sb, _) = setup();
    let key = "AKIAZ7QW3ERTYUIOPL2X";
    plain_lines(
        &sb,
        &[
            header(&sb, BAD),
            event(0, "turn/start"),
            format!(r#"{{"type":"user/message","seq":"{key}","time":1,"data":{{"text":"x"}}}}"#)
                .into_bytes(),
            event(2, "turn/end"),
        ],
    );
    let mut said_damaged = false;
    for args in [&["status"][..], &["status", "--json"], &["archive"]] {
        let out = sb.run(args);
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(!all.contains(key), "{args:?} showed the credential: {all}");
        said_damaged |= all.contains("not a valid event");
    }
    assert!(
        said_damaged,
        "the damaged line was reported: {:?}",
        sb.run(&["status"])
    );
}
