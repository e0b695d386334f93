//! Opening a file this program reads whole or line by line — a session log, a store ledger —
//! without ever blocking or reading forever: `O_NONBLOCK` (a FIFO with no writer would block
//! `open`), then anything but a regular file (a FIFO, a device such as `/dev/zero` behind a
//! symlink, a socket, a directory) is refused with what it is, in words. Shell (leaf).

use std::fs::File;
use std::io;
use std::path::Path;

/// What a path that is not a regular file is, in words (`a FIFO (named pipe)`, …).
pub const DIRECTORY: &str = "a directory";

/// Why a path could not be opened as a regular file.
#[derive(Debug)]
pub enum NotOpened {
    /// Something else stands there: what it is, in words.
    NotRegular(&'static str),
    /// The open or the `fstat` failed.
    Io(io::Error),
}

/// Open `path` for reading, refusing anything but a regular file.
pub fn open(path: &Path) -> Result<File, NotOpened> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| {
        // A socket cannot be opened at all (ENXIO): say what it is, not just the errno.
        match std::fs::metadata(path) {
            Ok(meta) if !meta.is_file() => NotOpened::NotRegular(kind(meta.file_type())),
            _ => NotOpened::Io(e.into()),
        }
    })?;
    let file = File::from(fd);
    let file_type = file.metadata().map_err(NotOpened::Io)?.file_type();
    if !file_type.is_file() {
        return Err(NotOpened::NotRegular(kind(file_type)));
    }
    Ok(file)
}

/// What a file that is not a regular file is, in words.
fn kind(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_dir() {
        DIRECTORY
    } else {
        "not a regular file"
    }
}
