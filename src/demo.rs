//! `chapters demo`: a small, realistic DSH session written as a real zstd log into a
//! scratch home, for the README's first command. Shell (it writes files).

use std::io;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::session::writer::{session_log_path, LogWriter, SessionScript, ToolCallSpec, TurnSpec};

/// Where the demo put things.
pub struct DemoSetup {
    pub dsh_home: PathBuf,
    pub workspace: PathBuf,
    pub session_id: String,
    pub log: PathBuf,
}

pub const DEMO_SESSION_ID: &str = "session-0b7e3c2a-5d1f-4e8a-9c6b-2f4d8a1e7c30";
/// 2025-11-29T07:06:40Z: a fixed clock so the demo's chapters are the same on every run.
const DEMO_START_MS: i64 = 1_764_400_000_000;

/// Write a workspace (a git checkout with an `origin` remote, so the project key is the
/// stable remote-derived one) and one session log of six turns, the last still in flight.
pub fn prepare(root: &Path) -> io::Result<DemoSetup> {
    let dsh_home = root.join("dsh-home");
    let workspace = root.join("widgets");
    std::fs::create_dir_all(workspace.join(".git"))?;
    std::fs::create_dir_all(workspace.join("src/auth"))?;
    std::fs::write(
        workspace.join(".git/config"),
        "[core]\n\trepositoryformatversion = 0\n[remote \"origin\"]\n\turl = git@github.com:example/widgets.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
    )?;
    let ws = workspace.to_string_lossy().into_owned();
    let log = session_log_path(&dsh_home, &ws, DEMO_SESSION_ID, 4, true);
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut script = SessionScript::new(4, DEMO_START_MS);
    let header = script.header(DEMO_SESSION_ID, &ws, DEMO_START_MS);
    let mut writer = LogWriter::create(&log, true, &header)?;
    for turn in turns(&ws) {
        writer.append_turn(&mut script, &turn)?;
    }
    Ok(DemoSetup {
        dsh_home,
        workspace,
        session_id: DEMO_SESSION_ID.to_owned(),
        log,
    })
}

fn bash(command: &str, output: &str) -> ToolCallSpec {
    ToolCallSpec::new("bash", json!({ "command": command }), output)
}

fn read(ws: &str, path: &str, output: &str) -> ToolCallSpec {
    ToolCallSpec::new(
        "read_file",
        json!({ "path": format!("{ws}/{path}") }),
        output,
    )
}

fn turns(ws: &str) -> Vec<TurnSpec> {
    let middleware = "pub fn refresh(token: &Token) -> Result<Session, AuthError> {\n    \
        if token.expired() {\n        return Err(AuthError::Expired);\n    }\n    Session::renew(token)\n}\n";
    let big_log: String = (0..1200)
        .map(|i| format!("test auth::middleware::case_{i:04} ... ok\n"))
        .collect();

    let mut t1 = TurnSpec::new(
        "The refresh token middleware in src/auth/middleware.rs rejects tokens that are still valid. Find out why.",
        "The expiry check compares seconds with milliseconds: `expired()` multiplies twice. I'll fix it in src/auth/middleware.rs.",
    );
    t1.pre_turn = true;
    t1.tool_calls = vec![
        read(ws, "src/auth/middleware.rs", middleware),
        bash(
            "cargo test -p auth refresh",
            "test refresh_valid_token ... FAILED\n",
        ),
    ];

    let mut t2 = TurnSpec::new(
        "Fix the expiry check in the refresh middleware and run the auth tests.",
        "Fixed: `expired()` now compares milliseconds. All auth tests pass (log stored as an artifact).",
    );
    t2.tool_calls = vec![
        read(ws, "src/auth/middleware.rs", middleware),
        bash("cargo test -p auth", &big_log),
    ];

    let mut t3 = TurnSpec::new(
        "Deploy it to staging. The staging key is AKIAIOSFODNN7EXAMPLE and the token ghp_16C7e42F292c6912E7710c838347Ae178B4a — don't print them.",
        "Deployed to staging with the key from the environment; the health check is green.",
    );
    t3.tool_calls = vec![bash(
        "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE ./scripts/deploy.sh staging",
        "deploying widgets@staging ... done\nhealth: ok\n",
    )];

    let mut t4 = TurnSpec::new(
        "Next task: the CSV exporter in src/export/csv.rs drops the header row. Plan the fix first.",
        "Here is the plan; I'll wait for your go-ahead.",
    );
    t4.tool_calls = vec![read(
        ws,
        "src/export/csv.rs",
        "pub fn export(rows: &[Row]) -> String { rows_to_csv(rows) }\n",
    )];
    t4.plan = Some(
        "# Fix the CSV header\n\n1. Write the header row before the data rows in `src/export/csv.rs`.\n2. Add a test with an empty table.\n3. Run `cargo test -p export`.\n"
            .to_owned(),
    );

    let mut t5 = TurnSpec::new(
        "Go ahead with the CSV plan.",
        "The exporter now writes the header row first; `cargo test -p export` passes.",
    );
    t5.tool_calls = vec![
        read(
            ws,
            "src/export/csv.rs",
            "pub fn export(rows: &[Row]) -> String { header() + &rows_to_csv(rows) }\n",
        ),
        bash(
            "cargo test -p export",
            "test export_empty_table ... ok\ntest export_header ... ok\n",
        ),
    ];

    let mut t6 = TurnSpec::new("Now update the changelog.", "");
    t6.end_reason = None;

    vec![t1, t2, t3, t4, t5, t6]
}
