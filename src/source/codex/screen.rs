//! Codex's screen and tool vocabulary. Pure.
//!
//! Screen: `developer`/`system` messages, and user-role host context: `# AGENTS.md
//! instructions…`, `<user_instructions>`, `<environment_context>`, `<INSTRUCTIONS>`,
//! `<user_shell_command>` plumbing, `<skill>`, `<turn_aborted>`, `/review`'s `<user_action>`, a hook's `<hook_prompt …>`,
//! `<codex_internal_context …>`, Codex's own `Warning: …` notices (any letter case). A `<subagent_notification>` (a
//! subagent's final message to its parent) is a delegate's report: conversation, never terms,
//! read as its text (`delegate_report`). Tool vocabulary: `shell` / `exec_command` /
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
/// A subagent's notification to its parent: a delegate's report (`source::DELEGATE_REPORT`).
pub(crate) const DELEGATE: &str = crate::source::DELEGATE_REPORT;

const NOTIFICATION_OPEN: &str = "<subagent_notification>";
const NOTIFICATION_CLOSE: &str = "</subagent_notification>";

const CONTEXT_PREFIXES: &[&str] = &[
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
    "<environment_context>",
    "<user_instructions>",
    "<user_shell_command>",
    // Fragments Codex itself marks as context, not the person's (codex-rs 2026): a skill's
    // text, an interruption notice, a hook's prompt, its internal steering, and the
    // warnings it sends in the person's role.
    "<skill>",
    "<turn_aborted>",
    // Plugins Codex offers the agent (paginated rollouts).
    "<recommended_plugins>",
    // `/review`'s results handed to the agent (the review itself is the answer after it).
    "<user_action>",
    "<hook_prompt",
    "<codex_internal_context",
    "Warning: The maximum number of unified exec processes you can keep open is",
    "Warning: Your account was flagged for potentially high-risk cyber activity",
    "Warning: apply_patch was requested via ",
];

/// The source kind of a user-role message's text.
pub(crate) fn classify_user(text: &str) -> &'static str {
    let t = text.trim_start();
    if starts_with_ignoring_case(t, NOTIFICATION_OPEN) {
        DELEGATE
    } else if CONTEXT_PREFIXES
        .iter()
        .any(|p| starts_with_ignoring_case(t, p))
    {
        CONTEXT
    } else {
        HUMAN
    }
}

fn starts_with_ignoring_case(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

/// A `<subagent_notification>` as a person reads it: `{"agent_id": …, "status": …}` inside
/// the tags, where the status is a word (`"shutdown"`) or one key holding the subagent's
/// final message (`{"completed": "…"}`, `{"errored": "…"}`). `Subagent ID completed:` and the
/// message; the text as it came when it is not of that shape.
pub(crate) fn delegate_report(text: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Notification {
        agent_id: String,
        status: serde_json::Value,
    }
    let t = text.trim();
    let payload = t
        .get(NOTIFICATION_OPEN.len()..)
        .and_then(|rest| rest.strip_suffix(NOTIFICATION_CLOSE));
    let Some(note) = payload.and_then(|p| serde_json::from_str::<Notification>(p.trim()).ok())
    else {
        return text.to_owned();
    };
    let (status, message) = match &note.status {
        serde_json::Value::String(word) => (word.as_str(), None),
        serde_json::Value::Object(map) if map.len() == 1 => {
            let (word, value) = map.iter().next().expect("a map of one entry");
            (word.as_str(), value.as_str())
        }
        _ => return text.to_owned(),
    };
    let agent = crate::names::one_line(&note.agent_id);
    let status = crate::names::one_line(status).replace('_', " ");
    match message {
        Some(m) if !m.trim().is_empty() => format!("Subagent {agent} {status}:\n\n{m}"),
        _ => format!("Subagent {agent} {status}."),
    }
}

/// The person's answers to the agent's questions (`request_user_input`): a user-role
/// `<send_user_message_question_reply>` holding `[{"answer", "question"}]` JSON — the
/// answers, one a line (the questions are the agent's, in its call). `None` for any other
/// text, or a reply whose JSON is not of that shape (then it is read as it came).
pub(crate) fn question_reply(text: &str) -> Option<String> {
    const OPEN: &str = "<send_user_message_question_reply>";
    #[derive(serde::Deserialize)]
    struct Reply {
        answer: String,
    }
    let t = text.trim_start();
    if !starts_with_ignoring_case(t, OPEN) {
        return None;
    }
    let rest = t[OPEN.len()..].trim();
    let rest = rest
        .strip_suffix("</send_user_message_question_reply>")
        .unwrap_or(rest);
    let replies: Vec<Reply> = serde_json::from_str(rest.trim()).ok()?;
    let answers: Vec<&str> = replies
        .iter()
        .map(|r| r.answer.trim())
        .filter(|a| !a.is_empty())
        .collect();
    (!answers.is_empty()).then(|| answers.join("\n"))
}

/// A text block that only opens or closes the wrapper Codex puts around a pasted image
/// (`<image name=[Image #1] path="/tmp/…">`, `</image>`).
pub(crate) fn is_image_wrapper(block: &str) -> bool {
    let t = block.trim();
    t == "</image>" || (t.starts_with("<image ") && t.ends_with('>') && !t.contains('\n'))
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
            "<skill>\n<name>pdf</name></skill>",
            "<SKILL>\n<name>pdf</name></SKILL>",
            "<hook_prompt hook_run_id=\"stop-1\">Run the tests before you stop.</hook_prompt>",
            "<codex_internal_context source=\"extension\">Internal steering.</codex_internal_context>",
            "Warning: The maximum number of unified exec processes you can keep open is 16.",
            "Warning: apply_patch was requested via exec_command. Use the apply_patch tool instead of exec_command.",
        ] {
            assert_eq!(classify_user(host), CONTEXT, "{host}");
        }
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-x\n+y\n*** Add File: b.md\n+hi\n*** Update File: src/a.rs\n*** End Patch";
        assert_eq!(patch_paths(patch), ["src/a.rs", "b.md"]);
        let args: serde_json::Value =
            serde_json::from_str(&custom_call_arguments("apply_patch", patch)).unwrap();
        assert_eq!(args["paths"][1], "b.md");
    }

    #[test]
    fn a_question_reply_is_the_persons_answers_and_odd_ones_read_as_they_came() {
        assert_eq!(
            question_reply("<send_user_message_question_reply>\n[{\"answer\":\"the postgres backend\",\"question\":\"Which backend?\"},{\"answer\":\"yes\",\"question\":\"Migrate?\"}]").as_deref(),
            Some("the postgres backend\nyes")
        );
        assert_eq!(
            question_reply("<SEND_USER_MESSAGE_QUESTION_REPLY>[{\"answer\":\"a\"}]</send_user_message_question_reply>").as_deref(),
            Some("a")
        );
        for odd in [
            "<send_user_message_question_reply>",
            "<send_user_message_question_reply>\n[{\"answer\":\"",
            "<send_user_message_question_reply>\n{\"answer\":\"a\"}",
            "<send_user_message_question_reply>\n[{\"answer\":\"  \"}]",
            "<send_user_message_question_reply>\n[{\"question\":\"q\"}]",
            "[{\"answer\":\"a\"}]",
            "é",
        ] {
            assert_eq!(question_reply(odd), None, "{odd}");
        }
    }

    #[test]
    fn image_wrappers_are_told_from_words() {
        assert!(is_image_wrapper(
            "<image name=[Image #1] path=\"/tmp/codex-clipboard-XXXXXX.png\">"
        ));
        assert!(is_image_wrapper(" </image>\n"));
        assert!(!is_image_wrapper(
            "<image> tags in HTML are wrong, fix them"
        ));
        assert!(!is_image_wrapper("[Image #1] an example"));
        assert!(!is_image_wrapper("<image name=x>\nand words after"));
    }

    /// Shapes from codex-rs (`format_subagent_notification_message`) and public rollouts.
    #[test]
    fn a_subagent_notification_is_a_readable_delegate_report() {
        let done = "<subagent_notification>{\"agent_id\":\"019cc375-5af5\",\"status\":{\"completed\":\"Both docs are written.\\nSee docs/a.md.\"}}</subagent_notification>";
        assert_eq!(classify_user(done), DELEGATE);
        assert_eq!(
            classify_user("<SUBAGENT_NOTIFICATION>{}</subagent_notification>"),
            DELEGATE
        );
        assert_eq!(
            delegate_report(done),
            "Subagent 019cc375-5af5 completed:\n\nBoth docs are written.\nSee docs/a.md."
        );
        assert_eq!(
            delegate_report("<subagent_notification>{\"agent_id\":\"a\",\"status\":\"completed\"}</subagent_notification>"),
            "Subagent a completed."
        );
        assert_eq!(
            delegate_report("<subagent_notification>{\"agent_id\":\"a\",\"status\":{\"errored\":\"boom\"}}</subagent_notification>"),
            "Subagent a errored:\n\nboom"
        );
        assert_eq!(
            delegate_report("<subagent_notification>{\"agent_id\":\"a\",\"status\":\"not_found\"}</subagent_notification>"),
            "Subagent a not found."
        );
        // Not of that shape: the text as it came, never a panic.
        for odd in [
            "<subagent_notification>done</subagent_notification>",
            "<subagent_notification>{\"agent_id\":\"a\",\"status\":{}}</subagent_notification>",
            "<subagent_notification>{\"agent_id\":\"a\"",
            "<subagent_notification>",
            "<subagent_notification>é",
        ] {
            assert_eq!(delegate_report(odd), odd);
        }
    }
}
