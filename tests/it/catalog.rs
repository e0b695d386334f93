//! The store's catalog across processes: two recording at once lose nothing, and a process
//! killed (SIGKILL) while recording leaves a catalog that opens and says what it committed.
//! The recording children are this test binary run again on [`child_records`].

use std::path::Path;
use std::process::{Child, Command, Stdio};

use dsh_chapters::store::catalog::{self, Cursor, Since};

const STORE: &str = "CATALOG_IT_CHILD_STORE";
const TAG: &str = "CATALOG_IT_CHILD_TAG";
const COUNT: &str = "CATALOG_IT_CHILD_COUNT";

/// Run as a child only (the variables set): record `COUNT` documents `<TAG>-<i>.md`, one
/// record each, as a writer does. As a test of its own it does nothing.
#[test]
fn child_records() {
    let (Some(store), Some(tag), Some(count)) = (
        std::env::var_os(STORE),
        std::env::var(TAG).ok(),
        std::env::var(COUNT)
            .ok()
            .and_then(|c| c.parse::<usize>().ok()),
    ) else {
        return;
    };
    for i in 0..count {
        let name = format!("{tag}-{i}.md");
        dsh_chapters::testkit::catalog::record(Path::new(&store), &[("f", &[name.as_str()])]);
    }
}

fn child(store: &Path, tag: &str, count: usize) -> Child {
    Command::new(std::env::current_exe().expect("the test binary"))
        .args(["catalog::child_records", "--exact", "--test-threads=1"])
        .env(STORE, store)
        .env(TAG, tag)
        .env(COUNT, count.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn a recording child")
}

/// Every file the catalog names, from its first revision on.
fn everything(store: &Path) -> Vec<String> {
    let now = catalog::current(store).expect("a catalog that opens");
    match catalog::read_since(store, Some(&Cursor { revision: 0, ..now })) {
        Since::Changes { changes, .. } => changes.into_iter().flat_map(|c| c.files).collect(),
        Since::Rescan { reason } => panic!("the catalog cannot say: {reason}"),
    }
}

#[test]
fn two_processes_recording_at_once_lose_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = dir.path();
    // Both start with no catalog: both make one, one of them wins, neither loses a record.
    let children: Vec<Child> = ["a", "b"].iter().map(|t| child(store, t, 60)).collect();
    for mut c in children {
        assert!(
            c.wait().expect("wait").success(),
            "a recording child failed"
        );
    }
    let files = everything(store);
    assert_eq!(files.len(), 120, "{files:?}");
    let now = catalog::current(store).expect("current");
    assert_eq!(now.revision, 120, "one revision per record, none shared");
}

#[test]
fn a_process_killed_while_recording_leaves_a_catalog_that_opens() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = dir.path();
    for round in 0..3u64 {
        let mut c = child(store, &format!("r{round}"), 1_000_000);
        // Killed once it has committed some records, in the middle of recording more.
        let floor = catalog::current(store).map_or(0, |c| c.revision) + 20;
        while catalog::current(store).is_none_or(|c| c.revision < floor) {
            assert!(
                c.try_wait().expect("try_wait").is_none(),
                "the child stopped before it was killed"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        c.kill().expect("SIGKILL");
        c.wait().expect("reap");
        // Every committed record is there and named once: one file per revision.
        let now = catalog::current(store).expect("a catalog that opens after a kill");
        assert_eq!(everything(store).len() as u64, now.revision);
        // And it takes the next record.
        dsh_chapters::testkit::catalog::record(store, &[("g", &[&format!("after-{round}.md")])]);
        assert_eq!(
            catalog::current(store).expect("current").revision,
            now.revision + 1
        );
    }
}
