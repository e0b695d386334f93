//! `chapters status` reads again only what changed since it last looked (its cache,
//! `<store>/.status-cache.json`), and says the same as a status that reads everything.

use dsh_chapters::session::reader::{LogItem, LogReader, ResumePoint};
use dsh_chapters::testkit::writer::{LogWriter, SessionScript, TurnSpec};

use crate::support::{two_task_turns, Sandbox, START_MS};

const S1: &str = "session-11111111-1111-4111-8111-111111111111";
const S2: &str = "session-22222222-2222-4222-8222-222222222222";

/// Wait until what was just written is older than the two seconds within which the cache
/// does not trust a stamp (a write in the same clock tick as a read leaves it unchanged).
fn settle() {
    std::thread::sleep(std::time::Duration::from_millis(2_100));
}

/// The report without the cache's own counts.
fn without_counts(mut v: serde_json::Value) -> serde_json::Value {
    v.as_object_mut().expect("object").remove("statusCache");
    v["daemon"] = serde_json::Value::Null;
    v
}

#[test]
fn status_reads_again_a_changed_log_and_not_an_unchanged_one() {
    let sb = Sandbox::new();
    let turns = two_task_turns(&sb.ws);
    sb.write_session(S1, 4, true, &turns);
    sb.write_session(S2, 4, true, &turns[..2]);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    settle();

    let first = sb.json(&["status", "--json"]);
    assert_eq!(first["statusCache"]["logsRead"], 2, "{first}");
    let second = sb.json(&["status", "--json"]);
    assert_eq!(second["statusCache"]["logsRead"], 0, "{second}");
    assert_eq!(second["statusCache"]["logsReused"], 2, "{second}");
    assert_eq!(second["statusCache"]["foldersRead"], 0, "{second}");
    assert_eq!(without_counts(first.clone()), without_counts(second));

    // S2 grows by three turns: only its log is read again, and the counts follow.
    std::fs::remove_file(sb.log_path(S2, 4, true)).expect("rm log");
    sb.write_session(S2, 4, true, &turns);
    settle();
    let third = sb.json(&["status", "--json"]);
    // Read again: whole, or on from its last turn boundary when the new file took the old
    // one's inode and begins with the same bytes (it does: the same first two turns).
    let again = third["statusCache"]["logsRead"].as_u64().expect("n")
        + third["statusCache"]["logsResumed"].as_u64().expect("n");
    assert_eq!(again, 1, "{third}");
    assert_eq!(third["statusCache"]["logsReused"], 1, "{third}");
    assert_eq!(
        third["pendingTurns"],
        first["pendingTurns"].as_u64().expect("n") + 3
    );

    // S1 grows by one turn, appended as DSH appends (same file): it is read on from its last
    // turn boundary, not from its start.
    let log = sb.log_path(S1, 4, true);
    let last = {
        let mut r = LogReader::open(&log, ResumePoint::default()).expect("log");
        let mut last = 0;
        while let Some(item) = r.next_item().expect("read") {
            if let LogItem::Event(e) = item {
                last = e.seq;
            }
        }
        last
    };
    let mut w = LogWriter::open_append(&log, true).expect("append");
    let mut script = SessionScript::starting_at(4, last + 1, 6, START_MS + 1_000_000);
    w.append_turn(
        &mut script,
        &TurnSpec::new("Write the release notes", "Release notes written."),
    )
    .expect("append turn");
    drop(w);
    let grown = sb.json(&["status", "--json"]);
    assert_eq!(grown["statusCache"]["logsResumed"], 1, "{grown}");
    assert_eq!(grown["statusCache"]["logsRead"], 0, "{grown}");
    assert_eq!(
        grown["pendingTurns"],
        third["pendingTurns"].as_u64().expect("n") + 1,
        "{grown}"
    );
    std::fs::remove_file(sb.store().join(".status-cache.json")).expect("rm cache");
    let whole = sb.json(&["status", "--json"]);
    assert_eq!(without_counts(whole), without_counts(grown));

    // New chapters land (the archive adds to the chapter folder, just now: not trusted yet):
    // that folder is read again.
    sb.ok(&["archive"]);
    let fourth = sb.json(&["status", "--json"]);
    assert_eq!(fourth["pendingTurns"], 0, "{fourth}");
    assert!(
        fourth["statusCache"]["foldersRead"].as_u64() > Some(0),
        "{fourth}"
    );

    // Whatever the cache held, the report is the one a status reading everything gives.
    std::fs::remove_file(sb.store().join(".status-cache.json")).expect("rm cache");
    let fresh = sb.json(&["status", "--json"]);
    assert_eq!(fresh["statusCache"]["logsReused"], 0);
    assert_eq!(without_counts(fresh), without_counts(fourth));
}
