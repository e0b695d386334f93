//! Just enough of the POSIX shell grammar to find the simple commands of a tool's
//! command string: words with quotes, `&&`/`||`/`;`/`|`/newline separators, redirections
//! and here-documents (whose bodies are data, never commands). Not an evaluator:
//! expansions stay literal, which is all a signature needs.
//!
//! PowerShell and `cmd` command strings are read by the same parser in their dialect:
//! `\` is a path separator there, not an escape (PowerShell escapes with `` ` ``, `cmd`
//! with `^`); `;`, `|`, `&&`, `||` and `&` separate commands (`&` is also PowerShell's call
//! operator, which starts a command just the same); a program is named without its
//! directory and `.exe`, lower-cased (both shells ignore case): `Get-Content` is
//! `get-content`, `C:\Git\bin\git.exe status` is `git status`.

use super::paths::names_a_file;

/// One word of a simple command, quotes removed.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Word {
    pub text: String,
}

/// A simple command: its words, plus the words that were redirection targets.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct SimpleCommand {
    pub words: Vec<Word>,
    pub redirect_targets: Vec<Word>,
}

/// What a shell command string says: command prefixes and path-candidate words.
#[derive(Debug, Default, PartialEq)]
pub(super) struct ShellFacts {
    /// `cargo test`, `git diff`, … in order of appearance (duplicates kept; the caller dedups).
    pub commands: Vec<String>,
    /// Argument and redirection words that may name files, in order.
    pub path_words: Vec<String>,
}

/// `bash -c 'inner'` nests; deeper than this is not worth reading.
const MAX_NESTING: u32 = 3;
/// Words kept per command prefix (`npm run build`).
const PREFIX_WORDS: usize = 3;

/// Wrappers that run the command after them: the command is what follows.
const WRAPPERS: &[&str] = &["env", "nohup", "sudo", "time"];
/// POSIX-family shells whose `-c` argument is itself a script.
const SHELLS: &[&str] = &["ash", "bash", "dash", "fish", "ksh", "sh", "zsh"];
/// Builtins that move or configure the shell rather than do work: agents prefix nearly
/// every call with `cd <workspace> &&`, which would make every turn share a command.
const NON_WORK_BUILTINS: &[&str] = &[
    ":",
    "cd",
    "chdir",
    "endlocal",
    "exit",
    "export",
    "false",
    "pop-location",
    "popd",
    "push-location",
    "pushd",
    "set",
    "set-location",
    "setlocal",
    "sl",
    "true",
    "unset",
];

/// Which shell's grammar a command string is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Posix,
    PowerShell,
    Cmd,
}

impl Dialect {
    /// The dialect of a shell tool's command string: named by the tool (`pwsh`,
    /// `powershell`, `cmd`, `bash`, `sh`, `zsh`, `fish`, …); a generic name (`shell`,
    /// `run_command`) runs PowerShell on Windows and a POSIX shell elsewhere.
    pub(super) fn of_tool(tool: &str, windows: bool) -> Dialect {
        match tool.to_ascii_lowercase().as_str() {
            "pwsh" | "powershell" => Dialect::PowerShell,
            "cmd" => Dialect::Cmd,
            name if SHELLS.contains(&name) => Dialect::Posix,
            _ if windows => Dialect::PowerShell,
            _ => Dialect::Posix,
        }
    }
}

/// Read a command string.
pub(super) fn read_script(script: &str, dialect: Dialect) -> ShellFacts {
    let mut facts = ShellFacts::default();
    read_script_into(script, dialect, 0, &mut facts);
    facts
}

/// Read an argv array (`["bash", "-lc", "cargo test"]` or `["cargo", "test"]`).
pub(super) fn read_argv(argv: &[String]) -> ShellFacts {
    let mut facts = ShellFacts::default();
    let cmd = SimpleCommand {
        words: argv.iter().map(|a| Word { text: a.clone() }).collect(),
        redirect_targets: Vec::new(),
    };
    read_command(&cmd, Dialect::Posix, 0, &mut facts);
    facts
}

fn read_script_into(script: &str, dialect: Dialect, depth: u32, facts: &mut ShellFacts) {
    for cmd in parse_in(script, dialect) {
        read_command(&cmd, dialect, depth, facts);
    }
}

/// The program's name: no directory, no `.exe`; lower-cased where the shell ignores case.
fn program_name(word: &str, dialect: Dialect) -> String {
    let name = word.rsplit(['/', '\\']).next().unwrap_or_default();
    // Bytes, not `str` slicing: the name may end in a multi-byte character (`…⟧`).
    let windows_binary =
        name.len() > 4 && name.as_bytes()[name.len() - 4..].eq_ignore_ascii_case(b".exe");
    let name = if windows_binary {
        &name[..name.len() - 4]
    } else {
        name
    };
    if dialect == Dialect::Posix && !windows_binary {
        name.to_owned()
    } else {
        name.to_ascii_lowercase()
    }
}

/// `pwsh -NoProfile -Command <script…>` / `cmd /c <script…>`: the dialect and script.
fn windows_shell_script(name: &str, args: &[Word]) -> Option<(Dialect, String)> {
    let (dialect, pos) = match name {
        "pwsh" | "powershell" => (
            Dialect::PowerShell,
            args.iter().position(|w| {
                let flag = w.text.trim_start_matches(['-', '/']).to_ascii_lowercase();
                w.text.len() > flag.len() && !flag.is_empty() && "command".starts_with(&flag)
            })?,
        ),
        "cmd" => (
            Dialect::Cmd,
            args.iter().position(|w| {
                let t = w.text.to_ascii_lowercase();
                t == "/c" || t == "/k"
            })?,
        ),
        _ => return None,
    };
    let rest: Vec<&str> = args[pos + 1..].iter().map(|w| w.text.as_str()).collect();
    Some((dialect, rest.join(" ")))
}

fn read_command(cmd: &SimpleCommand, dialect: Dialect, depth: u32, facts: &mut ShellFacts) {
    facts
        .path_words
        .extend(cmd.redirect_targets.iter().map(|w| w.text.clone()));
    let words = &cmd.words;
    let start = skip_wrappers(words);
    let Some(program) = words.get(start) else {
        return;
    };
    let args = &words[start + 1..];
    if program.text.contains(['/', '\\']) {
        facts.path_words.push(program.text.clone());
    }
    let name = program_name(&program.text, dialect);
    let name = name.as_str();

    if SHELLS.contains(&name) {
        if let Some(inner) = shell_c_argument(args) {
            if depth < MAX_NESTING {
                read_script_into(inner, Dialect::Posix, depth + 1, facts);
            }
            return;
        }
    }
    if let Some((inner_dialect, inner)) = windows_shell_script(name, args) {
        if depth < MAX_NESTING {
            read_script_into(&inner, inner_dialect, depth + 1, facts);
        }
        return;
    }

    for arg in args {
        // `cmd`'s switches are `/s`, `/b`: a `/` word without another separator.
        let cmd_switch = dialect == Dialect::Cmd
            && arg.text.starts_with('/')
            && !arg.text[1..].contains(['/', '\\']);
        if cmd_switch {
            continue;
        }
        match arg.text.strip_prefix('-') {
            // `--manifest-path=x/Cargo.toml`: the value may be a path.
            Some(flag) => {
                if let Some((_, value)) = flag.split_once('=') {
                    facts.path_words.push(value.to_owned());
                }
            }
            None => facts.path_words.push(arg.text.clone()),
        }
    }

    if NON_WORK_BUILTINS.contains(&name) || !is_command_word(name) {
        return;
    }
    let mut prefix = vec![name];
    for arg in args {
        if prefix.len() == PREFIX_WORDS {
            break;
        }
        if arg.text.starts_with('-') || (dialect == Dialect::Cmd && arg.text.starts_with('/')) {
            continue;
        }
        // The family ends at the first operand that is data (a path, a file name, a
        // quoted message, a number): `git commit -m "…"` is `git commit`, `head -n 20 x`
        // is `head`, `python3 script.py` is `python3`.
        if !is_command_word(&arg.text) || names_a_file(&arg.text) {
            break;
        }
        prefix.push(&arg.text);
    }
    facts.commands.push(prefix.join(" "));
}

/// Index of the first word after leading `FOO=bar` assignments and wrappers (with their flags).
fn skip_wrappers(words: &[Word]) -> usize {
    let mut i = 0;
    loop {
        while words.get(i).is_some_and(|w| is_assignment(&w.text)) {
            i += 1;
        }
        if !words
            .get(i)
            .is_some_and(|w| WRAPPERS.contains(&w.text.as_str()))
        {
            return i;
        }
        i += 1;
        while words.get(i).is_some_and(|w| w.text.starts_with('-')) {
            i += 1;
        }
    }
}

/// `-c`, `-lc`, `-ec` …: the word after it is the script.
fn shell_c_argument(args: &[Word]) -> Option<&str> {
    let pos = args.iter().position(|w| {
        w.text.strip_prefix('-').is_some_and(|f| {
            !f.is_empty() && f.chars().all(|c| c.is_ascii_alphabetic()) && f.contains('c')
        })
    })?;
    args.get(pos + 1).map(|w| w.text.as_str())
}

fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A word that names a program or subcommand rather than data.
fn is_command_word(word: &str) -> bool {
    word.len() <= 40
        && word.starts_with(|c: char| c.is_ascii_alphanumeric())
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._:@+-".contains(c))
        && word.chars().any(|c| c.is_ascii_alphabetic())
}

/// What the next completed word is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum NextWord {
    Argument,
    RedirectTarget,
    HeredocDelimiter,
}

struct Parser<'a> {
    dialect: Dialect,
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    commands: Vec<SimpleCommand>,
    current: SimpleCommand,
    word: String,
    in_word: bool,
    next_word: NextWord,
    pending_heredocs: Vec<String>,
}

/// Split a POSIX script into simple commands.
#[cfg(test)]
pub(super) fn parse(script: &str) -> Vec<SimpleCommand> {
    parse_in(script, Dialect::Posix)
}

/// Split a script of `dialect` into simple commands.
pub(super) fn parse_in(script: &str, dialect: Dialect) -> Vec<SimpleCommand> {
    let mut p = Parser {
        dialect,
        chars: script.chars().peekable(),
        commands: Vec::new(),
        current: SimpleCommand::default(),
        word: String::new(),
        in_word: false,
        next_word: NextWord::Argument,
        pending_heredocs: Vec::new(),
    };
    p.run();
    p.commands
}

impl Parser<'_> {
    fn run(&mut self) {
        while let Some(c) = self.chars.next() {
            if self.dialect != Dialect::Posix && self.windows_char(c) {
                continue;
            }
            match c {
                ' ' | '\t' | '\r' => self.end_word(),
                '\n' => {
                    self.end_word();
                    self.end_command();
                    self.skip_heredoc_bodies();
                }
                // Separators, pipes, subshells and command substitutions all start a new
                // simple command; the grouping itself carries no signal.
                ';' | '|' | '(' | ')' | '`' => {
                    self.end_word();
                    self.end_command();
                }
                '&' => {
                    self.end_word();
                    if self.chars.next_if_eq(&'>').is_some() {
                        self.chars.next_if_eq(&'>');
                        self.next_word = NextWord::RedirectTarget;
                    } else {
                        self.end_command();
                    }
                }
                '>' | '<' => self.redirect(c),
                '#' if !self.in_word => while self.chars.next_if(|&c| c != '\n').is_some() {},
                '\'' => {
                    self.in_word = true;
                    for c in self.chars.by_ref() {
                        if c == '\'' {
                            break;
                        }
                        self.word.push(c);
                    }
                }
                '"' => {
                    self.in_word = true;
                    while let Some(c) = self.chars.next() {
                        match c {
                            '"' => break,
                            '\\' => match self.chars.next() {
                                Some('\n') | None => {}
                                Some(e @ ('"' | '\\' | '$' | '`')) => self.word.push(e),
                                Some(other) => {
                                    self.word.push('\\');
                                    self.word.push(other);
                                }
                            },
                            _ => self.word.push(c),
                        }
                    }
                }
                '\\' => match self.chars.next() {
                    Some('\n') | None => {}
                    Some(e) => {
                        self.in_word = true;
                        self.word.push(e);
                    }
                },
                _ => {
                    self.in_word = true;
                    self.word.push(c);
                }
            }
        }
        self.end_word();
        self.end_command();
    }

    /// PowerShell's and `cmd`'s own reading of `c`; false when it reads as in POSIX.
    fn windows_char(&mut self, c: char) -> bool {
        let escape = if self.dialect == Dialect::PowerShell {
            '`'
        } else {
            '^'
        };
        match c {
            // A path separator, never an escape.
            '\\' => {
                self.in_word = true;
                self.word.push(c);
            }
            c if c == escape => {
                if let Some(e) = self.chars.next() {
                    if e != '\n' {
                        self.in_word = true;
                        self.word.push(e);
                    }
                }
            }
            '"' => {
                self.in_word = true;
                while let Some(c) = self.chars.next() {
                    match c {
                        '"' => break,
                        c if c == escape && self.dialect == Dialect::PowerShell => {
                            if let Some(e) = self.chars.next() {
                                self.word.push(e);
                            }
                        }
                        _ => self.word.push(c),
                    }
                }
            }
            // `cmd` has no single quotes and no comments.
            '\'' | '#' if self.dialect == Dialect::Cmd => {
                self.in_word = true;
                self.word.push(c);
            }
            // Script blocks hold commands: `ForEach-Object { Remove-Item $_ }`.
            '{' | '}' if self.dialect == Dialect::PowerShell && !self.in_word => {
                self.end_command();
            }
            _ => return false,
        }
        true
    }

    fn redirect(&mut self, op: char) {
        // `2>`: the digits before the operator are a file descriptor, not a word.
        if self.in_word && self.word.chars().all(|c| c.is_ascii_digit()) {
            self.word.clear();
            self.in_word = false;
        } else {
            self.end_word();
        }
        self.next_word = NextWord::RedirectTarget;
        if op == '<' && self.chars.next_if_eq(&'<').is_some() {
            if self.chars.next_if_eq(&'<').is_none() {
                self.chars.next_if_eq(&'-');
                self.next_word = NextWord::HeredocDelimiter;
            }
            return;
        }
        // `>>`, `>|`, `>&`, `<&`, `<>`.
        self.chars.next_if(|&c| c == '>' || c == '|');
        self.chars.next_if_eq(&'&');
    }

    fn end_word(&mut self) {
        if !self.in_word {
            return;
        }
        let text = std::mem::take(&mut self.word);
        self.in_word = false;
        match std::mem::replace(&mut self.next_word, NextWord::Argument) {
            NextWord::Argument => self.current.words.push(Word { text }),
            NextWord::RedirectTarget => self.current.redirect_targets.push(Word { text }),
            NextWord::HeredocDelimiter => self.pending_heredocs.push(text),
        }
    }

    fn end_command(&mut self) {
        self.next_word = NextWord::Argument;
        let cmd = std::mem::take(&mut self.current);
        if !cmd.words.is_empty() || !cmd.redirect_targets.is_empty() {
            self.commands.push(cmd);
        }
    }

    /// After the line that opened them, here-document bodies run to their delimiter line.
    fn skip_heredoc_bodies(&mut self) {
        for delimiter in std::mem::take(&mut self.pending_heredocs) {
            let mut line = String::new();
            loop {
                line.clear();
                let mut ended = false;
                for c in self.chars.by_ref() {
                    if c == '\n' {
                        ended = true;
                        break;
                    }
                    line.push(c);
                }
                if line.trim() == delimiter || !ended {
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commands(script: &str) -> Vec<String> {
        read_script(script, Dialect::Posix).commands
    }

    #[test]
    fn a_program_name_ending_in_a_wide_character_is_read_not_a_panic() {
        assert_eq!(
            program_name("x=⟦redacted⟧", Dialect::PowerShell),
            "x=⟦redacted⟧"
        );
        assert_eq!(program_name("C:\\bin\\Tool.EXE", Dialect::Cmd), "tool");
        assert_eq!(program_name("é.exe", Dialect::Posix), "é");
    }

    #[test]
    fn simple_commands_and_separators() {
        assert_eq!(
            commands(
                "cargo test --lib compose && git diff || npm run build; ls -la | wc -l\nmake check"
            ),
            vec![
                "cargo test compose",
                "git diff",
                "npm run build",
                "ls",
                "wc",
                "make check"
            ]
        );
    }

    #[test]
    fn env_assignments_sudo_and_wrappers_are_skipped() {
        assert_eq!(
            commands("RUST_LOG=debug FOO=\"a b\" cargo run --release"),
            vec!["cargo run"]
        );
        assert_eq!(
            commands("sudo -E apt-get install -y jq"),
            vec!["apt-get install jq"]
        );
        assert_eq!(
            commands("env A=1 time nohup python3 -m pytest tests/"),
            vec!["python3 pytest"]
        );
        assert_eq!(commands("FOO=bar"), Vec::<String>::new());
    }

    #[test]
    fn data_operands_end_the_prefix() {
        assert_eq!(
            commands("git commit -m \"fix the thing\""),
            vec!["git commit"]
        );
        assert_eq!(commands("head -n 20 src/main.rs"), vec!["head"]);
        assert_eq!(commands("sed -n '1,20p' src/lib.rs"), vec!["sed"]);
        assert_eq!(commands("/usr/bin/python3 script.py"), vec!["python3"]);
        assert_eq!(commands("git diff HEAD~1 -- src"), vec!["git diff"]);
    }

    #[test]
    fn cd_and_shell_setup_are_not_work() {
        assert_eq!(
            commands("cd /work/proj && set -e && cargo build"),
            vec!["cargo build"]
        );
    }

    #[test]
    fn shell_dash_c_is_read_inside() {
        assert_eq!(
            commands("bash -lc 'cd x && cargo test'"),
            vec!["cargo test"]
        );
        let argv: Vec<String> = ["bash", "-lc", "npm test && git status"]
            .map(String::from)
            .to_vec();
        assert_eq!(read_argv(&argv).commands, vec!["npm test", "git status"]);
        let argv: Vec<String> = ["cargo", "fmt", "--check"].map(String::from).to_vec();
        assert_eq!(read_argv(&argv).commands, vec!["cargo fmt"]);
    }

    #[test]
    fn nesting_is_bounded() {
        let mut script = "cargo test".to_owned();
        for _ in 0..10 {
            script = format!("sh -c {}", shell_quote(&script));
        }
        assert!(commands(&script).is_empty());
    }

    fn shell_quote(s: &str) -> String {
        format!("'{}'", s.replace('\'', "'\\''"))
    }

    #[test]
    fn heredoc_bodies_are_data() {
        let script = "cat > notes.md <<'EOF'\nrm -rf everything now\nEOF\ncargo test\ncat <<-X >> out.txt\n\tnot a command\n\tX\n";
        let facts = read_script(script, Dialect::Posix);
        assert_eq!(facts.commands, vec!["cat", "cargo test", "cat"]);
        assert_eq!(facts.path_words, vec!["notes.md", "test", "out.txt"]);
    }

    #[test]
    fn redirections_and_fd_duplication() {
        let facts = read_script(
            "cargo build 2>&1 > build.log && echo done &> /dev/null",
            Dialect::Posix,
        );
        assert_eq!(facts.commands, vec!["cargo build", "echo done"]);
        assert_eq!(
            facts.path_words,
            vec!["1", "build.log", "build", "/dev/null", "done"]
        );
    }

    #[test]
    fn quotes_and_escapes() {
        let cmds = parse("echo \"a \\\"b\\\" c\" 'd e' f\\ g # comment; rm x\nls");
        assert_eq!(cmds.len(), 2);
        let words: Vec<_> = cmds[0].words.iter().map(|w| w.text.as_str()).collect();
        assert_eq!(words, vec!["echo", "a \"b\" c", "d e", "f g"]);
    }

    #[test]
    fn comment_only_and_empty_scripts() {
        assert!(parse("").is_empty());
        assert!(parse("   \n\n# just a comment\n").is_empty());
    }

    #[test]
    fn hostile_input_terminates() {
        // Unterminated quotes, a heredoc without its delimiter, lone operators.
        for s in [
            "'unterminated",
            "\"open \\",
            "cat <<EOF\nbody forever",
            "&&&|||;;;<<<>>>",
            "\\",
            "<<",
            "2>",
        ] {
            let _ = read_script(s, Dialect::Posix);
        }
        let huge = "x ".repeat(200_000) + "&& cargo test";
        assert_eq!(
            read_script(&huge, Dialect::Posix).commands,
            vec!["x x x", "cargo test"]
        );
    }

    #[test]
    fn program_paths_are_path_words() {
        let facts = read_script("./scripts/check.sh --fast src/lib.rs", Dialect::Posix);
        assert_eq!(facts.commands, vec!["check.sh"]);
        assert_eq!(facts.path_words, vec!["./scripts/check.sh", "src/lib.rs"]);
    }

    fn ps(script: &str) -> ShellFacts {
        read_script(script, Dialect::PowerShell)
    }

    #[test]
    fn powershell_strings_read_as_powershell() {
        let facts = ps(
            r#"Set-Location C:\Users\ana\proj; Get-Content -Path .\src\x.rs | Select-String "fn main" && cargo test --lib; & "C:\Program Files\Git\bin\git.exe" status"#,
        );
        assert_eq!(
            facts.commands,
            vec!["get-content", "select-string", "cargo test", "git status"]
        );
        assert!(
            facts.path_words.contains(&r".\src\x.rs".to_owned()),
            "{:?}",
            facts.path_words
        );
        // Backtick escapes; a script block's commands count.
        let facts = ps("Get-ChildItem src -Recurse | ForEach-Object { Remove-Item `\"$_`\" }");
        assert_eq!(
            facts.commands,
            vec!["get-childitem src", "foreach-object", "remove-item"]
        );
    }

    #[test]
    fn cmd_strings_read_as_cmd() {
        let facts = read_script(
            r#"cd /d C:\proj & dir /s /b src\*.rs && type src\x.rs ^& more"#,
            Dialect::Cmd,
        );
        assert_eq!(facts.commands, vec!["dir", "type"]);
        assert!(
            facts.path_words.contains(&r"src\x.rs".to_owned()),
            "{:?}",
            facts.path_words
        );
    }

    #[test]
    fn windows_shells_nest_and_tools_name_their_dialect() {
        let argv: Vec<String> = [
            "pwsh",
            "-NoProfile",
            "-Command",
            r"Get-Content .\README.md; npm test",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(read_argv(&argv).commands, vec!["get-content", "npm test"]);
        let facts = read_script(r#"powershell.exe -c "Get-Item C:\x\y.txt""#, Dialect::Posix);
        assert_eq!(facts.commands, vec!["get-item"]);
        assert_eq!(
            commands(r#"cmd.exe /C "dir /b && git diff""#),
            vec!["dir", "git diff"]
        );
        assert_eq!(commands("fish -c 'make check'"), vec!["make check"]);
        assert_eq!(Dialect::of_tool("PWSH", false), Dialect::PowerShell);
        assert_eq!(Dialect::of_tool("powershell", false), Dialect::PowerShell);
        assert_eq!(Dialect::of_tool("cmd", true), Dialect::Cmd);
        assert_eq!(Dialect::of_tool("bash", true), Dialect::Posix);
        assert_eq!(Dialect::of_tool("shell", true), Dialect::PowerShell);
        assert_eq!(Dialect::of_tool("shell", false), Dialect::Posix);
    }
}
