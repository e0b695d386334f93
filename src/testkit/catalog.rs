//! Record documents a test or benchmark wrote by hand in the store's catalog, as a `Store`
//! method records what it writes (the product reaches the catalog's writer only through
//! `Store`; `tests/it/shape.rs` checks that no other module names it).

use std::path::Path;

use crate::store::catalog::{Presence, Writer};

/// Record `changes` (workspace-relative folders and their files) as written, in one record.
pub fn record(store_dir: &Path, changes: &[(&str, &[&str])]) {
    Writer::default().record(store_dir, changes, Presence::Written);
}

/// Write a document as a store writer does: the file (its folders made), then its record.
/// `rel` is workspace-relative.
pub fn put_document(ws: &Path, rel: &str, text: &str) {
    let path = ws.join(rel);
    std::fs::create_dir_all(path.parent().expect("a document has a folder")).expect("mkdir");
    std::fs::write(&path, text).expect("write");
    let (folder, name) = rel.rsplit_once('/').expect("a folder");
    let store_dir = ws.join(crate::store::STORE_DIR);
    std::fs::create_dir_all(&store_dir).expect("store");
    record(&store_dir, &[(folder, &[name])]);
}

/// Start the store's catalog over, as a writer that finds a dead one's lock does.
pub fn start_over(store_dir: &Path) {
    crate::store::catalog::start_over(store_dir).expect("start the catalog over");
}
