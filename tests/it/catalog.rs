//! The store's catalog across processes: two recording at once lose nothing, a process
//! killed (SIGKILL) while recording leaves a catalog that opens and says what it committed,
//! and one killed while filling the metadata leaves a catalog never read as filled unless
//! it is. The children are this test binary run again on [`child_records`] / [`child_fills`].

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

const FILL_WS: &str = "CATALOG_IT_CHILD_FILL_WS";

/// Run as a child only (the variable set): start the catalog over and fill it, again and
/// again, until killed. As a test of its own it does nothing.
#[test]
fn child_fills() {
    let Some(ws) = std::env::var_os(FILL_WS) else {
        return;
    };
    let store = dsh_chapters::store::Store::open(Path::new(&ws)).expect("store");
    loop {
        dsh_chapters::testkit::catalog::start_over(store.dir());
        store.fill_catalog();
    }
}

#[test]
fn a_process_killed_while_filling_leaves_a_catalog_not_read_as_filled_unless_it_is() {
    let dir = tempfile::tempdir().expect("tmp");
    let ws = dir.path();
    let store = dsh_chapters::store::Store::init(ws).expect("init");
    // Documents the catalog names without metadata (a path that did not know it), and as
    // many no record names: a fill must read them all.
    let folder = ".dsh-chapters/root-1/chapters";
    std::fs::create_dir_all(ws.join(folder)).expect("mkdir");
    let names: Vec<String> = (0..1500).map(|i| format!("{i:04}-c.md")).collect();
    for name in &names {
        std::fs::write(
            ws.join(folder).join(name),
            format!("---\ntitle: \"{name}\"\nkind: chapter\ntopics: [t{name}]\n---\nbody\n"),
        )
        .expect("write");
    }
    let recorded: Vec<&str> = names[..750].iter().map(String::as_str).collect();
    dsh_chapters::testkit::catalog::record(store.dir(), &[(folder, &recorded)]);
    let mut filled_seen = 0;
    for round in 0..6u64 {
        let mut c = Command::new(std::env::current_exe().expect("the test binary"))
            .args(["catalog::child_fills", "--exact", "--test-threads=1"])
            .env(FILL_WS, ws)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn a filling child");
        // Killed at a different point of its fills each round.
        std::thread::sleep(std::time::Duration::from_millis(150 + 97 * round));
        assert!(
            c.try_wait().expect("try_wait").is_none(),
            "the child stopped before it was killed"
        );
        c.kill().expect("SIGKILL");
        c.wait().expect("reap");
        // Filled or not, never half: a catalog read as filled knows every document.
        match catalog::session_docs(store.dir()) {
            Some(docs) => {
                filled_seen += 1;
                assert!(catalog::is_filled(store.dir()));
                assert_eq!(docs.len(), names.len(), "round {round}");
                assert!(
                    docs.iter()
                        .all(|d| d.meta.as_ref().is_some_and(|m| m.kind == "chapter")),
                    "round {round}: a row read as filled does not know its document"
                );
            }
            None => assert!(!catalog::is_filled(store.dir())),
        }
        // And the next reader fills it whole.
        store.fill_catalog();
        let docs = catalog::session_docs(store.dir()).expect("filled after a fill");
        assert_eq!(docs.len(), names.len());
    }
    // (How many kills found it filled is luck; the assertions above hold either way.)
    let _ = filled_seen;
}
