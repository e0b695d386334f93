//! A local pool's publish survives a power cut: the objects a commit names are on disk before
//! the ref moves, and the moved ref after. Shown with a real syscall trace (strace) of a real
//! `chapters sync`: the publish's objects go into one pack written by `chapters` itself (no
//! loose object file, no `git pack-objects`), its pack and index fsynced under temp names,
//! renamed (index last) and the pack directory fsynced, all before the ref moves. And an
//! archive's group commit keeps its order: documents, one `syncfs`, the commit line (synced),
//! then the catalog's record — the catalog itself opened (made) on a thread while the
//! archive writes, durable before the commit line.

use std::path::Path;

use crate::support::{link_private, two_task_turns, Sandbox};

const SESSION: &str = "session-d0d0d0d0-0000-4000-8000-000000000001";

/// One traced call: its text as strace printed it (`-y` resolves fds to paths).
fn trace_of(sb: &Sandbox, args: &[&str], out: &Path) -> Vec<String> {
    traced(
        sb,
        args,
        out,
        "trace=syncfs,fsync,fdatasync,rename,renameat,renameat2,link,linkat",
    )
}

/// [`trace_of`] of the system calls `filter` names.
fn traced(sb: &Sandbox, args: &[&str], out: &Path, filter: &str) -> Vec<String> {
    let mut cmd = std::process::Command::new("strace");
    cmd.args(["-f", "-qq", "-y", "-s", "4096", "-o"])
        .arg(out)
        .args(["-e", filter])
        .arg(env!("CARGO_BIN_EXE_chapters"))
        .args(args)
        .current_dir(&sb.ws)
        .env("DSH_HOME", &sb.home)
        .env("CHAPTERS_HARNESS_ID", &sb.harness);
    let status = cmd
        .status()
        .expect("strace (install it: apt-get install strace)");
    assert!(status.success(), "strace chapters {args:?}");
    std::fs::read_to_string(out)
        .expect("trace")
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_local_publish_flushes_objects_before_the_ref_moves_and_the_ref_after() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = std::fs::canonicalize(tmp.path())
        .expect("canon")
        .join("pool.git");
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    sb.write_session(SESSION, 4, true, &two_task_turns(&sb.ws));
    sb.ok(&["archive"]);
    link_private(&sb, &pool);
    // The first sync creates the pool; the traced one publishes into an existing pool.
    sb.ok(&["sync"]);
    sb.write_session(
        "session-d0d0d0d0-0000-4000-8000-000000000002",
        4,
        true,
        &two_task_turns(&sb.ws),
    );
    sb.ok(&["archive"]);

    let lines = trace_of(&sb, &["sync"], &tmp.path().join("trace"));
    let pool_text = pool.display().to_string();
    let in_pool = |l: &str, sub: &str| l.contains(&format!("{pool_text}/{sub}"));
    let ref_moved = lines
        .iter()
        .position(|l| l.contains("rename") && in_pool(l, "refs/heads/main.lock"))
        .unwrap_or_else(|| panic!("the pool's main never moved:\n{}", lines.join("\n")));
    let last_object = lines[..ref_moved]
        .iter()
        .rposition(|l| (l.contains("rename") || l.contains("link")) && in_pool(l, "objects/"))
        .unwrap_or_else(|| panic!("no object written into the pool:\n{}", lines.join("\n")));
    let flushes_pool = |l: &String| {
        (l.contains("syncfs(") || l.contains("fsync("))
            && l.contains(&pool_text)
            && l.contains("= 0")
    };
    assert!(
        lines[last_object..ref_moved].iter().any(flushes_pool),
        "no flush of the pool between its last object and the ref's move:\n{}",
        lines[last_object..=ref_moved].join("\n")
    );
    assert!(
        lines[ref_moved..].iter().any(flushes_pool),
        "no flush of the pool after the ref moved:\n{}",
        lines[ref_moved..].join("\n")
    );

    // The publish wrote no loose object (a rename into `objects/xx/`; `-f` traces a `git`
    // child's too): its objects went into its own pack.
    let loose = lines.iter().find(|l| {
        l.contains("rename")
            && l.contains(&format!("{pool_text}/objects/"))
            && !l.contains(&format!("{pool_text}/objects/pack/"))
    });
    assert!(loose.is_none(), "a loose object written: {loose:?}");
    // Pack, then index, each renamed from a temp file fsynced before, all before the ref.
    let renamed = |ext: &str| {
        lines[..ref_moved]
            .iter()
            .position(|l| {
                l.contains("rename")
                    && in_pool(l, "objects/pack/pack-")
                    && l.trim_end().ends_with("= 0")
                    && l.contains(&format!(".{ext}\""))
            })
            .unwrap_or_else(|| panic!("no .{ext} renamed into the pool:\n{}", lines.join("\n")))
    };
    let (pack, idx) = (renamed("pack"), renamed("idx"));
    assert!(pack < idx, "the index was renamed before its pack");
    for (at, temp) in [(pack, "tmp_pack_"), (idx, "tmp_idx_")] {
        assert!(
            lines[..at]
                .iter()
                .any(|l| l.contains("fsync(") && in_pool(l, &format!("objects/pack/{temp}"))),
            "{temp} not fsynced before its rename:\n{}",
            lines[..=at].join("\n")
        );
    }
    assert!(
        lines[idx..ref_moved]
            .iter()
            .any(|l| l.contains("fsync(") && l.contains(&format!("{pool_text}/objects/pack>"))),
        "the pack directory not fsynced between the index's rename and the ref's move:\n{}",
        lines[idx..=ref_moved].join("\n")
    );
}

#[test]
fn an_archive_flushes_documents_before_its_commit_line_and_records_the_catalog_after() {
    let tmp = tempfile::tempdir().expect("tmp");
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    sb.write_session(SESSION, 4, true, &two_task_turns(&sb.ws));
    let lines = traced(
        &sb,
        &["archive"],
        &tmp.path().join("trace"),
        "trace=syncfs,fsync,fdatasync,link,linkat,write,pwrite64",
    );
    let store = sb.store().display().to_string();
    let all = || lines.join("\n");
    let find = |from: usize, what: &dyn Fn(&str) -> bool, name: &str| {
        lines[from..]
            .iter()
            .position(|l| what(l))
            .map(|at| from + at)
            .unwrap_or_else(|| panic!("no {name} after line {from}:\n{}", all()))
    };
    let last_doc = lines
        .iter()
        .rposition(|l| {
            l.contains("linkat(") && l.contains(&format!("{store}/")) && l.contains("/chapters/")
        })
        .unwrap_or_else(|| panic!("no chapter written:\n{}", all()));
    // The catalog, made ahead, is in place before the flush that makes the group durable.
    let catalog_linked = find(
        0,
        &|l| l.contains("link") && l.contains(&format!("\"{store}/.catalog.sqlite3\"")),
        "catalog made",
    );
    let flush = find(
        last_doc,
        &|l| l.contains("syncfs(") && l.contains(&store),
        "syncfs of the store",
    );
    assert!(
        catalog_linked < flush,
        "the catalog was made after the flush:\n{}",
        all()
    );
    let commit_written = find(
        flush,
        &|l| l.contains("write(") && l.contains("commits.jsonl>"),
        "commit line",
    );
    let commit_synced = find(
        commit_written,
        &|l| l.contains("fdatasync(") && l.contains("commits.jsonl>"),
        "commit line synced",
    );
    // Nothing goes into the catalog before the commit line is durable; its record after.
    let into_catalog =
        |l: &str| l.contains("write64(") && l.contains(&format!("{store}/.catalog.sqlite3-wal>"));
    let early = lines[..commit_synced].iter().find(|l| into_catalog(l));
    assert!(
        early.is_none(),
        "a catalog write before the commit line: {early:?}\n{}",
        all()
    );
    let record = find(commit_synced, &into_catalog, "catalog record");
    find(
        record,
        &|l| l.contains("fsync(") && l.contains(&format!("{store}/.catalog.sqlite3-wal>")),
        "catalog record synced",
    );
}
