//! The demo's session (`chapters demo`), as the generator writes it: six turns in two tasks,
//! a large test log (an artifact), a plan, planted credentials, the last turn still in
//! flight. Recorded once into `src/demo/session.v4.jsonl.zst` for the workspace
//! [`RECORDED_WORKSPACE`] (the shipped demo embeds that log and holds no generator);
//! `tests/it/shape.rs` checks the recording is what this writes. To record it again:
//! `write(path, RECORDED_WORKSPACE)` into the file, then run that test.

use std::io;
use std::path::Path;

use serde_json::json;

use super::writer::{LogWriter, SessionScript, ToolCallSpec, TurnSpec};
pub use crate::demo::RECORDED_WORKSPACE;
use crate::demo::{DEMO_SESSION_ID, DEMO_START_MS};

/// Write the demo's session log (zstd, format v4) for the workspace `ws` at `path`.
pub fn write(path: &Path, ws: &str) -> io::Result<()> {
    let mut script = SessionScript::new(4, DEMO_START_MS);
    let header = script.header(DEMO_SESSION_ID, ws, DEMO_START_MS);
    let mut writer = LogWriter::create(path, true, &header)?;
    for turn in turns(ws) {
        writer.append_turn(&mut script, &turn)?;
    }
    Ok(())
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
