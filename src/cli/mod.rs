//! The CLI edge: argument parsing, environment, printing. `anyhow` lives here only.

mod archive;
mod daemon;
mod demo;
mod enrich;
mod forget;
mod hint;
mod index;
mod init;
mod link;
mod list;
mod mcp;
mod notice;
mod rule;
mod scan;
mod search;
mod show;
mod status;
mod sync;
mod topic;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use dsh_chapters::config::{self, Config};
use dsh_chapters::identity::{self, Identity};
use dsh_chapters::resolve;

#[derive(Parser)]
#[command(
    name = "chapters",
    version,
    about = "A shared, searchable memory of your coding agents' past work"
)]
struct Cli {
    /// The workspace (default: the current directory; its git top level when inside one).
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Enable the workspace: create the store and write the ignore hint.
    Init(init::Args),
    /// Sign every completed, unsigned turn and write chapters for every completed turn not yet archived.
    Archive(archive::Args),
    /// Identity, harness id, upstream, mode, pending counts and store counts.
    Status(status::Args),
    /// Show the pool link, or bind a pool: a local directory or a git URL.
    Link(link::Args),
    /// Undo `link`: the pool's link and token go; the store stays.
    Unlink(link::UnlinkArgs),
    /// Pull, then publish what the store has that the pool lacks.
    Sync(sync::Args),
    /// Find past work: chapters, plans and rules, scored and packed to a token budget.
    Search(search::Args),
    /// Print one chapter, plan or rule by its id (from `search` or `list`) or path.
    Show(show::Args),
    /// List chapters, plans and rules, newest first.
    List(list::Args),
    /// Idle-time model enrichment: `run`, `report`, `model`.
    Enrich(enrich::Args),
    /// The background daemon: sign turns as they end, archive at the right moments, sync.
    Daemon(daemon::Args),
    /// The derived topic index: `rebuild` is its repair path.
    Index(index::Args),
    /// Curate topics: `merge A B` reads topic A as B everywhere.
    Topic(topic::Args),
    /// Generate a sample session in a scratch home, archive it and show what was written.
    Demo(demo::Args),
    /// Rules: propose, list, view, approve, revoke, pin, unpin, active, conflicts.
    Rule(rule::Args),
    /// Print the continuation notice (with its rules block) for a session.
    Notice(notice::Args),
    /// Take back what slipped through: `--list` the ids, then `forget ID… --by NAME`.
    Forget(forget::Args),
    /// Find old leaks: re-check the store (and with --pool the pool's whole history) with today's redaction rules.
    Scan(scan::Args),
    /// Serve the Model Context Protocol on stdio: chapters_search, chapters_rules, chapters_rule_propose, chapters_artifact.
    Mcp(mcp::Args),
}

/// What every command resolves before it runs.
pub struct Env {
    pub workspace: PathBuf,
    pub dsh_home: PathBuf,
    pub config: Config,
    pub identity: Identity,
    pub harness_id: String,
    /// A credential found in `pool.json`'s URL and moved out by this command (#13.5).
    pub link_migration: Option<dsh_chapters::pool::link::Migration>,
}

/// The comment written above a saved `harnessId`.
pub(crate) const HARNESS_ID_WHY: &str =
    "this machine's name in every pool, for the CLI, the daemon and `chapters mcp` alike";

/// Why this machine's harness id should be written to the home config, if it should.
pub(crate) fn harness_id_unsettled(config: &Config) -> Option<&'static str> {
    match config.origin_of("harnessId") {
        None | Some(config::DEFAULTS_ORIGIN) => Some("the host name"),
        Some(origin) if origin.starts_with("env ") => Some("CHAPTERS_HARNESS_ID"),
        Some(_) => None,
    }
}

impl Env {
    /// The workspace as signatures name paths in it: its root and the root's `pathMap`
    /// twins (search's `--path` is read through it).
    pub fn signing_workspace(&self) -> dsh_chapters::signature::Workspace {
        dsh_chapters::signature::Workspace::for_session(
            &self.workspace.to_string_lossy(),
            None,
            &self.config.path_map,
        )
    }

    /// Write this machine's harness id into the home config when it came from the
    /// environment or the host name, so the CLI, the daemon's unit and an editor-launched
    /// `chapters mcp` (none of which share the shell's environment) all use one name. A
    /// value already in the home config is never replaced. Returns the note to print.
    pub fn persist_harness_id(&self) -> Result<Option<String>> {
        let Some(from) = harness_id_unsettled(&self.config) else {
            return Ok(None);
        };
        let written = config::persist_home_key(
            &self.dsh_home,
            "harnessId",
            &self.harness_id,
            HARNESS_ID_WHY,
        )?;
        Ok(written.then(|| {
            format!(
                "harness id {:?} (from {from}) saved in {}",
                self.harness_id,
                config::home_config_path(&self.dsh_home).display()
            )
        }))
    }

    fn resolve(workspace: Option<&Path>, dsh_home: Option<PathBuf>) -> Result<Env> {
        let dir = match workspace {
            Some(w) => w.to_path_buf(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let dir = std::fs::canonicalize(&dir).with_context(|| {
            format!(
                "workspace {} does not exist or is not readable",
                dir.display()
            )
        })?;
        let workspace = identity::workspace_root(&dir)?;
        let dsh_home = match dsh_home {
            Some(h) => h,
            None => dsh_home_from_env()?,
        };
        // Lossy, not `env::vars()`: a non-UTF-8 variable must be refused by name, not panic.
        let env = config::chapters_env();
        // The one resolution the daemon makes too (`dsh_chapters::resolve`).
        let resolve::Resolved {
            config,
            identity,
            harness_id,
            link_migration,
        } = resolve::workspace(&workspace, &dsh_home, &env).map_err(said_by_its_cause)?;
        if let Some(m) = &link_migration {
            eprintln!("chapters: note: {}", m.note());
        }
        Ok(Env {
            workspace,
            dsh_home,
            config,
            identity,
            harness_id,
            link_migration,
        })
    }
}

impl Env {
    /// What an archive run needs from the resolved environment, at the time `now`.
    pub fn archive_context<'a>(
        &'a self,
        now: &'a str,
    ) -> dsh_chapters::archive::ArchiveContext<'a> {
        dsh_chapters::archive::ArchiveContext {
            workspace: &self.workspace,
            dsh_home: &self.dsh_home,
            config: &self.config,
            identity: &self.identity,
            harness_id: &self.harness_id,
            now,
        }
    }
}

fn dsh_home_from_env() -> Result<PathBuf> {
    resolve::dsh_home().map_err(said_by_its_cause)
}

/// A resolution error as the error it wraps, so the hints (keyed on the module errors'
/// types in `hint.rs`) find the config, identity or link error as before.
fn said_by_its_cause(e: resolve::ResolveError) -> anyhow::Error {
    match e {
        resolve::ResolveError::Config(e) => e.into(),
        resolve::ResolveError::Identity(e) => e.into(),
        resolve::ResolveError::Link(e) => e.into(),
        e @ resolve::ResolveError::NoHome => e.into(),
    }
}

/// A usage error found after parsing — a value clap cannot judge (a date, an empty query or
/// topic): exit 2 with the subcommand's hint, as clap's own, and under `--json` one JSON
/// document with code `usage`.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Usage {}

/// An operation failure (exit 1) whose message was already printed in full.
#[derive(Debug)]
pub struct Reported;

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("failed (see above)")
    }
}
impl std::error::Error for Reported {}

pub fn run() -> ExitCode {
    let json = wants_json(std::env::args_os());
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            if json && code == 2 {
                let hint = hint::usage_hint(subcommand(std::env::args_os()).as_deref());
                print_error_json("usage", &usage_message(&e.to_string()), Some(&hint));
            }
            return ExitCode::from(code);
        }
    };
    // The daemon sets up its own logging (its log files).
    if !matches!(cli.command, Command::Daemon(_)) {
        init_logging();
    }
    // Commands that rewrite documents or write curation facts: the store's topic index
    // follows them after they succeed (a search, a reader, never writes it). An archive
    // leaves it to the next of these or `index rebuild` (its re-run must write nothing).
    let writer = matches!(
        cli.command,
        Command::Enrich(_) | Command::Rule(_) | Command::Topic(_)
    );
    let workspace = cli.workspace.clone();
    let result = match cli.command {
        Command::Init(a) => init::run(cli.workspace.as_deref(), a),
        Command::Archive(a) => archive::run(cli.workspace.as_deref(), a),
        Command::Status(a) => status::run(cli.workspace.as_deref(), a),
        Command::Demo(a) => demo::run(a),
        Command::Link(a) => link::run(cli.workspace.as_deref(), a),
        Command::Unlink(a) => link::unlink(cli.workspace.as_deref(), a),
        Command::Sync(a) => sync::run(cli.workspace.as_deref(), a),
        Command::Search(a) => search::run(cli.workspace.as_deref(), a),
        Command::Show(a) => show::run(cli.workspace.as_deref(), a),
        Command::List(a) => list::run(cli.workspace.as_deref(), a),
        Command::Enrich(a) => enrich::run(cli.workspace.as_deref(), a),
        Command::Rule(a) => rule::run(cli.workspace.as_deref(), a),
        Command::Notice(a) => notice::run(cli.workspace.as_deref(), a),
        Command::Mcp(a) => mcp::run(cli.workspace.as_deref(), a),
        Command::Daemon(a) => daemon::run(a),
        Command::Index(a) => index::run(cli.workspace.as_deref(), a),
        Command::Topic(a) => topic::run(cli.workspace.as_deref(), a),
        Command::Forget(a) => forget::run(cli.workspace.as_deref(), a),
        Command::Scan(a) => scan::run(cli.workspace.as_deref(), a),
    };
    if writer && result.is_ok() {
        if let Ok(env) = Env::resolve(workspace.as_deref(), None) {
            index::follow_store(&env);
        }
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<Reported>() => ExitCode::from(1),
        Err(e) if e.is::<Usage>() => {
            let message = dsh_chapters::redact::echo(&e.to_string());
            let hint = hint::usage_hint(subcommand(std::env::args_os()).as_deref());
            eprintln!("error: {message}\n\nhint: {hint}");
            if json {
                print_error_json("usage", &message, Some(&hint));
            }
            ExitCode::from(2)
        }
        Err(e) => {
            // Every error goes out through the rules: it may echo what was typed (an id, a
            // path, a URL) or what a file held.
            let message = dsh_chapters::redact::echo(&said_once(&e));
            let hint = hint::hint(&e).map(|h| dsh_chapters::redact::echo(&h));
            eprintln!("chapters: {message}");
            if let Some(h) = hint.as_deref().filter(|h| !message.contains(h)) {
                eprintln!("hint: {h}");
            }
            if json {
                print_error_json("failed", &message, hint.as_deref());
            }
            ExitCode::from(1)
        }
    }
}

/// A clap error's message as one line: its first paragraph (what is wrong, with what it
/// lists — the missing arguments), without the `error: ` and the usage that follow.
fn usage_message(clap_error: &str) -> String {
    let first = clap_error.split("\n\n").next().unwrap_or_default();
    let joined: Vec<&str> = first
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    joined.join(" ").trim_start_matches("error: ").to_owned()
}

/// Whether `--json` was asked for (before any `--`), known even when parsing fails.
fn wants_json(args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    args.skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

/// The subcommand named on the command line (the first argument that is one), for a usage
/// error's hint.
fn subcommand(args: impl Iterator<Item = std::ffi::OsString>) -> Option<String> {
    use clap::CommandFactory;
    let names: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    args.skip(1)
        .filter_map(|a| a.into_string().ok())
        .find(|a| names.contains(a))
}

/// A `--json` command that failed still prints one JSON document on stdout, so a script
/// reading it never parses an empty stdout; the message also went to stderr. `hint` (what to
/// do) comes from [`hint`], the one place hints are written.
fn print_error_json(code: &str, message: &str, hint: Option<&str>) {
    let doc = serde_json::json!({"error": {"code": code, "message": message, "hint": hint}});
    println!("{doc}");
}

/// The error and its causes, each said once (`names::said_once`, the one rendering of a
/// chain: the store's logged failures say theirs the same way).
fn said_once(error: &anyhow::Error) -> String {
    dsh_chapters::names::said_once(error.as_ref())
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CHAPTERS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // A span's busy time as it closes: the sync's phases (`pool::sync::phase`).
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Print one JSON document on stdout.
/// An answer made of documents' words (search lines, bodies, list rows, rules): printed only
/// as a `Redacted` value, derived from what the store's reader read back or the rules passed.
pub fn print_answer(text: &dsh_chapters::redact::Redacted<String>) {
    print!("{}", text.get());
}

/// [`print_answer`] for `--json`: the one JSON document, derived the same way.
pub fn print_json_answer(value: &dsh_chapters::redact::Redacted<serde_json::Value>) -> Result<()> {
    print_json(value.get())
}

pub fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).context("cannot serialize the report")?;
    println!("{text}");
    Ok(())
}

/// The clock, read once per command.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::said_once;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read config.yml: {source}")]
    struct Repeats {
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn json_is_seen_before_the_end_of_options_only() {
        let args = |list: &[&str]| {
            list.iter()
                .map(std::ffi::OsString::from)
                .collect::<Vec<_>>()
        };
        assert!(super::wants_json(
            args(&["chapters", "status", "--json"]).into_iter()
        ));
        assert!(!super::wants_json(
            args(&["chapters", "search", "--", "--json"]).into_iter()
        ));
        assert!(!super::wants_json(args(&["--json", "status"]).into_iter()));
    }

    #[test]
    fn a_cause_is_said_once() {
        let io = || std::io::Error::other("Is a directory (os error 21)");
        let e = anyhow::Error::new(Repeats { source: io() }).context("loading the config");
        assert_eq!(
            said_once(&e),
            "loading the config: cannot read config.yml: Is a directory (os error 21)"
        );
        let e = anyhow::Error::new(io()).context("cannot write x");
        assert_eq!(
            said_once(&e),
            "cannot write x: Is a directory (os error 21)"
        );
    }
}
