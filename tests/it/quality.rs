//! Composition quality through the real binary (issue 18): a generated session with
//! labelled tasks archives into chapters that follow its tasks, and a chapter that returns
//! to an earlier task says which chapter it continues.

use dsh_chapters::session::labelled::labelled_session;

use crate::support::Sandbox;

const ID: &str = "session-77777777-7777-4777-8777-777777777777";

fn frontmatter(text: &str) -> serde_json::Value {
    serde_saphyr::from_str(dsh_chapters::render::frontmatter_text(text).expect("frontmatter"))
        .expect("yaml")
}

#[test]
fn returns_to_an_earlier_task_name_the_chapter_they_continue() {
    let sb = Sandbox::new();
    let session = labelled_session(3, 30, &sb.ws_str());
    let specs: Vec<_> = session.iter().map(|t| t.spec.clone()).collect();
    sb.write_session(ID, 4, true, &specs);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);

    let dir = sb.store().join(ID).join("chapters");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("chapters")
        .map(|e| {
            let e = e.expect("entry");
            let name = e.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(e.path()).expect("read");
            (name, text)
        })
        .filter(|(n, _)| n.ends_with(".md") && !n.starts_with("plan-"))
        .collect();
    files.sort();
    // number → the task most of its turns belong to
    let mut task_of = std::collections::BTreeMap::new();
    let mut continues = Vec::new();
    for (name, text) in &files {
        let number: u64 = name[..3].parse().expect("NNN");
        let fm = frontmatter(text);
        let mut votes = std::collections::BTreeMap::new();
        for t in fm["turns"].as_array().expect("turns") {
            let turn = t.as_u64().expect("turn") as usize;
            *votes.entry(session[turn].task).or_insert(0) += 1;
        }
        let task = votes.iter().max_by_key(|(_, n)| **n).map(|(t, _)| *t);
        task_of.insert(number, task);
        if let Some(n) = fm["continues"].as_u64() {
            continues.push((number, n));
        }
        assert!(fm["topics"]
            .as_array()
            .expect("topics")
            .iter()
            .all(|t| { !dsh_chapters::signature::is_stopword(t.as_str().expect("topic")) }));
    }
    assert!(!continues.is_empty(), "a return says so: {files:?}");
    for (number, earlier) in continues {
        assert!(earlier < number);
        assert_eq!(
            task_of[&number], task_of[&earlier],
            "chapter {number} continues {earlier}: the same task"
        );
    }
}
