//! Every transport people use: the forge user a token goes with (`link --user`, or the
//! URL's), a token rotated by linking again, `chapters unlink`, and the warning for a
//! token over plain http to another host.

use std::process::Command;

use crate::githttp::{GitHttpServer, WebPageServer};
use crate::support::{two_task_turns, Sandbox};

const SESSION: &str = "session-77777777-7777-4777-8777-777777777777";

fn forge(tmp: &std::path::Path, token: &str) -> GitHttpServer {
    let root = tmp.join("forge");
    std::fs::create_dir_all(&root).expect("forge");
    assert!(Command::new("git")
        .args(["init", "--bare", "-q", "-b", "main"])
        .arg(root.join("pool.git"))
        .status()
        .expect("git")
        .success());
    GitHttpServer::start(&root, Some(token))
}

fn sync_code(sb: &Sandbox) -> (String, String) {
    let out = sb.run(&["sync", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (
        v["code"].as_str().unwrap_or_default().to_owned(),
        v.to_string(),
    )
}

#[test]
fn the_token_goes_as_the_named_user_rotates_and_unlink_keeps_the_store() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = forge(tmp.path(), "tok-one");
    server.set_user(Some("ana"));
    let url = server.url("pool.git");
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, "tok-one\n").expect("token");
    let sb = Sandbox::machine("user-a");
    sb.ok(&["init"]);
    sb.write_session(SESSION, 4, true, &two_task_turns(&sb.ws));
    sb.ok(&["archive"]);

    // Without a user: sent as x-access-token, refused, and the failure names that user.
    let t = token_file.to_str().expect("utf-8");
    sb.ok(&["link", &url, "--visibility", "private", "--token-file", t]);
    let (code, report) = sync_code(&sb);
    assert_eq!(code, "auth", "{report}");
    assert!(report.contains("x-access-token"), "{report}");

    // With --user: accepted, kept in the link.
    let v = sb.json(&[
        "link",
        &url,
        "--visibility",
        "private",
        "--token-file",
        t,
        "--user",
        "ana",
        "--json",
    ]);
    assert_eq!(v["user"], "ana", "{v}");
    let (code, report) = sync_code(&sb);
    assert_eq!(code, "ok", "{report}");

    // Linking again with a new token rotates it.
    server.set_token(Some("tok-two".into()));
    assert_eq!(sync_code(&sb).0, "auth");
    std::fs::write(&token_file, "tok-two\n").expect("token");
    sb.ok(&[
        "link",
        &url,
        "--visibility",
        "private",
        "--token-file",
        t,
        "--user",
        "ana",
    ]);
    let (code, report) = sync_code(&sb);
    assert_eq!(code, "ok", "{report}");

    // Unlink: the link and the token go, the store and its chapters stay.
    let chapters_before = sb.chapter_files();
    let v = sb.json(&["unlink", "--json"]);
    assert_eq!(v["unlinked"], true, "{v}");
    assert_eq!(v["tokenRemoved"], true, "{v}");
    assert!(!sb.store().join("pool.json").exists());
    let creds = sb.home.join("dsh-chapters/credentials");
    let left: Vec<_> = std::fs::read_dir(&creds)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(sb.chapter_files(), chapters_before);
    let st = sb.json(&["status", "--json"]);
    assert!(st["upstream"].is_null(), "{st}");
    assert_eq!(sb.json(&["unlink", "--json"])["unlinked"], false);
}

#[test]
fn a_bad_user_or_a_user_without_a_token_transport_is_refused_and_plain_http_is_warned() {
    let tmp = tempfile::tempdir().expect("tmp");
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, "tok\n").expect("token");
    let t = token_file.to_str().expect("utf-8");
    for (target, extra) in [
        (
            "https://git.example.com/p.git",
            vec!["--token-file", t, "--user", "a:b"],
        ),
        (
            "https://git.example.com/p.git",
            vec!["--token-file", t, "--user", ""],
        ),
        ("git@git.example.com:t/p.git", vec!["--user", "ana"]),
        // A query or a fragment git would send every request after: refused, not kept.
        (
            "https://git.example.com/p.git?ref=main",
            vec!["--token-file", t],
        ),
        (
            "https://git.example.com/p.git#main",
            vec!["--token-file", t],
        ),
        ("ssh://git.example.com/p.git?x=1", vec![]),
    ] {
        let mut args = vec!["link", target, "--visibility", "private"];
        args.extend(extra.iter().copied());
        let out = sb.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(!sb.store().join("pool.json").exists(), "{args:?}");
    }
    // Plain http to another host with a token: linked, and warned (no network at link).
    let out = sb.run(&[
        "link",
        "http://git.example.com/p.git",
        "--visibility",
        "private",
        "--token-file",
        t,
    ]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sent in clear"), "{stderr}");
    assert!(
        !stderr.contains("tok\n") && !stderr.contains(" tok "),
        "{stderr}"
    );
}

#[test]
fn a_pool_url_that_answers_a_web_page_fails_sync_as_not_git_and_says_what_to_check() {
    let page = WebPageServer::start();
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    sb.write_session(SESSION, 4, true, &two_task_turns(&sb.ws));
    sb.ok(&["archive"]);
    sb.ok(&["link", &page.url("pool.git"), "--visibility", "private"]);
    let (code, doc) = sync_code(&sb);
    assert_eq!(code, "not-git", "{doc}");
    assert!(doc.contains("git ls-remote"), "{doc}");
    // Local-only meanwhile, the code kept for status.
    let status = sb.json(&["status", "--json"]);
    assert!(status.to_string().contains("not-git"), "{status}");
}
