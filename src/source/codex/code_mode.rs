//! Codex's code mode: the model calls one custom tool, `exec`, whose `input` is a
//! JavaScript program, and the program calls the real tools — `tools.exec_command({cmd:
//! "…"})`, `tools.shell_command({command: "…"})`, `tools.apply_patch("*** Begin Patch …")`.
//! Every command and patched path of such a call lives in the program's string literals:
//! read here so the turn signs them. Pure, linear in the program, bounded.
//!
//! Only literals are read (`"…"`, `'…'`, and `` `…` `` without `${`): a command built at
//! run time (`{cmd: cmds[0]}`) is not guessed.

/// Facts read out of a code-mode program.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Program {
    /// The shell commands it runs, in order.
    pub(crate) commands: Vec<String>,
    /// The patches it applies, in order (each `*** Begin Patch` text).
    pub(crate) patches: Vec<String>,
}

/// Tool calls read out of one program at most (a program is a few calls; a huge generated
/// one is not read to its end).
const MAX_CALLS: usize = 64;

/// The tools whose `cmd`/`command` argument is a shell command.
const SHELL_CALLS: &[&str] = &["exec_command", "shell", "shell_command"];

/// The commands and patches of a code-mode `exec` program.
pub(crate) fn read(program: &str) -> Program {
    let mut out = Program::default();
    let mut calls = 0;
    let mut rest = program;
    while let Some(at) = rest.find("tools.") {
        let after = &rest[at + "tools.".len()..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let (name, tail) = after.split_at(name_len);
        rest = tail;
        let Some(args) = tail.trim_start().strip_prefix('(') else {
            continue;
        };
        // The call's own argument text: up to the next call.
        let own = args.find("tools.").map_or(args, |end| &args[..end]);
        if SHELL_CALLS.contains(&name) {
            if let Some(command) = keyed_literal(own, &["cmd", "command"]) {
                out.commands.push(command);
            }
        } else if name == "apply_patch" {
            if let Some(patch) =
                literal(own.trim_start()).or_else(|| keyed_literal(own, &["input", "patch"]))
            {
                out.patches.push(patch);
            }
        }
        calls += 1;
        if calls >= MAX_CALLS {
            break;
        }
    }
    out
}

/// The string literal of the first `key:` (bare or quoted) among `keys` in `args`.
fn keyed_literal(args: &str, keys: &[&str]) -> Option<String> {
    let mut rest = args;
    loop {
        let at = rest.find(|c: char| c.is_ascii_alphabetic() || c == '"' || c == '\'')?;
        let tail = &rest[at..];
        let (word, after) = match tail.as_bytes()[0] {
            q @ (b'"' | b'\'') => {
                let end = tail[1..].find(q as char)?;
                (&tail[1..=end], &tail[end + 2..])
            }
            _ => {
                let len = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                (&tail[..len], &tail[len..])
            }
        };
        if keys.contains(&word) {
            if let Some(value) = after.trim_start().strip_prefix(':') {
                return literal(value.trim_start());
            }
        }
        rest = after;
    }
}

/// The string literal `text` starts with, unescaped; `None` for anything else, or a
/// template literal with `${…}` in it.
fn literal(text: &str) -> Option<String> {
    let mut chars = text.chars();
    let quote = chars.next().filter(|q| matches!(q, '"' | '\'' | '`'))?;
    let mut out = String::new();
    while let Some(c) = chars.next() {
        match c {
            c if c == quote => return Some(out),
            '$' if quote == '`' && chars.clone().next() == Some('{') => return None,
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'v' => out.push('\u{b}'),
                '\n' => {}
                'x' => out.push(hex_char(&mut chars, 2)?),
                'u' => {
                    if chars.clone().next() == Some('{') {
                        chars.next();
                        let digits: String = chars.by_ref().take_while(|&c| c != '}').collect();
                        out.push(
                            u32::from_str_radix(&digits, 16)
                                .ok()
                                .and_then(char::from_u32)?,
                        );
                    } else {
                        out.push(hex_char(&mut chars, 4)?);
                    }
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

/// The character of the next `n` hex digits.
fn hex_char(chars: &mut std::str::Chars<'_>, n: usize) -> Option<char> {
    let digits: String = chars.by_ref().take(n).collect();
    if digits.len() != n {
        return None;
    }
    u32::from_str_radix(&digits, 16)
        .ok()
        .and_then(char::from_u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_patches_are_read_from_literals() {
        let program = r#"const where = "C:/repo";
const a = await tools.exec_command({cmd: "cargo test -p auth", workdir: where, yield_time_ms: 1000});
text(a);
await Promise.allSettled([
  tools.exec_command({ "cmd": 'git diff --stat' }),
  tools.shell_command({command: `npm run lint`}),
  tools.exec_command({cmd: cmds[0]}),
  tools.exec_command({cmd: `echo ${x}`}),
  tools.mcp__node_repl__js({code: "1 + 1", cmd: "not a shell"}),
]);
text(await tools.apply_patch("*** Begin Patch\n*** Update File: src/auth.rs\n@@\n-a\n+b\n*** End Patch"));
text(await tools.write_stdin({session_id: 7}));"#;
        let p = read(program);
        assert_eq!(
            p.commands,
            ["cargo test -p auth", "git diff --stat", "npm run lint"]
        );
        assert_eq!(
            p.patches,
            ["*** Begin Patch\n*** Update File: src/auth.rs\n@@\n-a\n+b\n*** End Patch"]
        );
    }

    #[test]
    fn escapes_are_read_as_javascript_reads_them() {
        let p = read(r#"tools.exec_command({cmd: "echo \"a\" \x41\u0042\u{43}\tend"})"#);
        assert_eq!(p.commands, ["echo \"a\" ABC\tend"]);
        let p = read(r"tools.exec_command({cmd: 'it\'s here'})");
        assert_eq!(p.commands, ["it's here"]);
    }

    #[test]
    fn hostile_programs_read_what_they_can_and_never_panic() {
        for program in [
            "",
            "tools.",
            "tools.exec_command",
            "tools.exec_command(",
            "tools.exec_command({cmd:",
            "tools.exec_command({cmd: \"unterminated",
            "tools.exec_command({cmd: \"bad \\u{110000}\"})",
            "tools.exec_command({cmd: \"bad \\x4\"})",
            "tools.exec_command({\"cmd",
            "tools.é(tools.exec_command({cmd: 'ls'}))",
            "tools.exec_command({cmd: '日本語 ✓'})",
        ] {
            let _ = read(program);
        }
        assert_eq!(
            read("tools.é(tools.exec_command({cmd: 'ls'}))").commands,
            ["ls"]
        );
        assert_eq!(
            read("tools.exec_command({cmd: '日本語 ✓'})").commands,
            ["日本語 ✓"]
        );
        let many = "tools.exec_command({cmd: 'ls'});".repeat(1000);
        assert_eq!(read(&many).commands.len(), MAX_CALLS);
    }
}
