//! What to do about a failure, said in one place at the CLI's edge (jj's `CommandError` with
//! hints): the library's errors say what happened; [`hint`] walks the cause chain, and the
//! first cause it knows gives the hint — printed as `hint: …` on stderr (unless the message
//! already says it) and as the `hint` of a `--json` failure.

use std::error::Error as StdError;
use std::io::ErrorKind;

use dsh_chapters::config::ConfigError;
use dsh_chapters::enrich::HttpError;
use dsh_chapters::pool::sync::SyncError;
use dsh_chapters::store::ledger::LedgerError;
use dsh_chapters::store::lock::LockError;
use dsh_chapters::store::StoreError;

/// The hint for `error`: the first cause in its chain that has one, else the hint of the
/// first I/O error's kind.
pub fn hint(error: &anyhow::Error) -> Option<String> {
    error
        .chain()
        .find_map(known)
        .or_else(|| error.chain().find_map(io_kind))
}

/// The hint for one error and its causes (a failure a report carries rather than returns).
pub fn hint_of(error: &(dyn StdError + 'static)) -> Option<String> {
    fn chain<'a>(
        error: &'a (dyn StdError + 'static),
    ) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
        let mut next = Some(error);
        std::iter::from_fn(move || {
            let e = next?;
            next = e.source();
            Some(e)
        })
    }
    chain(error)
        .find_map(known)
        .or_else(|| chain(error).find_map(io_kind))
}

/// A usage error's hint (clap's own message names the argument).
pub fn usage_hint(command: Option<&str>) -> String {
    match command {
        Some(c) => format!("run `chapters {c} --help` for its arguments"),
        None => "run `chapters --help` for the commands".to_owned(),
    }
}

/// The store error inside `cause`: itself, or the one a module error wraps transparently (a
/// transparent wrapper is not a link of the chain of its own, so it is unwrapped here).
fn store_error<'a>(cause: &'a (dyn StdError + 'static)) -> Option<&'a StoreError> {
    use dsh_chapters::*;
    macro_rules! unwrap_store {
        ($($t:ty => $store:path),*) => {
            $(if let Some($store(e)) = cause.downcast_ref::<$t>() {
                return Some(e);
            })*
        };
    }
    if let Some(e) = cause.downcast_ref::<StoreError>() {
        return Some(e);
    }
    unwrap_store!(
        archive::ArchiveError => archive::ArchiveError::Store,
        signer::SignError => signer::SignError::Store,
        rules::store::RulesStoreError => rules::store::RulesStoreError::Store,
        pool::link::LinkError => pool::link::LinkError::Store,
        store::catalog::CatalogError => store::catalog::CatalogError::Store,
        store::forget::ForgetError => store::forget::ForgetError::Store,
        enrich::run::EnrichError => enrich::run::EnrichError::Store,
        topics::build::BuildError => topics::build::BuildError::Store,
        catalog::table::TableError => catalog::table::TableError::Store,
        scan::ScanError => scan::ScanError::Store,
        status::StatusError => status::StatusError::Store
    );
    None
}

fn known(cause: &(dyn StdError + 'static)) -> Option<String> {
    if let Some(e) = store_error(cause) {
        return match e {
            StoreError::NotEnabled { .. } => Some(
                "run `chapters init` in the workspace first, or name another with `--workspace DIR`"
                    .into(),
            ),
            StoreError::WouldOverwrite { .. } => Some(
                "the store is append-only: move the other file aside if it is not the store's, then run the command again"
                    .into(),
            ),
            StoreError::Damaged { .. } => Some(
                "restore the file from git or a backup, or move it aside; `chapters status` shows what the store still reads"
                    .into(),
            ),
            // Transparent wrappers: the inner error is not a cause of its own in the chain.
            StoreError::Lock(e) => lock(e),
            StoreError::Ledger(e) => ledger(e),
            _ => None,
        };
    }
    if let Some(e) = cause.downcast_ref::<LockError>() {
        return lock(e);
    }
    if let Some(e) = cause.downcast_ref::<LedgerError>() {
        return ledger(e);
    }
    if let Some(e) = cause.downcast_ref::<ConfigError>() {
        // A file that cannot be read or written: its I/O error's kind says what to do.
        if matches!(e, ConfigError::Io { .. } | ConfigError::Write { .. }) {
            return None;
        }
        return Some(
            "fix the file, line or variable named above; every key and its default is in config/defaults.yml"
                .into(),
        );
    }
    if let Some(e) = cause.downcast_ref::<HttpError>() {
        return match e {
            HttpError::Connect { .. } => Some(
                "start the model server, or point enrichment elsewhere with `chapters enrich model --endpoint URL`"
                    .into(),
            ),
            HttpError::Timeout { .. } => {
                Some("a slow model needs a larger `enrichmentTimeoutMs`".into())
            }
            HttpError::BadUrl { .. } => Some(
                "give an http:// or https:// URL with `chapters enrich model --endpoint URL`"
                    .into(),
            ),
            _ => None,
        };
    }
    if let Some(dsh_chapters::store::catalog::CatalogError::Sql { .. }) = cause.downcast_ref() {
        return Some(
            "the store's catalog is a record of what changed: delete the file named above and readers rescan the store"
                .into(),
        );
    }
    if let Some(e) = cause.downcast_ref::<SyncError>() {
        let h = e.code.hint();
        return (!h.is_empty()).then(|| h.to_owned());
    }
    None
}

fn lock(e: &LockError) -> Option<String> {
    match e {
        LockError::Busy { .. } => Some(
            "another chapters command (or the daemon) is writing this store: wait for it, or see `chapters daemon status`"
                .into(),
        ),
        _ => None,
    }
}

fn ledger(e: &LedgerError) -> Option<String> {
    match e {
        LedgerError::CorruptLine { .. } => {
            Some("restore the damaged line from git or a backup, or move the file aside".into())
        }
        _ => None,
    }
}

fn io_kind(cause: &(dyn StdError + 'static)) -> Option<String> {
    let e = cause.downcast_ref::<std::io::Error>()?;
    let h = match e.kind() {
        ErrorKind::PermissionDenied => {
            "check the owner and permissions of the path named above (`ls -l`)"
        }
        ErrorKind::StorageFull => "the disk is full: free space, then run the command again",
        ErrorKind::FileTooLarge => {
            "a file size limit (`ulimit -f`) refused the write: raise it, then run the command again"
        }
        ErrorKind::ReadOnlyFilesystem => {
            "the filesystem is read-only: remount it writable or work in another workspace"
        }
        ErrorKind::IsADirectory => "a directory is where a file was expected: move it aside",
        ErrorKind::NotADirectory => "a file is where a directory was expected: move it aside",
        _ => return None,
    };
    Some(h.to_owned())
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::PathBuf;

    use super::super::said_once;

    /// Rust syntax that must never reach a person.
    const RUST_SYNTAX: &[&str] = &[
        "Some(", "None", "Ok(", "Err(", "PathBuf", "Custom {", "kind:",
    ];

    fn io() -> io::Error {
        io::Error::from_raw_os_error(21)
    }

    fn p() -> PathBuf {
        PathBuf::from("/w/.dsh-chapters/x")
    }

    /// One I/O error inside each module error that wraps one, as the CLI renders it (the
    /// chain, each cause said once), also under a context line.
    fn representative() -> Vec<anyhow::Error> {
        use dsh_chapters::*;
        let errors: Vec<anyhow::Error> = vec![
            store::StoreError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            store::ledger::LedgerError::Io {
                file: p(),
                source: io(),
            }
            .into(),
            store::lock::LockError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            store::catalog::CatalogError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            store::forget::ForgetError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            store::read::ReadError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            session::reader::ReadError::Io {
                file: p(),
                source: io(),
            }
            .into(),
            session::discover::DiscoverError::Io {
                dir: p(),
                source: io(),
            }
            .into(),
            config::ConfigError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            config::ConfigError::Write {
                path: p(),
                source: io(),
            }
            .into(),
            identity::IdentityError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            enrich::HttpError::Connect {
                endpoint: "http://127.0.0.1:1".into(),
                source: io(),
            }
            .into(),
            enrich::HttpError::Io {
                endpoint: "http://127.0.0.1:1".into(),
                source: io(),
            }
            .into(),
            dsh_chapters::credentials::CredentialError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            pool::link::LinkError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            dsh_chapters::git::GitError::CreateDir {
                path: p(),
                source: io(),
            }
            .into(),
            rules::store::RulesStoreError::List {
                path: p(),
                source: io(),
            }
            .into(),
            curation::file::CurationFileError::List {
                dir: p(),
                source: io(),
            }
            .into(),
            catalog::table::TableError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            topics::build::BuildError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            scan::ScanError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            daemon::DaemonError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            daemon::DaemonError::Socket {
                path: p(),
                source: io(),
            }
            .into(),
            daemon::pidlock::PidLockError::Io {
                path: p(),
                source: io(),
            }
            .into(),
            daemon::follow::FollowError::Stat {
                file: p(),
                source: io(),
            }
            .into(),
            daemon::control::ClientError::Connect {
                socket: p(),
                source: io(),
            }
            .into(),
            daemon::control::ClientError::Io {
                socket: p(),
                source: io(),
            }
            .into(),
            // Wrapped once more, as a command's error wraps a module's.
            status::StatusError::Store(store::StoreError::Io {
                path: p(),
                source: io(),
            })
            .into(),
            store::StoreError::Ledger(store::ledger::LedgerError::Io {
                file: p(),
                source: io(),
            })
            .into(),
        ];
        let mut out = Vec::new();
        for e in errors {
            out.push(anyhow::anyhow!("{}", said_once(&e)));
            out.push(e.context("cannot run the command"));
        }
        out
    }

    #[test]
    fn every_error_says_its_cause_once_and_no_rust_syntax() {
        let cause = io().to_string();
        for e in representative() {
            let shown = said_once(&e);
            assert_eq!(shown.matches(&cause).count(), 1, "{shown}");
            let segments: Vec<&str> = shown.split(": ").collect();
            for (i, s) in segments.iter().enumerate() {
                assert!(
                    !segments[i + 1..].contains(s),
                    "segment {s:?} said twice: {shown}"
                );
            }
            for syntax in RUST_SYNTAX {
                assert!(!shown.contains(syntax), "{syntax} in {shown}");
            }
        }
    }

    #[test]
    fn a_hint_is_found_through_the_chain() {
        let busy =
            dsh_chapters::store::StoreError::Lock(dsh_chapters::store::lock::LockError::Busy {
                path: p(),
                holder: "42".into(),
                waited_ms: 10,
            });
        let e = anyhow::Error::new(busy).context("cannot archive");
        assert!(super::hint(&e).is_some_and(|h| h.contains("daemon status")));
        let e = anyhow::Error::new(dsh_chapters::config::ConfigError::Io {
            path: p(),
            source: io(),
        });
        assert!(
            super::hint(&e).is_some_and(|h| h.contains("directory")),
            "{:?}",
            super::hint(&e)
        );
        let e = anyhow::anyhow!("something else");
        assert_eq!(super::hint(&e), None);
    }
}
