//! One identity per machine: the harness id the shell had when `init` or `daemon install`
//! ran is saved in the home config, so commands launched without the shell's environment
//! (the daemon's unit, an editor's `chapters mcp`) speak as the same machine.

use std::process::Output;

use crate::support::Sandbox;

fn home_config(sb: &Sandbox) -> String {
    std::fs::read_to_string(sb.home.join("dsh-chapters/config.yml")).unwrap_or_default()
}

/// Run with CHAPTERS_HARNESS_ID unset (as a unit or an editor would), or set to `id`.
fn run_as(sb: &Sandbox, args: &[&str], id: Option<&str>) -> Output {
    let mut cmd = sb.cmd(args);
    match id {
        Some(id) => cmd.env("CHAPTERS_HARNESS_ID", id),
        None => cmd.env_remove("CHAPTERS_HARNESS_ID"),
    };
    let out = cmd.output().expect("run chapters");
    assert!(
        out.status.success(),
        "chapters {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn status_as(sb: &Sandbox, id: Option<&str>) -> serde_json::Value {
    serde_json::from_slice(&run_as(sb, &["status", "--json"], id).stdout).expect("status json")
}

#[test]
fn init_saves_the_shells_harness_id_for_everything_launched_without_it() {
    let sb = Sandbox::machine("box-a");
    let init: serde_json::Value =
        serde_json::from_slice(&run_as(&sb, &["init", "--json"], Some("box-a")).stdout)
            .expect("init json");
    assert_eq!(init["harnessId"], "box-a");
    assert_eq!(init["harnessIdSaved"], true);
    assert!(
        home_config(&sb).contains("harnessId: \"box-a\""),
        "{}",
        home_config(&sb)
    );

    // Without the variable (the daemon's unit, `chapters mcp` from an editor): same machine.
    let st = status_as(&sb, None);
    assert_eq!(st["harnessId"], "box-a");
    assert!(st["harnessIdWarning"].is_null(), "{st}");

    // A second init changes nothing.
    let again: serde_json::Value =
        serde_json::from_slice(&run_as(&sb, &["init", "--json"], Some("box-a")).stdout)
            .expect("init json");
    assert_eq!(again["harnessIdSaved"], false);
    assert_eq!(home_config(&sb).matches("harnessId").count(), 1);

    // The shell now says another name: it wins for this shell, and status says the two split.
    let st = status_as(&sb, Some("box-b"));
    assert_eq!(st["harnessId"], "box-b");
    let warning = st["harnessIdWarning"].as_str().expect("a warning");
    assert!(
        warning.contains("\"box-b\"") && warning.contains("\"box-a\""),
        "{warning}"
    );
    let text =
        String::from_utf8_lossy(&run_as(&sb, &["status"], Some("box-b")).stdout).into_owned();
    assert!(
        text.contains("warning: CHAPTERS_HARNESS_ID is \"box-b\""),
        "{text}"
    );
}

#[test]
fn a_harness_id_a_person_wrote_is_never_replaced() {
    let sb = Sandbox::machine("box-c");
    std::fs::create_dir_all(sb.home.join("dsh-chapters")).expect("dir");
    let mine = "# mine\nharnessId: laptop\n";
    std::fs::write(sb.home.join("dsh-chapters/config.yml"), mine).expect("config");
    run_as(&sb, &["init"], Some("box-c"));
    assert_eq!(home_config(&sb), mine);
    assert_eq!(status_as(&sb, None)["harnessId"], "laptop");
    assert!(status_as(&sb, Some("box-c"))["harnessIdWarning"].is_string());
}

#[test]
fn the_host_name_is_saved_when_nothing_named_the_machine() {
    let sb = Sandbox::new();
    // Other keys of the file stay as they were.
    std::fs::create_dir_all(sb.home.join("dsh-chapters")).expect("dir");
    std::fs::write(
        sb.home.join("dsh-chapters/config.yml"),
        "mergeThreshold: 0.3",
    )
    .expect("config");
    run_as(&sb, &["init"], None);
    let host = dsh_chapters::identity::host_name();
    let text = home_config(&sb);
    assert!(text.starts_with("mergeThreshold: 0.3\n"), "{text}");
    assert!(text.contains(&format!("harnessId: \"{host}\"")), "{text}");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(sb.home.join("dsh-chapters/config.yml"))
        .expect("config")
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "the home config is owner-only: {mode:o}");
}

#[test]
fn daemon_install_saves_the_harness_id_and_the_unit_copies_no_environment() {
    let sb = Sandbox::machine("box-d");
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cmd = sb.cmd(&["daemon", "install"]);
    cmd.env("HOME", tmp.path())
        .env("XDG_CONFIG_HOME", tmp.path().join("xdg"))
        .env("DSH_CHAPTERS_NO_SERVICE_MANAGER", "1");
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("saved harness id \"box-d\""), "{stdout}");
    assert!(home_config(&sb).contains("harnessId: \"box-d\""));
    let unit = std::fs::read_to_string(tmp.path().join("xdg/systemd/user/dsh-chapters.service"))
        .expect("unit");
    assert!(!unit.contains("CHAPTERS_"), "{unit}");
    assert!(
        unit.contains("ExecReload=/bin/kill -HUP $MAINPID"),
        "{unit}"
    );
    // The daemon reads the same file: a status without the variable says box-d.
    assert_eq!(status_as(&sb, None)["harnessId"], "box-d");
}

#[test]
fn link_saves_the_harness_id_too() {
    let sb = Sandbox::machine("box-e");
    let pool = sb.home.join("pool.git");
    let out = run_as(
        &sb,
        &[
            "link",
            pool.to_str().expect("utf-8"),
            "--visibility",
            "private",
            "--json",
        ],
        Some("box-e"),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("link json");
    assert_eq!(v["harnessIdSaved"], true, "{v}");
    assert!(home_config(&sb).contains("harnessId: \"box-e\""));
}

#[test]
fn a_variable_that_is_not_utf8_is_refused_by_name_not_a_crash() {
    use std::os::unix::ffi::OsStrExt as _;
    let sb = Sandbox::new();
    let mut cmd = sb.cmd(&["status"]);
    cmd.env(
        "CHAPTERS_HARNESS_ID",
        std::ffi::OsStr::from_bytes(b"box-\xff"),
    );
    let out = cmd.output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("CHAPTERS_HARNESS_ID"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `chapters status | head -1`: the reader leaves early; the writer ends quietly.
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    use std::io::Read as _;
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    for args in [&["status"][..], &["daemon", "status"][..], &["--help"][..]] {
        let mut child = sb
            .cmd(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        // Close our end at once: every write of the child meets a closed pipe.
        drop(child.stdout.take());
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut stderr)
            .expect("read stderr");
        let status = child.wait().expect("wait");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(status.code(), Some(101), "{args:?}: {stderr}");
    }
}

/// An error whose message already holds its cause says the cause once.
#[test]
fn an_error_says_its_cause_once() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    std::fs::create_dir_all(sb.ws.join(".dsh-chapters/config.yml")).expect("a directory");
    let out = sb.run(&["status"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("config.yml"), "{stderr}");
    assert_eq!(stderr.matches("os error 21").count(), 1, "{stderr}");
}

/// A `--json` command that fails still prints one JSON document on stdout, naming the error.
#[test]
fn a_json_failure_is_one_json_document_on_stdout() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    std::fs::create_dir_all(sb.ws.join(".dsh-chapters/config.yml")).expect("a directory");
    let out = sb.run(&["status", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["error"]["code"], "failed", "{doc}");
    let message = doc["error"]["message"].as_str().expect("a message");
    assert!(message.contains("config.yml"), "{message}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("config.yml"));

    let out = sb.run(&["status", "--json", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["error"]["code"], "usage", "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .expect("a message")
            .contains("--no-such-flag"),
        "{doc}"
    );
}

/// One resolution of environment, config and identity: the CLI's commands, `chapters mcp`
/// (which resolves as the CLI does) and the daemon's workspaces all go through
/// `dsh_chapters::resolve::workspace`. This reads the sources: the steps it takes are called
/// nowhere else outside tests, but where listed with the reason.
#[test]
fn cli_daemon_and_mcp_resolve_through_one_function() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    crate::cycles::sources(&root.join("src"), &mut files);
    files.sort();
    // (call, file) pairs allowed besides `src/resolve.rs`, each with its reason.
    let allowed: &[(&str, &str, &str)] = &[
        (
            "config::load(",
            "src/cli/status.rs",
            "the config files without the environment, to say when CHAPTERS_HARNESS_ID disagrees with them",
        ),
        (
            "config::load(",
            "src/cli/enrich.rs",
            "checks a config it just wrote, to put the old one back if it is invalid",
        ),
        (
            "identity::harness_id(",
            "src/cli/daemon.rs",
            "`daemon install` saves the home config's harness id for the unit",
        ),
    ];
    let mut found = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(root)
            .expect("under the crate")
            .to_string_lossy()
            .into_owned();
        if rel == "src/resolve.rs" {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("read");
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(at) => &text[..at],
            None => &text[..],
        };
        for call in [
            "config::load(",
            "identity::resolve(",
            "identity::harness_id(",
            "migrate_secret(",
            "fn dsh_home(",
        ] {
            let hits = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//") && l.contains(call))
                // A definition is not a call (but a second `fn dsh_home` is a second way).
                .filter(|l| call.starts_with("fn ") || !l.contains("fn "))
                .count();
            if hits > 0
                && !allowed
                    .iter()
                    .any(|(c, file, _)| *c == call && *file == rel)
            {
                found.push(format!("{rel}: {call} ({hits}×)"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "resolve through dsh_chapters::resolve, not by hand:\n{}",
        found.join("\n")
    );
    let resolve = std::fs::read_to_string(root.join("src/resolve.rs")).expect("resolve.rs");
    for call in [
        "config::load(",
        "identity::resolve(",
        "identity::harness_id(",
        "migrate_secret(",
    ] {
        assert!(resolve.contains(call), "resolve.rs no longer calls {call}");
    }
    for (door, call) in [
        ("src/cli/mod.rs", "resolve::workspace("),
        ("src/daemon/context.rs", "resolve::workspace("),
        ("src/cli/mcp.rs", "Env::resolve("),
    ] {
        let text = std::fs::read_to_string(root.join(door)).expect("door");
        assert!(text.contains(call), "{door} does not call {call}");
    }
}
