//! Codex's screen and tool vocabulary. Pure.
//!
//! Screen: `developer`/`system` messages, and user-role host context: `# AGENTS.md
//! instructions…`, `<user_instructions>`, `<environment_context>`, `<INSTRUCTIONS>`,
//! `<user_shell_command>` plumbing, `<skill>`, `<turn_aborted>`, `<subagent_notification>`. Tool vocabulary: `shell` / `exec_command` /
//! `local_shell` take a `command`/`cmd` argv or script (the shared signature reads them);
//! `apply_patch` (a freeform tool) carries a patch whose `*** Add/Update/Delete File:` and
//! `*** Move to:` lines name the paths it touches: they are given as `paths`. Code mode's
//! `exec` runs a program that calls those tools (`codex::code_mode`).

/// The person's own prompt.
pub(crate) const HUMAN: &str = "user";
/// `developer` / `system` role messages.
pub(crate) const DEVELOPER: &str = "codex-developer";
/// User-role host context (instruction files, environment snapshot).
pub(crate) const CONTEXT: &str = "codex-context";

const CONTEXT_PREFIXES: &[&str] = &[
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
    "<environment_context>",
    "<user_instructions>",
    "<user_shell_command>",
    // Fragments Codex itself marks as context, not the person's (codex-rs 2026): a skill's
    // text, an interruption notice, a subagent's notification to its parent.
    "<skill>",
    "<turn_aborted>",
    "<subagent_notification>",
];

/// The source kind of a user-role message's text.
pub(crate) fn classify_user(text: &str) -> &'static str {
    let t = text.trim_start();
    if CONTEXT_PREFIXES.iter().any(|p| t.starts_with(p)) {
        CONTEXT
    } else {
        HUMAN
    }
}

/// A freeform call's arguments as JSON the shared signature reads: `{"input": …}`, plus
/// `paths` for `apply_patch`; for code mode's `exec` (a program calling the tools), the
/// program's commands as one `cmd` script and its patches' `paths`.
pub(crate) fn custom_call_arguments(name: &str, input: &str) -> String {
    let mut args = serde_json::json!({ "input": input });
    let paths = match name {
        "apply_patch" => patch_paths(input),
        "exec" => {
            let program = super::code_mode::read(input);
            if !program.commands.is_empty() {
                args["cmd"] = program.commands.join("\n").into();
            }
            let mut paths: Vec<String> = Vec::new();
            for p in program.patches.iter().flat_map(|patch| patch_paths(patch)) {
                if !paths.contains(&p) {
                    paths.push(p);
                }
            }
            paths
        }
        _ => Vec::new(),
    };
    if !paths.is_empty() {
        args["paths"] = paths.into();
    }
    args.to_string()
}

/// The paths an `apply_patch` patch names, in order, once each.
pub(crate) fn patch_paths(patch: &str) -> Vec<String> {
    const MARKS: &[&str] = &[
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        for m in MARKS {
            if let Some(p) = line.strip_prefix(m) {
                let p = p.trim().to_owned();
                if !p.is_empty() && !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_and_patches() {
        assert_eq!(classify_user("fix it"), HUMAN);
        assert_eq!(
            classify_user("# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>x"),
            CONTEXT
        );
        assert_eq!(
            classify_user("<environment_context>\n<cwd>/w</cwd>"),
            CONTEXT
        );
        for host in [
            "<turn_aborted>The user interrupted the previous turn on purpose.</turn_aborted>",
            "<subagent_notification>{\"agent_id\":\"a1\",\"status\":\"completed\"}</subagent_notification>",
            "<skill>\n<name>pdf</name></skill>",
        ] {
            assert_eq!(classify_user(host), CONTEXT, "{host}");
        }
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-x\n+y\n*** Add File: b.md\n+hi\n*** Update File: src/a.rs\n*** End Patch";
        assert_eq!(patch_paths(patch), ["src/a.rs", "b.md"]);
        let args: serde_json::Value =
            serde_json::from_str(&custom_call_arguments("apply_patch", patch)).unwrap();
        assert_eq!(args["paths"][1], "b.md");
    }
}
