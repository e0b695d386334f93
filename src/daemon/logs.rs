//! The daemon's log files: `$DSH_HOME/dsh-chapters/logs/daemon.log`, rotated by size to
//! `daemon.log.1` … `daemon.log.<KEPT>`, so the logs never hold more than
//! `(KEPT + 1) × MAX_FILE_BYTES`. Written through `tracing`; optionally echoed to stderr
//! (a foreground daemon in a terminal).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub const LOG_FILE: &str = "daemon.log";
/// One log file's cap.
pub const MAX_FILE_BYTES: u64 = 4 << 20;
/// Rotated files kept besides the current one.
pub const KEPT: u32 = 3;

/// A size-capped, rotating log file.
pub struct RotatingLog {
    dir: PathBuf,
    file: File,
    len: u64,
    cap: u64,
    echo_stderr: bool,
}

fn open_current(dir: &Path) -> io::Result<(File, u64)> {
    let file = crate::home::open_append(&dir.join(LOG_FILE))?;
    let len = file.metadata()?.len();
    Ok((file, len))
}

impl RotatingLog {
    pub fn open(dir: &Path, echo_stderr: bool) -> io::Result<RotatingLog> {
        Self::with_cap(dir, MAX_FILE_BYTES, echo_stderr)
    }

    fn with_cap(dir: &Path, cap: u64, echo_stderr: bool) -> io::Result<RotatingLog> {
        // The home above is the caller's (`home::ensure`); this folder and its files are
        // owner-only like everything in it.
        if let Some(parent) = dir.parent() {
            fs::create_dir_all(parent)?;
        }
        crate::home::ensure_private_dir(dir)?;
        let (file, len) = open_current(dir)?;
        Ok(RotatingLog {
            dir: dir.to_path_buf(),
            file,
            len,
            cap,
            echo_stderr,
        })
    }

    fn rotate(&mut self) -> io::Result<()> {
        let name = |n: u32| self.dir.join(format!("{LOG_FILE}.{n}"));
        let _ = fs::remove_file(name(KEPT));
        for n in (1..KEPT).rev() {
            let from = name(n);
            if from.exists() {
                fs::rename(&from, name(n + 1))?;
            }
        }
        fs::rename(self.dir.join(LOG_FILE), name(1))?;
        let (file, len) = open_current(&self.dir)?;
        self.file = file;
        self.len = len;
        Ok(())
    }
}

impl Write for RotatingLog {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.len > 0 && self.len + buf.len() as u64 > self.cap {
            // A failed rotation keeps logging to the current file rather than losing lines.
            let _ = self.rotate();
        }
        self.file.write_all(buf)?;
        self.len += buf.len() as u64;
        if self.echo_stderr {
            let _ = io::stderr().write_all(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_by_size_and_keeps_a_bounded_number_of_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = RotatingLog::with_cap(dir.path(), 100, false).unwrap();
        for i in 0..50 {
            writeln!(log, "line {i:03} of the daemon's log, padded to forty").unwrap();
        }
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec!["daemon.log", "daemon.log.1", "daemon.log.2", "daemon.log.3"]
        );
        for n in &names {
            assert!(
                fs::metadata(dir.path().join(n)).unwrap().len() <= 100,
                "{n}"
            );
        }
        let current = fs::read_to_string(dir.path().join(LOG_FILE)).unwrap();
        assert!(current.contains("line 049"), "{current}");
        // A line longer than the cap still lands whole, in a file of its own.
        let long = "x".repeat(300);
        log.write_all(format!("{long}\n").as_bytes()).unwrap();
        assert!(fs::read_to_string(dir.path().join(LOG_FILE))
            .unwrap()
            .contains(&long));
    }

    #[test]
    fn reopening_appends() {
        let dir = tempfile::tempdir().unwrap();
        writeln!(RotatingLog::open(dir.path(), false).unwrap(), "one").unwrap();
        writeln!(RotatingLog::open(dir.path(), false).unwrap(), "two").unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join(LOG_FILE)).unwrap(),
            "one\ntwo\n"
        );
    }
}
