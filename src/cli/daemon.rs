//! `chapters daemon [--foreground]`, `chapters daemon status [--json] | stop | install |
//! uninstall`.

use std::io::{ErrorKind, IsTerminal, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use dsh_chapters::daemon::control::{Client, ClientError, Request};
use dsh_chapters::daemon::service::{self, Manager, ServiceSpec};
use dsh_chapters::daemon::{self, logs::RotatingLog, pidlock, Paths};

use super::Reported;

/// Set (to anything) to keep `install`/`uninstall` from running `systemctl` (tests do).
const NO_SERVICE_MANAGER_ENV: &str = "DSH_CHAPTERS_NO_SERVICE_MANAGER";
/// How long a background start waits for the daemon's socket to answer.
const START_WAIT: Duration = Duration::from_secs(10);
/// How long `stop` waits for the daemon to exit.
const STOP_WAIT: Duration = Duration::from_secs(5);

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    /// Run in this process (logs also go to stderr when it is a terminal) instead of
    /// starting a background daemon.
    #[arg(long)]
    foreground: bool,
    #[command(subcommand)]
    command: Option<Sub>,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// What the daemon is doing: workspaces and sessions followed, signing latency, queue,
    /// sync state and the last errors.
    Status {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Stop the running daemon (it finishes the write in progress).
    Stop,
    /// Install a user service (systemd user unit / launchd agent) that runs the daemon.
    Install,
    /// Remove the user service written by `install`.
    Uninstall,
}

pub fn run(args: Args) -> Result<()> {
    let dsh_home = super::dsh_home_from_env()?;
    let paths = Paths::new(&dsh_home);
    match args.command {
        None if args.foreground => foreground(&paths),
        None => {
            super::init_logging();
            background(&paths)
        }
        Some(sub) => {
            super::init_logging();
            match sub {
                Sub::Status { json } => status(&paths, json),
                Sub::Stop => stop(&paths),
                Sub::Install => install(&paths),
                Sub::Uninstall => uninstall(),
            }
        }
    }
}

fn foreground(paths: &Paths) -> Result<()> {
    dsh_chapters::home::ensure(&paths.dsh_home)
        .with_context(|| format!("cannot create the daemon's home {}", paths.home.display()))?;
    let log = RotatingLog::open(&paths.logs, std::io::stderr().is_terminal())
        .with_context(|| format!("cannot open the daemon's log in {}", paths.logs.display()))?;
    let filter = tracing_subscriber::EnvFilter::try_from_env("CHAPTERS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Mutex::new(log))
        .with_ansi(false)
        .try_init();
    daemon::run(daemon::Options {
        dsh_home: paths.dsh_home.clone(),
        env: dsh_chapters::config::chapters_env(),
    })
    .map_err(|e| {
        tracing::error!("{e}");
        anyhow::Error::new(e)
    })
}

fn background(paths: &Paths) -> Result<()> {
    if let Some(pid) = pidlock::holder(&paths.home) {
        bail!(
            "a daemon already runs for {} (pid {pid}); `chapters daemon status` shows what it does",
            paths.dsh_home.display()
        );
    }
    let exe = std::env::current_exe().context("cannot find this program's executable")?;
    let mut child = std::process::Command::new(exe)
        .args(["daemon", "--foreground"])
        .env("DSH_HOME", &paths.dsh_home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Its own process group: a Ctrl-C in this terminal does not reach it.
        .process_group(0)
        .spawn()
        .context("cannot start the daemon")?;
    let started = Instant::now();
    loop {
        if let Some(exit) = child.try_wait().context("cannot watch the daemon start")? {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            bail!("the daemon exited at start ({exit}): {}", err.trim());
        }
        if let Ok(client) = Client::connect(&paths.socket, Duration::from_secs(2)) {
            println!("daemon started (pid {})", client.pid);
            println!("  logs: {}", paths.logs.display());
            println!(
                "  `chapters daemon status` shows what it does; `chapters daemon stop` stops it"
            );
            return Ok(());
        }
        if started.elapsed() > START_WAIT {
            bail!(
                "the daemon (pid {}) did not answer on {} within {} s; see its logs in {}",
                child.id(),
                paths.socket.display(),
                START_WAIT.as_secs(),
                paths.logs.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How long a command keeps trying a socket that is absent or refusing while the lock is
/// held: a daemon takes its lock a moment before it binds its socket.
const SOCKET_RETRY: Duration = Duration::from_secs(2);

fn request(paths: &Paths, request: Request) -> Result<Option<(u32, Value)>> {
    let started = Instant::now();
    let mut client = loop {
        match Client::connect(&paths.socket, Duration::from_secs(10)) {
            Ok(c) => break c,
            Err(e) => {
                let Some(pid) = pidlock::holder(&paths.home) else {
                    return Ok(None);
                };
                if is_absent_or_refused(&e) && started.elapsed() < SOCKET_RETRY {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                bail!("{}", unreachable_advice(pid, paths, &e));
            }
        }
    };
    let answer = match client.request(request, &paths.socket) {
        // A stop the daemon accepted may end its process before the answer is written:
        // the caller then waits for the lock to be released, as after an answer.
        Err(ClientError::Closed { .. }) if matches!(request, Request::Stop) => {
            serde_json::json!({"ok": true, "closedWithoutAnswer": true})
        }
        other => other?,
    };
    Ok(Some((client.pid, answer)))
}

fn is_absent_or_refused(e: &ClientError) -> bool {
    matches!(e, ClientError::Connect { source, .. }
        if matches!(source.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused))
}

/// What to say when the lock's holder does not answer on its socket. Only a daemon that
/// cannot be reached at all (its socket gone or dead) is worth stopping by signal; a busy
/// one, or one that is another user's, never is.
fn unreachable_advice(pid: u32, paths: &Paths, e: &ClientError) -> String {
    let socket = paths.socket.display();
    match e {
        ClientError::Connect { source, .. } if source.kind() == ErrorKind::NotFound => format!(
            "the daemon (pid {pid}) holds the lock, but its socket {socket} is gone (removed while it ran), so neither `status` nor `stop` can reach it. \
             `kill {pid}` stops it cleanly (SIGTERM: it finishes the write in progress); then `chapters daemon` starts one with a socket"
        ),
        ClientError::Connect { source, .. } if source.kind() == ErrorKind::ConnectionRefused => format!(
            "the daemon (pid {pid}) holds the lock, but nothing accepts connections on its socket {socket} (a dead socket file), so neither `status` nor `stop` can reach it. \
             `kill {pid}` stops it cleanly (SIGTERM: it finishes the write in progress); then `chapters daemon` starts one with a socket"
        ),
        ClientError::Connect { source, .. } if source.kind() == ErrorKind::PermissionDenied => format!(
            "a daemon (pid {pid}) runs for this DSH_HOME, but its socket {socket} is not yours to use (permission denied): it runs as another user. Run this command as that user"
        ),
        other => format!(
            "the daemon (pid {pid}) is running but did not answer this time ({other}); it is busy, not stuck: try again in a moment (its log: {})",
            paths.logs.display()
        ),
    }
}

fn status(paths: &Paths, json: bool) -> Result<()> {
    let Some((_, status)) = request(paths, Request::Status)? else {
        if json {
            super::print_json(
                &serde_json::json!({"running": false, "dshHome": paths.dsh_home.to_string_lossy()}),
            )?;
        } else {
            println!("no daemon is running for {}", paths.dsh_home.display());
        }
        return Ok(());
    };
    if json {
        let mut status = status;
        if let Some(o) = status.as_object_mut() {
            o.remove("v");
            o.remove("ok");
            o.insert("running".into(), Value::Bool(true));
        }
        // Session errors may quote a damaged log line: shown only through the rules.
        let text = serde_json::to_string_pretty(&status)?;
        super::print_answer(&dsh_chapters::redact::echoed_text(&format!("{text}\n")));
        return Ok(());
    }
    super::print_answer(&dsh_chapters::redact::echoed_text(&status_text(&status)));
    Ok(())
}

fn ms(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.2} ms"))
}

/// One log that vanished before its turns were archived, as `status` says it.
pub(crate) fn vanished_line(v: &Value) -> String {
    format!(
        "vanished before archived: {} turns, file {} ({} session {}, noticed {}); its signed turns stay, no chapter can be written for them",
        v["turns"].as_u64().unwrap_or(0),
        v["log"].as_str().unwrap_or("?"),
        v["harness"].as_str().unwrap_or("?"),
        v["sessionId"].as_str().unwrap_or("?"),
        v["at"].as_str().unwrap_or("?"),
    )
}

fn status_text(s: &Value) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "daemon pid {} up {} s, watching {} ({})",
        s["pid"],
        s["uptimeSecs"],
        s["dshHome"].as_str().unwrap_or("?"),
        s["watch"].as_str().unwrap_or("?")
    );
    if let Some(reason) = s["pollingReason"].as_str() {
        let _ = writeln!(out, "  polling: {reason}");
    }
    let _ = writeln!(out,
        "  {} workspace(s) followed, {} session(s); {} turn(s) signed, latency last {} p50 {} p99 {}; {} job(s) queued",
        s["workspacesFollowed"],
        s["sessionsWatched"],
        s["signing"]["turnsSigned"],
        ms(&s["signing"]["lastMs"]),
        ms(&s["signing"]["p50Ms"]),
        ms(&s["signing"]["p99Ms"]),
        s["queueDepth"]
    );
    for ws in s["workspaces"].as_array().into_iter().flatten() {
        let name = ws["workspace"]
            .as_str()
            .or(ws["sessionsDir"].as_str())
            .unwrap_or("?");
        if ws["followed"].as_bool() != Some(true) {
            let _ = writeln!(
                out,
                "  {name}: not followed: {}",
                ws["notFollowed"]
                    .as_str()
                    .unwrap_or("no session header yet")
            );
            continue;
        }
        let _ = writeln!(
            out,
            "  {name}: {} session(s){}",
            ws["sessions"].as_array().map_or(0, Vec::len),
            if ws["linked"].as_bool() == Some(true) {
                ", linked"
            } else {
                ""
            }
        );
        if !ws["lastArchive"].is_null() {
            let _ = writeln!(out, "    last archive: {}", ws["lastArchive"]);
        }
        if !ws["lastSync"].is_null() {
            let _ = writeln!(out, "    last sync: {}", ws["lastSync"]);
        }
        for v in ws["vanished"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "    {}", vanished_line(v));
        }
        for session in ws["sessions"].as_array().into_iter().flatten() {
            if let Some(e) = session["error"].as_str() {
                let _ = writeln!(
                    out,
                    "    {}: {e}",
                    session["sessionId"].as_str().unwrap_or("?")
                );
            }
        }
    }
    if let Some(reload) = s["lastReload"].as_object() {
        let _ = writeln!(out, "  last reload: {}", Value::Object(reload.clone()));
    }
    let errors = s["lastErrors"].as_array().cloned().unwrap_or_default();
    if !errors.is_empty() {
        let _ = writeln!(out, "  last errors:");
        for e in errors.iter().rev().take(5) {
            let _ = writeln!(
                out,
                "    {} {}: {}",
                e["at"].as_str().unwrap_or(""),
                e["what"].as_str().unwrap_or(""),
                e["detail"].as_str().unwrap_or("")
            );
        }
    }
    out
}

fn stop(paths: &Paths) -> Result<()> {
    let Some((pid, _)) = request(paths, Request::Stop)? else {
        println!("no daemon is running for {}", paths.dsh_home.display());
        return Ok(());
    };
    let started = Instant::now();
    while pidlock::holder(&paths.home).is_some() {
        if started.elapsed() > STOP_WAIT {
            eprintln!("chapters: the daemon (pid {pid}) accepted the stop but has not exited within {} s (it finishes the signature in progress and gives a running archive or sync 1.5 s). Check again with `chapters daemon status`; if it is still there, `kill -9 {pid}` is safe (every write is atomic)", STOP_WAIT.as_secs());
            return Err(Reported.into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("daemon (pid {pid}) stopped");
    Ok(())
}

fn home_dir() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set: the user service goes under the home directory")
}

fn spec(paths: &Paths) -> Result<ServiceSpec> {
    let manager = Manager::native();
    let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
    let exe = std::env::current_exe().context("cannot find this program's executable")?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    let dsh_home = std::path::absolute(&paths.dsh_home).unwrap_or_else(|_| paths.dsh_home.clone());
    Ok(ServiceSpec {
        manager,
        exe,
        dsh_home,
        unit_path: service::unit_path(manager, &home_dir()?, xdg.as_deref()),
    })
}

/// `systemctl --user daemon-reload`, unless tests asked not to; a failure is a hint.
fn reload_systemd() {
    if std::env::var_os(NO_SERVICE_MANAGER_ENV).is_some() {
        return;
    }
    match std::process::Command::new("systemctl")
        .args(["--user", "daemon-reload"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => println!("ran `systemctl --user daemon-reload`"),
        Ok(s) => println!("hint: `systemctl --user daemon-reload` failed ({s}); run it yourself once a user session manager is available"),
        Err(e) => println!("hint: could not run `systemctl --user daemon-reload` ({e}); run it yourself"),
    }
}

fn install(paths: &Paths) -> Result<()> {
    let spec = spec(paths)?;
    // The unit copies none of the shell's environment: the harness id it would have seen
    // there goes into the home config, so the service and this shell are one machine.
    let home_config =
        dsh_chapters::config::load_home(&paths.dsh_home, &dsh_chapters::config::chapters_env())?;
    if let Some(from) = super::harness_id_unsettled(&home_config) {
        let id = dsh_chapters::identity::harness_id(home_config.harness_id.as_deref(), None)?;
        if dsh_chapters::config::persist_home_key(
            &paths.dsh_home,
            "harnessId",
            &id,
            super::HARNESS_ID_WHY,
        )? {
            println!(
                "saved harness id {id:?} (from {from}) in {}",
                dsh_chapters::config::home_config_path(&paths.dsh_home).display()
            );
        }
    }
    let wrote = service::install(&spec)
        .with_context(|| format!("cannot write {}", spec.unit_path.display()))?;
    if wrote {
        println!("wrote {}", spec.unit_path.display());
    } else {
        println!("already installed: {}", spec.unit_path.display());
    }
    println!(
        "  runs: {} daemon --foreground (DSH_HOME={})",
        spec.exe.display(),
        spec.dsh_home.display()
    );
    if spec.manager == Manager::Systemd {
        reload_systemd();
    }
    let (start, undo) = service::next_steps(&spec);
    println!("  start it: {start}");
    println!("  undo: {undo}");
    Ok(())
}

fn uninstall() -> Result<()> {
    let manager = Manager::native();
    let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
    let path = service::unit_path(manager, &home_dir()?, xdg.as_deref());
    if service::uninstall(&path).with_context(|| format!("cannot remove {}", path.display()))? {
        println!("removed {}", path.display());
        match manager {
            Manager::Systemd => {
                reload_systemd();
                println!(
                    "  a running service keeps running until: systemctl --user disable --now {}",
                    service::SYSTEMD_UNIT
                );
            }
            Manager::Launchd => println!(
                "  a loaded agent keeps running until: launchctl remove {}",
                service::LAUNCHD_LABEL
            ),
        }
    } else {
        println!("nothing to remove: {} does not exist", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_chapters::daemon::control::ProtocolError;

    fn connect_err(kind: ErrorKind) -> ClientError {
        ClientError::Connect {
            socket: "/h/dsh-chapters/daemon.sock".into(),
            source: std::io::Error::from(kind),
        }
    }

    #[test]
    fn a_busy_or_foreign_daemon_is_never_advised_killed() {
        let paths = Paths::new(std::path::Path::new("/h"));
        let busy = [
            ClientError::Io {
                socket: paths.socket.clone(),
                source: std::io::Error::from(ErrorKind::WouldBlock),
            },
            ClientError::Protocol {
                socket: paths.socket.clone(),
                source: ProtocolError::BadHello("too many control requests".into()),
            },
            connect_err(ErrorKind::PermissionDenied),
            connect_err(ErrorKind::TimedOut),
        ];
        for e in &busy {
            let advice = unreachable_advice(42, &paths, e);
            assert!(!advice.contains("kill"), "{advice}");
            assert!(advice.contains("pid 42"), "{advice}");
        }
        assert!(unreachable_advice(42, &paths, &busy[0]).contains("busy, not stuck"));
        // Unreachable for good: stopping it by signal is the one way left, and said so.
        for kind in [ErrorKind::NotFound, ErrorKind::ConnectionRefused] {
            let advice = unreachable_advice(42, &paths, &connect_err(kind));
            assert!(advice.contains("`kill 42`"), "{advice}");
            assert!(!advice.contains("-9"), "{advice}");
        }
    }
}
