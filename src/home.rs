//! This program's home, `$DSH_HOME/dsh-chapters/`: config, credentials, the daemon's socket,
//! pid lock, state and logs. Owner-only whatever the umask: every directory here is created
//! `0700` (and tightened when found looser), every file `0600` from the moment it exists —
//! the mode is passed to `open`/`mkdir` and then set exactly, since a umask can only narrow
//! it and a umask of 0 would otherwise leave the daemon's socket `0777` to any local user.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The home's name under `$DSH_HOME`.
pub const HOME_DIR: &str = "dsh-chapters";
/// Every directory under the home.
pub const DIR_MODE: u32 = 0o700;
/// Every file (and the control socket) under the home.
pub const FILE_MODE: u32 = 0o600;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// `$DSH_HOME/dsh-chapters`.
pub fn dir(dsh_home: &Path) -> PathBuf {
    dsh_home.join(HOME_DIR)
}

/// Create `$DSH_HOME/dsh-chapters` owner-only, tightening it when it exists looser.
/// `$DSH_HOME` (the harness's) is left as it is when it exists; created here, it is
/// owner-only too. Returns the home's path.
pub fn ensure(dsh_home: &Path) -> io::Result<PathBuf> {
    let home = dir(dsh_home);
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dsh_home)?;
    ensure_private_dir(&home)?;
    Ok(home)
}

/// Whether `meta` has bits beyond `mode` and is ours to change: an entry another user
/// owns (a home an administrator prepared, a daemon run as another user) is left as it is
/// — only its owner may change its mode.
fn needs_tightening(meta: &fs::Metadata, allowed: u32) -> bool {
    meta.permissions().mode() & 0o7777 & !allowed != 0
        && meta.uid() == rustix::process::geteuid().as_raw()
}

/// Create `dir` (its parent must exist) with mode `0700`, or tighten it to `0700` when it
/// exists (and is ours) with any group or other bit. A file in its place is refused.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let meta = fs::symlink_metadata(dir)?;
            if !meta.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "exists and is not a directory",
                ));
            }
            if needs_tightening(&meta, DIR_MODE) {
                fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))?;
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Make an existing file owner-only (a socket just bound, a file an older version created).
pub fn tighten_file(path: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    if needs_tightening(&meta, FILE_MODE) {
        fs::set_permissions(path, fs::Permissions::from_mode(FILE_MODE))?;
    }
    Ok(())
}

fn tighten_open(file: &File) -> io::Result<()> {
    if needs_tightening(&file.metadata()?, FILE_MODE) {
        file.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
    }
    Ok(())
}

/// Open `path` for appending, created `0600` when absent and tightened when looser.
pub fn open_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .open(path)?;
    tighten_open(&file)?;
    Ok(file)
}

/// Open (create `0600` when absent, tighten when looser) `path` for reading and writing,
/// never truncating: the daemon's pid lock.
pub fn open_rw(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .open(path)?;
    tighten_open(&file)?;
    Ok(file)
}

/// Replace `path` with `bytes` atomically, owner-only: a temp file created `0600` (never
/// wider, not even for an instant), written, fsynced, renamed over the target, and the
/// directory fsynced.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file path",
        ));
    };
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".{}.tmp.{}.{n}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&tmp)?;
        file.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        // Best effort: the write already failed; the temp file is ours and owner-only.
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    File::open(dir).and_then(|d| d.sync_all())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn created_and_tightened_owner_only() {
        let tmp = tempfile::tempdir().unwrap();
        let dsh = tmp.path().join("dsh");
        let home = ensure(&dsh).unwrap();
        assert_eq!(mode(&home), 0o700);
        fs::set_permissions(&home, fs::Permissions::from_mode(0o777)).unwrap();
        ensure(&dsh).unwrap();
        assert_eq!(mode(&home), 0o700);

        let f = home.join("state.json");
        write_private(&f, b"{}").unwrap();
        assert_eq!(mode(&f), 0o600);
        fs::set_permissions(&f, fs::Permissions::from_mode(0o666)).unwrap();
        write_private(&f, b"{}\n").unwrap();
        assert_eq!(mode(&f), 0o600);
        assert_eq!(fs::read(&f).unwrap(), b"{}\n");

        let log = home.join("a.log");
        fs::write(&log, "old\n").unwrap();
        fs::set_permissions(&log, fs::Permissions::from_mode(0o644)).unwrap();
        drop(open_append(&log).unwrap());
        assert_eq!(mode(&log), 0o600);
        drop(open_rw(&home.join("p")).unwrap());
        assert_eq!(mode(&home.join("p")), 0o600);

        let names: Vec<_> = fs::read_dir(&home)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp.")), "{names:?}");

        fs::write(tmp.path().join("file"), "x").unwrap();
        assert!(ensure_private_dir(&tmp.path().join("file")).is_err());
    }
}
