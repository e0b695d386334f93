//! Sessions as people really record them (issue 14, points 3–5): a Windows machine driving
//! PowerShell, a monorepo's package, a conversation in Chinese.

use std::path::Path;

use dsh_chapters::testkit::writer::{
    session_log_path, LogWriter, SessionScript, ToolCallSpec, TurnSpec,
};
use serde_json::json;

use crate::support::{Sandbox, START_MS};

const WIN: &str = "session-33333333-3333-4333-8333-333333333333";
const SUB: &str = "session-44444444-4444-4444-8444-444444444444";
const SIB: &str = "session-55555555-5555-4555-8555-555555555555";
const ZH: &str = "session-66666666-6666-4666-8666-666666666666";

/// Write a v4 session recorded with `cwd` (wherever its cwd key puts it).
fn write_at(sb: &Sandbox, cwd: &str, id: &str, turns: &[TurnSpec]) {
    let path = session_log_path(&sb.home, cwd, id, 4, true);
    std::fs::create_dir_all(path.parent().expect("session dir")).expect("mkdir");
    let mut script = SessionScript::new(4, START_MS);
    let header = script.header(id, cwd, START_MS);
    let mut w = LogWriter::create(&path, true, &header).expect("create log");
    for t in turns {
        w.append_turn(&mut script, t).expect("append turn");
    }
}

fn collection(sb: &Sandbox, id: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(
        sb.store()
            .join(id)
            .join("collections")
            .join(format!("{id}.jsonl")),
    )
    .expect("collection");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|s| s.as_str().expect("string").to_owned())
        .collect()
}

fn chapters_of(sb: &Sandbox, id: &str) -> Vec<(String, String)> {
    let dir = sb.store().join(id).join("chapters");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("chapters")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).expect("chapter"),
            )
        })
        .filter(|(name, _)| !name.starts_with("plan-") && name.ends_with(".md"))
        .collect();
    out.sort();
    out
}

#[test]
fn a_windows_session_is_found_through_path_map_and_signs_its_paths_and_commands() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let win_root = r"C:\Users\ana\src\widgets";
    std::fs::write(
        sb.store().join("config.yml"),
        format!("pathMap:\n  '{win_root}': {}\n", sb.ws_str()),
    )
    .expect("config");
    let mut turn = TurnSpec::new(
        "Fix the parser in @\"C:\\Users\\ana\\src\\widgets\\src\\parse.rs\"\r\nline two\u{0}end",
        "Done.\r\n",
    );
    turn.tool_calls = vec![
        ToolCallSpec::new(
            "pwsh",
            json!({"command": "Set-Location C:\\Users\\ana\\src\\widgets; Get-Content -Path .\\src\\x.rs | Select-String fn; cargo test --lib"}),
            "ok\r\n",
        ),
        ToolCallSpec::new(
            "read_file",
            json!({"path": "c:\\users\\ana\\src\\widgets\\src\\lib.rs"}),
            "pub fn x() {}\r\n",
        ),
        ToolCallSpec::new(
            "powershell",
            json!({"command": "Get-ChildItem src\\\\util -Recurse"}),
            "src\\util\\a.rs\r\n",
        ),
        ToolCallSpec::new(
            "cmd",
            json!({"command": "type docs\\guide.md && git status"}),
            "",
        ),
    ];
    write_at(&sb, win_root, WIN, &[turn]);

    let status = sb.ok(&["status"]);
    assert!(
        status.contains(WIN),
        "status lists the Windows session:\n{status}"
    );
    let report = sb.json(&["archive", "--json"]);
    assert_eq!(report["sessions"][0]["sessionId"], WIN, "{report}");
    assert_eq!(report["sessions"][0]["turnsArchived"], 1, "{report}");

    let sig = &collection(&sb, WIN)[0];
    assert_eq!(
        strings(&sig["paths"]),
        [
            "src/parse.rs",
            "src/x.rs",
            "src/lib.rs",
            "docs/guide.md",
            "src/util/a.rs"
        ],
        "{sig}"
    );
    assert_eq!(
        strings(&sig["commands"]),
        [
            "get-content",
            "select-string fn",
            "cargo test",
            "get-childitem",
            "type",
            "git status"
        ],
        "{sig}"
    );
    let (_, chapter) = &chapters_of(&sb, WIN)[0];
    assert!(
        chapter.contains("\r\nline two\u{0}end"),
        "CRLF and NUL verbatim in the chapter"
    );
}

#[test]
fn a_monorepo_package_session_belongs_to_the_root_and_a_prefix_sibling_does_not() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let sub_cwd = sb.ws.join("svc").join("api");
    std::fs::create_dir_all(&sub_cwd).expect("package dir");
    // `<tmp>/ws-old`: its cwd key extends the workspace's (`…-ws-old`), but it is not inside.
    let sibling = Path::new(&sb.ws_str()).with_file_name("ws-old");
    let mut turn = TurnSpec::new("Fix the handler in src/main.rs", "Done.");
    turn.tool_calls = vec![
        ToolCallSpec::new(
            "read_file",
            json!({"path": "src/main.rs"}),
            "fn main() {}\n",
        ),
        ToolCallSpec::new("bash", json!({"command": "cat ../web/app.ts"}), ""),
        ToolCallSpec::new(
            "read_file",
            json!({"path": sb.ws.join("Cargo.toml").to_string_lossy()}),
            "",
        ),
    ];
    write_at(&sb, &sub_cwd.to_string_lossy(), SUB, &[turn.clone()]);
    write_at(&sb, &sibling.to_string_lossy(), SIB, &[turn]);

    let status = sb.ok(&["status"]);
    assert!(
        status.contains(SUB),
        "status lists the package's session:\n{status}"
    );
    assert!(
        !status.contains(SIB),
        "a sibling sharing the prefix is not ours:\n{status}"
    );
    let report = sb.json(&["archive", "--json"]);
    let ids: Vec<&str> = report["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["sessionId"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [SUB], "{report}");
    let sig = &collection(&sb, SUB)[0];
    assert_eq!(
        strings(&sig["paths"]),
        ["svc/api/src/main.rs", "svc/web/app.ts", "Cargo.toml"],
        "paths relative to the workspace root: {sig}"
    );
}

/// One task, in Chinese: a latency analysis continued turn after turn, then a new task.
use dsh_chapters::testkit::realshape::ZH_TASK_TURNS as ZH_TURNS;

#[test]
fn a_chinese_session_of_one_task_merges_by_its_terms() {
    let sb = Sandbox::new();
    let turns: Vec<TurnSpec> = ZH_TURNS
        .iter()
        .enumerate()
        .map(|(i, text)| TurnSpec::new(text, &format!("第{i}步：已分析。")))
        .collect();
    sb.write_session(ZH, 4, true, &turns);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);

    let sigs = collection(&sb, ZH);
    assert_eq!(sigs.len(), ZH_TURNS.len());
    for sig in &sigs {
        assert!(
            !strings(&sig["terms"]).is_empty(),
            "terms from Chinese text: {sig}"
        );
    }
    let chapters = chapters_of(&sb, ZH);
    let mut with_topics = 0;
    let mut merged_by_overlap = 0;
    for (name, text) in &chapters {
        let fm: serde_json::Value = serde_saphyr::from_str(
            dsh_chapters::render::frontmatter_text(text).expect("frontmatter"),
        )
        .expect("yaml");
        if !fm["topics"].as_array().expect("topics").is_empty() {
            with_topics += fm["turns"].as_array().expect("turns").len();
        }
        // `NNN-<slug>.md`: the slug says something, never `chapter` nor digits alone.
        let slug = name[4..].trim_end_matches(".md");
        assert!(
            slug != "chapter" && slug.chars().any(|c| c.is_ascii_lowercase()),
            "{name}"
        );
        let composition = text
            .lines()
            .find(|l| l.starts_with("composition:"))
            .expect("composition");
        merged_by_overlap += composition.matches("rule: overlap").count();
    }
    assert_eq!(
        with_topics,
        ZH_TURNS.len(),
        "every turn's chapter has topics"
    );
    // The seven turns of the latency analysis are one chapter; the button task another
    // (issue 14 point 5; was six chapters before bigram cuts, the CJK term budget and the
    // containment view).
    let turns_of = |text: &str| -> Vec<u64> {
        let fm: serde_json::Value = serde_saphyr::from_str(
            dsh_chapters::render::frontmatter_text(text).expect("frontmatter"),
        )
        .expect("yaml");
        fm["turns"]
            .as_array()
            .expect("turns")
            .iter()
            .map(|t| t.as_u64().expect("turn"))
            .collect()
    };
    assert_eq!(
        chapters.len(),
        2,
        "one chapter per task: {:?}",
        chapters.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    assert_eq!(turns_of(&chapters[0].1).len(), 7, "{}", chapters[0].1);
    assert_eq!(turns_of(&chapters[1].1).len(), 1);
    // The composition scores say why: six merges by overlap, then a topic change.
    assert_eq!(merged_by_overlap, 6, "{}", chapters[0].1);
    assert!(
        chapters[1].1.contains("rule: topic-change"),
        "{}",
        chapters[1].1
    );
}
