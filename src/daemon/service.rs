//! `chapters daemon install` / `uninstall`: a systemd user unit (Linux) or a launchd agent
//! (macOS) that runs `chapters daemon --foreground`. The unit texts are built purely here;
//! [`install`] and [`uninstall`] are the thin writers. Nothing here runs `systemctl` or
//! `launchctl`: the CLI may try `systemctl --user daemon-reload` and only prints a hint
//! when that fails.

use std::path::{Path, PathBuf};

use crate::store::{atomic, StoreError};

/// The systemd unit's file name.
pub const SYSTEMD_UNIT: &str = "dsh-chapters.service";
/// The launchd agent's label (and file stem).
pub const LAUNCHD_LABEL: &str = "dev.dsh-chapters.daemon";

/// Which service manager a unit is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    Systemd,
    Launchd,
}

impl Manager {
    /// The manager of the platform this program was built for.
    pub fn native() -> Manager {
        if cfg!(target_os = "macos") {
            Manager::Launchd
        } else {
            Manager::Systemd
        }
    }
}

/// Where the unit goes and what to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSpec {
    pub manager: Manager,
    /// The `chapters` executable.
    pub exe: PathBuf,
    /// The `DSH_HOME` the daemon watches.
    pub dsh_home: PathBuf,
    /// The unit file's path.
    pub unit_path: PathBuf,
}

/// The unit's path: `$XDG_CONFIG_HOME/systemd/user/dsh-chapters.service` (XDG_CONFIG_HOME
/// defaulting to `~/.config`), or `~/Library/LaunchAgents/<label>.plist`. Pure: the
/// caller reads the environment.
pub fn unit_path(manager: Manager, home: &Path, xdg_config_home: Option<&Path>) -> PathBuf {
    match manager {
        Manager::Systemd => xdg_config_home
            .filter(|p| p.is_absolute())
            .map_or_else(|| home.join(".config"), Path::to_path_buf)
            .join("systemd/user")
            .join(SYSTEMD_UNIT),
        Manager::Launchd => home
            .join("Library/LaunchAgents")
            .join(format!("{LAUNCHD_LABEL}.plist")),
    }
}

/// One argument for a systemd `ExecStart=`/`Environment=` line: quoted, with `\`, `"`,
/// `%` and `$` escaped so the path is taken literally.
fn systemd_quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// The unit file's text.
pub fn unit_text(spec: &ServiceSpec) -> String {
    let exe = spec.exe.to_string_lossy();
    let home = spec.dsh_home.to_string_lossy();
    match spec.manager {
        Manager::Systemd => format!(
            "# Written by `chapters daemon install`; remove with `chapters daemon uninstall`.\n\
             [Unit]\n\
             Description=dsh-chapters daemon: sign, archive and sync DSH sessions\n\
             \n\
             [Service]\n\
             Type=simple\n\
             ExecStart={} daemon --foreground\n\
             ExecReload=/bin/kill -HUP $MAINPID\n\
             Environment={}\n\
             Restart=on-failure\n\
             RestartSec=5\n\
             \n\
             [Install]\n\
             WantedBy=default.target\n",
            systemd_quote(&exe),
            systemd_quote(&format!("DSH_HOME={home}")),
        ),
        Manager::Launchd => format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
             <!-- Written by `chapters daemon install`; remove with `chapters daemon uninstall`. -->\n\
             <plist version=\"1.0\">\n\
             <dict>\n\
             \x20 <key>Label</key><string>{LAUNCHD_LABEL}</string>\n\
             \x20 <key>ProgramArguments</key>\n\
             \x20 <array><string>{}</string><string>daemon</string><string>--foreground</string></array>\n\
             \x20 <key>EnvironmentVariables</key>\n\
             \x20 <dict><key>DSH_HOME</key><string>{}</string></dict>\n\
             \x20 <key>RunAtLoad</key><true/>\n\
             \x20 <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>\n\
             </dict>\n\
             </plist>\n",
            xml_escape(&exe),
            xml_escape(&home),
        ),
    }
}

/// What to type to start the unit once written, and to undo the install.
pub fn next_steps(spec: &ServiceSpec) -> (String, String) {
    let path = spec.unit_path.display();
    match spec.manager {
        Manager::Systemd => (
            format!("systemctl --user enable --now {SYSTEMD_UNIT}"),
            format!(
                "chapters daemon uninstall (or: systemctl --user disable --now {SYSTEMD_UNIT} && rm {path})"
            ),
        ),
        Manager::Launchd => (
            format!("launchctl load -w {path}"),
            format!("chapters daemon uninstall (or: launchctl unload -w {path} && rm {path})"),
        ),
    }
}

/// Write the unit atomically. `Ok(false)` when the same text was already there.
pub fn install(spec: &ServiceSpec) -> Result<bool, StoreError> {
    let text = unit_text(spec);
    if std::fs::read_to_string(&spec.unit_path).is_ok_and(|t| t == text) {
        return Ok(false);
    }
    if let Some(dir) = spec.unit_path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    atomic::write_atomic(&spec.unit_path, text.as_bytes())?;
    Ok(true)
}

/// Remove the unit; `Ok(false)` when there was none.
pub fn uninstall(unit_path: &Path) -> Result<bool, StoreError> {
    match std::fs::remove_file(unit_path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(StoreError::Io {
            path: unit_path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(manager: Manager, exe: &str, home: &str) -> ServiceSpec {
        ServiceSpec {
            manager,
            exe: exe.into(),
            dsh_home: home.into(),
            unit_path: unit_path(manager, Path::new("/home/ana"), None),
        }
    }

    #[test]
    fn unit_paths() {
        assert_eq!(
            unit_path(Manager::Systemd, Path::new("/home/ana"), None),
            Path::new("/home/ana/.config/systemd/user/dsh-chapters.service")
        );
        assert_eq!(
            unit_path(
                Manager::Systemd,
                Path::new("/home/ana"),
                Some(Path::new("/x/cfg"))
            ),
            Path::new("/x/cfg/systemd/user/dsh-chapters.service")
        );
        // A relative XDG_CONFIG_HOME is invalid by the spec and ignored.
        assert_eq!(
            unit_path(
                Manager::Systemd,
                Path::new("/home/ana"),
                Some(Path::new("rel"))
            ),
            Path::new("/home/ana/.config/systemd/user/dsh-chapters.service")
        );
        assert_eq!(
            unit_path(Manager::Launchd, Path::new("/Users/ana"), None),
            Path::new("/Users/ana/Library/LaunchAgents/dev.dsh-chapters.daemon.plist")
        );
    }

    #[test]
    fn systemd_unit_runs_the_foreground_daemon_with_its_home() {
        let text = unit_text(&spec(
            Manager::Systemd,
            "/usr/bin/chapters",
            "/home/ana/.dsh",
        ));
        assert!(
            text.contains("ExecStart=\"/usr/bin/chapters\" daemon --foreground\n"),
            "{text}"
        );
        assert!(
            text.contains("Environment=\"DSH_HOME=/home/ana/.dsh\"\n"),
            "{text}"
        );
        assert!(text.contains("WantedBy=default.target"));
        // SIGHUP reloads the config (`systemctl --user reload`); nothing of the shell's
        // environment but DSH_HOME is copied: the harness id comes from the home config.
        assert!(
            text.contains("ExecReload=/bin/kill -HUP $MAINPID\n"),
            "{text}"
        );
        assert_eq!(text.matches("Environment=").count(), 1, "{text}");
        assert!(!text.contains("CHAPTERS_"), "{text}");
    }

    #[test]
    fn hostile_paths_are_quoted_not_interpreted() {
        let text = unit_text(&spec(
            Manager::Systemd,
            "/opt/my apps/ch\"ap%ters$HOME\\x",
            "/h\nExecStartPre=/bin/evil",
        ));
        assert!(
            text.contains(r#"ExecStart="/opt/my apps/ch\"ap%%ters$$HOME\\x" daemon"#),
            "{text}"
        );
        assert!(
            !text.contains("\nExecStartPre"),
            "a newline must not start a directive: {text}"
        );
        let plist = unit_text(&spec(Manager::Launchd, "/a<b>&c", "/h\"'"));
        assert!(
            plist.contains("<string>/a&lt;b&gt;&amp;c</string>"),
            "{plist}"
        );
        assert!(plist.contains("<string>/h&quot;&apos;</string>"), "{plist}");
    }

    #[test]
    fn install_is_idempotent_and_uninstall_removes() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = spec(Manager::Systemd, "/usr/bin/chapters", "/h");
        s.unit_path = unit_path(Manager::Systemd, dir.path(), None);
        assert!(install(&s).unwrap());
        assert!(!install(&s).unwrap());
        assert_eq!(
            std::fs::read_to_string(&s.unit_path).unwrap(),
            unit_text(&s)
        );
        let (start, undo) = next_steps(&s);
        assert!(start.contains("enable --now"));
        assert!(undo.contains("chapters daemon uninstall"));
        assert!(uninstall(&s.unit_path).unwrap());
        assert!(!uninstall(&s.unit_path).unwrap());
    }
}
