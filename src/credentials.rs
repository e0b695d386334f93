//! Pool tokens at rest: `$DSH_HOME/dsh-chapters/credentials/<projectKey>`, mode 0600, in a
//! 0700 directory (record §2.1, §11.1; contract "Names").
//!
//! The token lives under the harness home, never in the project tree: the workspace is the
//! agent's reading room. This is a same-uid hygiene boundary, not a cryptographic one; the
//! hard guarantee is elsewhere — no code path prints the token ([`Secret`] shows `***`) or
//! puts it on a child's command line (`pool::transport`).

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::names::is_safe_component;

/// `$DSH_HOME/dsh-chapters/credentials`.
const CREDENTIALS_DIR: [&str; 2] = ["dsh-chapters", "credentials"];
const FILE_MODE: u32 = 0o600;
/// A token is a short line; anything bigger is not one (and is not read into memory).
const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Distinguishes temp files of concurrent writes in one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A token. `Debug` and `Display` print `***`; only [`Secret::expose`] yields the value, so
/// every place that reads it is greppable.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Parse a token as a user supplies it (a token file or stdin): surrounding whitespace,
    /// such as the trailing newline of a file, is dropped. Refused: empty, over 8 KiB, or
    /// holding whitespace or control characters inside (a token is one opaque word, and a
    /// newline would break the credential protocol that hands it to git).
    pub fn parse(input: &str) -> Result<Secret, CredentialError> {
        let token = input.trim();
        if token.is_empty() {
            return Err(CredentialError::BadToken {
                reason: "it is empty",
            });
        }
        if token.len() > MAX_TOKEN_BYTES {
            return Err(CredentialError::BadToken {
                reason: "it is longer than 8 KiB",
            });
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(CredentialError::BadToken {
                reason: "it holds whitespace or control characters",
            });
        }
        Ok(Secret(token.to_owned()))
    }

    /// The token itself. Call only to hand it to the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("project key {key:?} is not a safe file name (empty, over 128 bytes, or it holds `/`, `\\`, `..`, a control character or a leading `.`); refusing to name a credential file after it")]
    UnsafeKey { key: String },
    #[error("the token was refused: {reason}. Pass the token exactly as the forge issued it")]
    BadToken { reason: &'static str },
    #[error("{path} is readable or writable by other users (mode {mode:o}); the token may have leaked: revoke it at the forge, then link again with a new one")]
    LoosePermissions { path: PathBuf, mode: u32 },
    #[error("{path} is not a regular file; move it aside and link again")]
    NotAFile { path: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err(path: &Path, source: io::Error) -> CredentialError {
    CredentialError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `$DSH_HOME/dsh-chapters/credentials`.
pub fn credentials_dir(dsh_home: &Path) -> PathBuf {
    CREDENTIALS_DIR
        .iter()
        .fold(dsh_home.to_path_buf(), |p, c| p.join(c))
}

/// `$DSH_HOME/dsh-chapters/credentials/<projectKey>`, once the key is checked.
pub fn credential_path(dsh_home: &Path, project_key: &str) -> Result<PathBuf, CredentialError> {
    if !is_safe_component(project_key) {
        return Err(CredentialError::UnsafeKey {
            key: project_key.to_owned(),
        });
    }
    Ok(credentials_dir(dsh_home).join(project_key))
}

/// Create the home and the credentials directory (both 0700) and tighten them if they
/// exist looser.
fn ensure_dir(dsh_home: &Path, dir: &Path) -> Result<(), CredentialError> {
    crate::home::ensure(dsh_home).map_err(|e| io_err(&crate::home::dir(dsh_home), e))?;
    crate::home::ensure_private_dir(dir).map_err(|e| io_err(dir, e))
}

/// Store `token` for `project_key`, replacing any earlier one atomically: a temp file
/// created 0600 (never wider, not even for an instant), written, fsynced, renamed over the
/// target, and the directory fsynced.
pub fn store(
    dsh_home: &Path,
    project_key: &str,
    token: &Secret,
) -> Result<PathBuf, CredentialError> {
    let path = credential_path(dsh_home, project_key)?;
    let dir = credentials_dir(dsh_home);
    ensure_dir(dsh_home, &dir)?;
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{project_key}.tmp.{}.{n}", std::process::id()));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&tmp)?;
        // The umask can only narrow 0600; set it exactly so a later load never refuses it.
        file.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
        file.write_all(token.expose().as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()
    })();
    if let Err(e) = written {
        // Best effort: the write already failed and the temp file holds at most the token,
        // 0600, in our own 0700 directory.
        let _ = fs::remove_file(&tmp);
        return Err(io_err(&tmp, e));
    }
    if let Err(e) = fs::rename(&tmp, &path) {
        let _ = fs::remove_file(&tmp);
        return Err(io_err(&path, e));
    }
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(&dir, e))?;
    Ok(path)
}

/// The stored token for `project_key`, or `None` when there is none. Refuses a file other
/// users can read or write (as ssh does with a private key) and anything but a regular file.
pub fn load(dsh_home: &Path, project_key: &str) -> Result<Option<Secret>, CredentialError> {
    let path = credential_path(dsh_home, project_key)?;
    match fs::symlink_metadata(&path) {
        Ok(meta) if !meta.file_type().is_file() => {
            return Err(CredentialError::NotAFile { path });
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(&path, e)),
    }
    let file = File::open(&path).map_err(|e| io_err(&path, e))?;
    let mode = file
        .metadata()
        .map_err(|e| io_err(&path, e))?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o077 != 0 {
        return Err(CredentialError::LoosePermissions { path, mode });
    }
    let mut bytes = Vec::new();
    file.take(MAX_TOKEN_BYTES as u64 + 2)
        .read_to_end(&mut bytes)
        .map_err(|e| io_err(&path, e))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        io_err(
            &path,
            io::Error::new(
                io::ErrorKind::InvalidData,
                "not UTF-8; link again to replace it",
            ),
        )
    })?;
    Secret::parse(&text).map(Some)
}

/// Forget the token for `project_key`: `true` when one was removed.
pub fn delete(dsh_home: &Path, project_key: &str) -> Result<bool, CredentialError> {
    let path = credential_path(dsh_home, project_key)?;
    match fs::remove_file(&path) {
        Ok(()) => {
            let dir = credentials_dir(dsh_home);
            File::open(&dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_err(&dir, e))?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err(&path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "570721c2-f7fa-57ac-8d5d-c16a6acf1978";

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn round_trip_with_modes_0600_and_0700() {
        let home = tempfile::tempdir().unwrap();
        let token = Secret::parse("ghp_abc123\n").unwrap();
        let path = store(home.path(), KEY, &token).unwrap();
        assert_eq!(path, home.path().join("dsh-chapters/credentials").join(KEY));
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&credentials_dir(home.path())), 0o700);
        assert_eq!(
            load(home.path(), KEY).unwrap().unwrap().expose(),
            "ghp_abc123"
        );
        // Replacing keeps the mode and leaves no temp file behind.
        store(home.path(), KEY, &Secret::parse("second").unwrap()).unwrap();
        assert_eq!(load(home.path(), KEY).unwrap().unwrap().expose(), "second");
        assert_eq!(mode(&path), 0o600);
        let names: Vec<_> = fs::read_dir(credentials_dir(home.path()))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(KEY)]);
        assert!(delete(home.path(), KEY).unwrap());
        assert!(!delete(home.path(), KEY).unwrap());
        assert!(load(home.path(), KEY).unwrap().is_none());
    }

    #[test]
    fn an_existing_loose_directory_is_tightened() {
        let home = tempfile::tempdir().unwrap();
        let dir = credentials_dir(home.path());
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        store(home.path(), KEY, &Secret::parse("t").unwrap()).unwrap();
        assert_eq!(mode(&dir), 0o700);
    }

    #[test]
    fn debug_and_display_hide_the_value() {
        let token = Secret::parse("hunter2-very-secret").unwrap();
        assert_eq!(format!("{token:?}"), "***");
        assert_eq!(format!("{token}"), "***");
        assert_eq!(format!("{:?}", Some(token.clone())), "Some(***)");
    }

    #[test]
    fn unsafe_keys_are_refused() {
        let home = tempfile::tempdir().unwrap();
        let token = Secret::parse("t").unwrap();
        for key in [
            "",
            "../escape",
            "a/b",
            ".hidden",
            "a\nb",
            "..",
            &"k".repeat(200),
        ] {
            assert!(
                matches!(
                    store(home.path(), key, &token),
                    Err(CredentialError::UnsafeKey { .. })
                ),
                "{key:?}"
            );
            assert!(matches!(
                load(home.path(), key),
                Err(CredentialError::UnsafeKey { .. })
            ));
            assert!(matches!(
                delete(home.path(), key),
                Err(CredentialError::UnsafeKey { .. })
            ));
        }
        assert!(
            !home.path().join("dsh-chapters").exists(),
            "nothing was created"
        );
    }

    #[test]
    fn bad_tokens_are_refused_without_echoing_them() {
        for input in [
            "",
            "  \n",
            "two words",
            "line\nbreak",
            "tab\tinside",
            "nul\0byte",
        ] {
            let err = Secret::parse(input).unwrap_err();
            assert!(matches!(err, CredentialError::BadToken { .. }), "{input:?}");
            if input.trim().len() > 3 {
                assert!(!err.to_string().contains(input.trim()), "{err}");
            }
        }
        assert!(Secret::parse(&"x".repeat(MAX_TOKEN_BYTES + 1)).is_err());
        assert_eq!(
            Secret::parse(&"x".repeat(MAX_TOKEN_BYTES))
                .unwrap()
                .expose()
                .len(),
            MAX_TOKEN_BYTES
        );
        assert_eq!(
            Secret::parse("\t tok-en_1.2 \r\n").unwrap().expose(),
            "tok-en_1.2"
        );
    }

    #[test]
    fn load_refuses_loose_files_symlinks_and_garbage() {
        let home = tempfile::tempdir().unwrap();
        let path = store(home.path(), KEY, &Secret::parse("t").unwrap()).unwrap();

        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let err = load(home.path(), KEY).unwrap_err();
        assert!(
            matches!(err, CredentialError::LoosePermissions { mode: 0o644, .. }),
            "{err}"
        );

        fs::remove_file(&path).unwrap();
        let elsewhere = home.path().join("elsewhere");
        fs::write(&elsewhere, "t").unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        assert!(matches!(
            load(home.path(), KEY),
            Err(CredentialError::NotAFile { .. })
        ));

        fs::remove_file(&path).unwrap();
        fs::write(&path, [0xff, 0xfe, b'x']).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            load(home.path(), KEY),
            Err(CredentialError::Io { .. })
        ));

        // Huge content is not read whole, and is refused as a token.
        fs::write(&path, vec![b'a'; 1 << 20]).unwrap();
        assert!(matches!(
            load(home.path(), KEY),
            Err(CredentialError::BadToken { .. })
        ));

        fs::write(&path, "").unwrap();
        assert!(matches!(
            load(home.path(), KEY),
            Err(CredentialError::BadToken { .. })
        ));
    }
}
