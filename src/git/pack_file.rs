//! One pack (version 2) and its index (version 2) written straight from objects held in
//! memory (issue #17 point 6): a publish's objects are deflated once, here, instead of being
//! written loose by gix, then inflated and deflated again by `git pack-objects`. No deltas:
//! a publish's objects are new chapters and the trees, pages and ledgers that changed, whose
//! old versions are in other packs (out of reach without a thin pack); roll-ups deltify
//! across publishes. The formats are git's `Documentation/gitformat-pack.txt`.
//!
//! Durable in this order: pack and index written to `tmp_pack_*` / `tmp_idx_*` (the names
//! `pool::pack::clear_stale_git_temp` clears after a kill), each fsynced, renamed pack first
//! and index last (git reads a pack only through its index), then the pack directory fsynced —
//! all before the caller moves a ref to the objects.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use gix::objs::Kind;
use gix::zlib::stream::deflate::{Compress, FlushCompress};
use gix::zlib::{Compression, Status};
use gix::ObjectId;

/// Blobs (chapters, pages, ledgers) and commits are deflated at git's default pack level:
/// roll-ups keep an object's deflated bytes as they are, for good, and level 1 made a +10's
/// blobs 9 % larger. Trees are lists of 20-byte hashes that hardly deflate: level 1 costs 45
/// bytes of a +10's 141 KB of trees at 100,000 chapters (351 KB inflated, the folders of
/// 2,000 sessions) and saves over a third of their deflate time.
const LEVEL: Compression = Compression::DEFAULT;
const TREE_LEVEL: Compression = Compression::BEST_SPEED;

/// Why a pack could not be written; the caller wraps it with the repository's name.
#[derive(Debug, thiserror::Error)]
pub enum PackFileError {
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot deflate a {kind} of {len} bytes: {reason}")]
    Deflate {
        kind: Kind,
        len: usize,
        reason: String,
    },
    #[error("cannot hash the pack: {source}")]
    Hash {
        #[source]
        source: gix::Error,
    },
}

/// Write `objects` (id, kind, bytes; ids distinct, SHA-1) as one pack with its index into
/// `pack_dir`, durably (module doc); returns the pack's stem, `pack-<hash>` (the hash of the
/// pack's content, as git names packs). Nothing is written for no objects.
pub fn write(
    pack_dir: &Path,
    objects: &mut [(ObjectId, Kind, Vec<u8>)],
) -> Result<Option<String>, PackFileError> {
    if objects.is_empty() {
        return Ok(None);
    }
    // Sorted by id: the index's order, and the same pack for the same objects.
    objects.sort_unstable_by_key(|o| o.0);
    let Packed {
        bytes: pack,
        entries,
        checksum,
    } = pack_bytes(objects)?;
    let idx = index_bytes(&entries, &checksum)?;
    let stem = format!("pack-{}", crate::names::hex(&checksum));
    let tag = format!("{}_{}", std::process::id(), &stem[5..17]);
    let tmp_pack = pack_dir.join(format!("tmp_pack_{tag}"));
    let tmp_idx = pack_dir.join(format!("tmp_idx_{tag}"));
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PackFileError::Io { path, source }
    };
    std::fs::create_dir_all(pack_dir).map_err(io(pack_dir))?;
    let written = (|| {
        write_synced(&tmp_pack, &pack)?;
        write_synced(&tmp_idx, &idx)?;
        let final_pack = pack_dir.join(format!("{stem}.pack"));
        std::fs::rename(&tmp_pack, &final_pack).map_err(io(&final_pack))?;
        let final_idx = pack_dir.join(format!("{stem}.idx"));
        std::fs::rename(&tmp_idx, &final_idx).map_err(io(&final_idx))?;
        std::fs::File::open(pack_dir)
            .and_then(|dir| dir.sync_all())
            .map_err(io(pack_dir))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp_pack);
        let _ = std::fs::remove_file(&tmp_idx);
    }
    written.map(|()| Some(stem))
}

/// `bytes` into a new file at `path` (owner read-only, as git's packs), fsynced.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), PackFileError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let io = |source| PackFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(path)
        .map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)
}

/// One object's place in the pack: id, offset, CRC-32 of its packed bytes.
struct Entry {
    id: ObjectId,
    offset: u64,
    crc: u32,
}

/// A pack's bytes, its entries (in the objects' order) and its trailing checksum.
struct Packed {
    bytes: Vec<u8>,
    entries: Vec<Entry>,
    checksum: [u8; 20],
}

/// The pack of `objects`.
fn pack_bytes(objects: &[(ObjectId, Kind, Vec<u8>)]) -> Result<Packed, PackFileError> {
    let mut pack = Vec::with_capacity(objects.iter().map(|o| o.2.len() / 2 + 32).sum());
    pack.extend_from_slice(b"PACK");
    pack.extend_from_slice(&2u32.to_be_bytes());
    let count = u32::try_from(objects.len()).expect("a publish writes fewer than 2^32 objects");
    pack.extend_from_slice(&count.to_be_bytes());
    let (mut compress, mut compress_tree) = (Compress::new(LEVEL), Compress::new(TREE_LEVEL));
    let mut entries = Vec::with_capacity(objects.len());
    for (id, kind, data) in objects {
        let offset = pack.len();
        push_header(&mut pack, type_code(*kind), data.len() as u64);
        let compress = match kind {
            Kind::Tree => &mut compress_tree,
            _ => &mut compress,
        };
        deflate(compress, data, &mut pack).map_err(|reason| PackFileError::Deflate {
            kind: *kind,
            len: data.len(),
            reason,
        })?;
        entries.push(Entry {
            id: *id,
            offset: offset as u64,
            crc: crc32fast::hash(&pack[offset..]),
        });
    }
    let checksum = sha1(&pack)?;
    pack.extend_from_slice(&checksum);
    Ok(Packed {
        bytes: pack,
        entries,
        checksum,
    })
}

/// The index (version 2) of `entries`, sorted by id.
fn index_bytes(entries: &[Entry], pack_checksum: &[u8; 20]) -> Result<Vec<u8>, PackFileError> {
    let mut idx = Vec::with_capacity(8 + 256 * 4 + entries.len() * 28 + 40);
    idx.extend_from_slice(&[0xff, b't', b'O', b'c', 0, 0, 0, 2]);
    let mut fanout = [0u32; 256];
    for e in entries {
        fanout[usize::from(e.id.as_bytes()[0])] += 1;
    }
    let mut total = 0u32;
    for n in fanout {
        total += n;
        idx.extend_from_slice(&total.to_be_bytes());
    }
    for e in entries {
        idx.extend_from_slice(e.id.as_bytes());
    }
    for e in entries {
        idx.extend_from_slice(&e.crc.to_be_bytes());
    }
    // Offsets past 2^31 go to the table of 8-byte offsets, named by index with the MSB set.
    let mut large = Vec::new();
    for e in entries {
        let small = match u32::try_from(e.offset) {
            Ok(o) if o < 0x8000_0000 => o,
            _ => {
                let at = u32::try_from(large.len() / 8).expect("fewer than 2^31 large offsets");
                large.extend_from_slice(&e.offset.to_be_bytes());
                0x8000_0000 | at
            }
        };
        idx.extend_from_slice(&small.to_be_bytes());
    }
    idx.extend_from_slice(&large);
    idx.extend_from_slice(pack_checksum);
    let own = sha1(&idx)?;
    idx.extend_from_slice(&own);
    Ok(idx)
}

fn type_code(kind: Kind) -> u8 {
    match kind {
        Kind::Commit => 1,
        Kind::Tree => 2,
        Kind::Blob => 3,
        Kind::Tag => 4,
    }
}

/// An entry's header: the type in bits 4–6 of the first byte and the inflated size, 4 bits
/// then 7 a byte, each byte's MSB saying another follows.
fn push_header(out: &mut Vec<u8>, code: u8, size: u64) {
    let mut byte = (code << 4) | (size & 0x0f) as u8;
    let mut rest = size >> 4;
    while rest != 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
}

/// `data` as one zlib stream appended to `out`, with `compress` reset first.
fn deflate(compress: &mut Compress, data: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    compress.reset();
    let start_in = compress.total_in();
    loop {
        let len = out.len();
        out.resize(len + data.len() / 2 + 64, 0);
        let consumed = (compress.total_in() - start_in) as usize;
        let before = compress.total_out();
        let status = compress
            .compress(&data[consumed..], &mut out[len..], FlushCompress::Finish)
            .map_err(|e| e.to_string());
        let written = (compress.total_out() - before) as usize;
        out.truncate(len + written);
        match status? {
            Status::StreamEnd => return Ok(()),
            Status::Ok | Status::BufError => {}
        }
    }
}

fn sha1(bytes: &[u8]) -> Result<[u8; 20], PackFileError> {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(bytes);
    let id = hasher
        .try_finalize()
        .map_err(|source| PackFileError::Hash { source })?;
    let mut out = [0u8; 20];
    out.copy_from_slice(id.as_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> std::process::Output {
        crate::git::tests::git_output(dir, args, None)
    }

    fn object(kind: Kind, data: &[u8]) -> (ObjectId, Kind, Vec<u8>) {
        let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, kind, data).expect("hash");
        (id, kind, data.to_vec())
    }

    #[test]
    fn headers_follow_git_s_variable_length_sizes() {
        let mut out = Vec::new();
        push_header(&mut out, 3, 0);
        assert_eq!(out, [0x30]);
        out.clear();
        push_header(&mut out, 3, 15);
        assert_eq!(out, [0x3f]);
        out.clear();
        // 16 = 0b1_0000: low nibble 0, then 1.
        push_header(&mut out, 2, 16);
        assert_eq!(out, [0xa0, 0x01]);
        out.clear();
        // 100,000 = 0x186a0: nibble 0, then 0x186a0 >> 4 = 0x186a in 7-bit groups.
        push_header(&mut out, 1, 100_000);
        assert_eq!(out, [0x90, 0xea, 0x30]);
    }

    #[test]
    fn a_written_pack_is_read_by_git_object_for_object() {
        let tmp = tempfile::tempdir().expect("tmp");
        let repo = tmp.path().join("repo.git");
        assert!(std::process::Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(&repo)
            .status()
            .expect("git init")
            .success());
        let big: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let blob = object(Kind::Blob, b"a chapter\n");
        let empty = object(Kind::Blob, b"");
        let large = object(Kind::Blob, &big);
        let mut tree_bytes = Vec::new();
        for (name, id) in [("a.md", blob.0), ("b.bin", large.0), ("c", empty.0)] {
            tree_bytes.extend_from_slice(format!("100644 {name}\0").as_bytes());
            tree_bytes.extend_from_slice(id.as_bytes());
        }
        let tree = object(Kind::Tree, &tree_bytes);
        let commit = object(
            Kind::Commit,
            format!(
                "tree {}\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n\nm\n",
                tree.0
            )
            .as_bytes(),
        );
        let mut objects = vec![
            commit.clone(),
            tree.clone(),
            blob.clone(),
            empty,
            large.clone(),
        ];
        let dir = repo.join("objects").join("pack");
        let stem = write(&dir, &mut objects).expect("write").expect("a pack");
        let verify = git(
            &repo,
            &[
                "verify-pack",
                "-v",
                &format!("{}", dir.join(format!("{stem}.idx")).display()),
            ],
        );
        assert!(
            verify.status.success(),
            "{}",
            String::from_utf8_lossy(&verify.stderr)
        );
        for (id, _, data) in [&blob, &large, &tree, &commit] {
            let out = git(&repo, &["cat-file", "-p", &id.to_string()]);
            assert!(out.status.success(), "{id}");
            if *id != tree.0 {
                assert_eq!(&out.stdout, data);
            }
        }
        assert!(git(
            &repo,
            &["update-ref", "refs/heads/main", &commit.0.to_string()]
        )
        .status
        .success());
        let fsck = git(&repo, &["fsck", "--strict", "--no-dangling"]);
        assert!(
            fsck.status.success(),
            "{}",
            String::from_utf8_lossy(&fsck.stderr)
        );
        // Nothing left under a temp name; the same objects make the same pack.
        let names: Vec<String> = std::fs::read_dir(&dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with("tmp_")), "{names:?}");
        let mut again = objects.clone();
        again.reverse();
        let other = tempfile::tempdir().expect("tmp");
        let same = write(other.path(), &mut again)
            .expect("write")
            .expect("a pack");
        assert_eq!(same, stem);
        assert_eq!(
            std::fs::read(other.path().join(format!("{same}.pack"))).expect("pack"),
            std::fs::read(dir.join(format!("{stem}.pack"))).expect("pack")
        );
        // Written again where it is (a retried publish): the same files, no error.
        assert_eq!(write(&dir, &mut again).expect("again"), Some(stem));
        assert!(write(&dir, &mut Vec::new()).expect("nothing").is_none());
    }
}
