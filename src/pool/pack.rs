//! Packs for the pool's objects (issue #17 point 6): gix writes objects loose, one file each;
//! after a year of a team that is millions of files. A sync's publish therefore writes its
//! objects as one pack itself (`git::GitRepo::hold_writes`, durable before the ref moves; then
//! [`after_own_pack`]), and any other publish packs the objects it created into one pack
//! ([`after_publish`]); the small packs roll up geometrically (as `git repack --geometric=2`),
//! and a consolidation folds everything (with any loose objects left by a lost race or a small
//! fetch) into one pack when loose objects pile up. Both run the `git` program through
//! [`transport::local_command`](crate::pool::transport) (isolated from the user's config), on
//! the repository the publish wrote: a local pool, or a network pool's mirror.
//!
//! Durable in this order, so a power cut never leaves an object only in a file that is gone:
//! `git pack-objects` writes and fsyncs the pack and its index (git's default `core.fsync`),
//! one `syncfs` makes their names durable, and only then are the loose copies
//! (`git prune-packed`) or the replaced packs removed. The ref moved before any of this
//! (`git::GitRepo::cas_ref` makes the objects durable first: the publish's own pack, or the
//! loose files), so packing is housekeeping: a packing failure leaves a correct repository
//! and is only reported.
//!
//! Clones: a pack that holds the whole pool — a consolidation, or a roll-up that would take
//! in every pack, done as a consolidation instead — is written with a reachability bitmap
//! (`--write-bitmap-index`, as `git repack -adb`), so a `git clone` of the pool counts its
//! objects from the bitmap and sends that pack's bytes as they are instead of walking every
//! tree and searching deltas again. Geometric roll-ups leave the largest pack alone, so the
//! bitmap stays with it until the next whole-pool pack (at each doubling of the pool); a
//! clone walks only the commits newer than the bitmap's.
//!
//! Roll-ups cost what they roll up, not the pool: the packs of whole publishes are packed by
//! a walk of their commits against the parents outside them (`--revs`, git's sparse walk of
//! the trees that changed), not by `--stdin-packs`, whose walk for names reads every tree of
//! every commit it packs — the whole pool's, ~100 ms at 100,000 chapters for a few hundred
//! objects. A local pool's mirror gets the pool's roll-up linked, as it gets each publish's.
//!
//! Concurrent machines on one local pool: packing only adds packs and removes copies that a pack
//! already holds; a consolidation keeps every loose object (reachable or not: a concurrent
//! publish's objects are loose and unreachable until its ref moves) and removes only the packs
//! it listed before it started, whose reachable objects it has just packed.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::git::ObjectId;
use crate::pool::transport::local_command;

/// Packs out of the geometric progression (each pack kept holds at least twice the objects
/// of the next smaller one, as `git repack --geometric=2`) from which a publish rolls the
/// small ones up: the packs stay logarithmic in the publishes plus fewer than this many, and
/// a roll-up rewrites the recent objects, not the pool. Counted out of the progression, not
/// in all: a big pool's progression alone holds ~log2 of its objects' packs (9 at 100,000
/// chapters), so a count of all packs rolled up on about every third publish there (each
/// roll-up ~+100 ms of CPU at 100,000, mostly fixed); this way one in about this many. One
/// pack per publish, so this is also "every N publishes" for the first roll-up (measured in
/// `benches/pool.rs`, see docs/benchmarks.md "A year's scale").
pub const ROLL_UP_AT_PACKS: usize = 8;

/// The factor between the object counts of consecutive packs after a roll-up.
const GEOMETRIC_FACTOR: u64 = 2;

/// Loose objects from which a publish consolidates (left by lost races, or exploded by a small
/// `git fetch` into a mirror). git's own `gc.auto` is 6,700.
pub const CONSOLIDATE_AT_LOOSE: usize = 2_000;

/// Everything packing can fail on; each message names the repository and the step.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error("cannot run `git {what}` in {repo}: {source}; is the git program installed?")]
    Spawn {
        repo: PathBuf,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("`git {what}` failed in {repo}: {stderr}")]
    Failed {
        repo: PathBuf,
        what: &'static str,
        stderr: String,
    },
    #[error("cannot flush {repo} after writing a pack: {source}; the loose objects are kept")]
    Durable {
        repo: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot list {dir}: {source}")]
    List {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot link {path} from the pool's pack: {source}")]
    Share {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot remove {path}, which the consolidated pack replaces: {source}")]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What [`after_publish`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Packed {
    /// Packs rolled up into one (0: none).
    pub rolled_up: usize,
    /// Whether everything was consolidated into one pack (too many loose objects).
    pub consolidated: bool,
    /// Whether the publish's pack was linked into the `share` repository.
    pub shared: bool,
}

/// After a publish moved the ref from `old` to `new` in the repository at `git_dir`: pack the
/// objects `new` brings that `old` did not have into one pack, remove their loose copies, and
/// consolidate when packs or loose objects pile up. `share`: another repository on the same
/// filesystem that holds `old` and everything it reaches (a local pool's packed mirror) gets
/// the publish's pack too, linked ([`share_pack`]) — so it holds `new` without a `git fetch`.
/// A pack that cannot be linked is only reported (`shared: false`): the mirror fetches it.
/// `objects`: what `new` brings, named by the caller (`GitRepo::objects_since`, a superset
/// of what `old` lacks): packed as listed, without git's walk of `new`'s trees against
/// `old`'s (~2 ms of a +10 at 100,000 chapters, whose trees of 2,000 sessions are parsed
/// twice); `None`: git walks.
pub fn after_publish(
    git_dir: &Path,
    new: ObjectId,
    old: Option<ObjectId>,
    objects: Option<&[ObjectId]>,
    share: Option<&Path>,
) -> Result<Packed, PackError> {
    let (revs, walk) = match objects {
        Some(ids) => (ids.iter().map(|id| format!("{id}\n")).collect(), false),
        None => {
            let mut revs = format!("{new}\n");
            if let Some(old) = old {
                revs.push_str(&format!("^{old}\n"));
            }
            (revs, true)
        }
    };
    // No delta search (`--window=0`): a publish's objects are new chapters and the trees,
    // pages and ledgers that changed, whose old versions (the good bases) are in other packs,
    // out of reach without a thin pack. Searching among its own cost ~20 ms of a +10 at
    // 100,000 chapters (the trees of 2,000 sessions, the month's page) for ~5 % of its pack,
    // and it hurt later: a roll-up keeps a stored delta as it is but searches whole objects,
    // so objects kept whole roll up against their versions of the other publishes (four
    // publishes of that pool: 234 KB rolled up, 403 KB from packs searched one by one).
    let options: &[&str] = if walk {
        &["--revs", "--window=0", "--delta-base-offset", "-q"]
    } else {
        &["--window=0", "--delta-base-offset", "-q"]
    };
    let name = pack_objects(git_dir, options, revs.as_bytes())?;
    flush(git_dir)?;
    prune_packed(git_dir)?;
    share_and_tidy(git_dir, &[format!("pack-{name}")], share)
}

/// After a publish that wrote its objects as its own packs `stems` (`git::GitRepo::hold_writes`,
/// durable before the ref moved; together they hold every object it wrote) into the repository
/// at `git_dir`: [`after_publish`] without `git pack-objects` and `git prune-packed` — the
/// packs linked into `share`, then the roll-up or consolidation when packs or loose objects
/// pile up.
pub fn after_own_pack(
    git_dir: &Path,
    stems: &[String],
    share: Option<&Path>,
) -> Result<Packed, PackError> {
    share_and_tidy(git_dir, stems, share)
}

/// The publish's packs `stems` linked into `share`, then [`tidy`] (with the roll-up linked
/// too).
fn share_and_tidy(
    git_dir: &Path,
    stems: &[String],
    share: Option<&Path>,
) -> Result<Packed, PackError> {
    // Linked before a roll-up below can replace the publish's packs; all or the mirror
    // fetches.
    let linked = |to: &Path| {
        stems
            .iter()
            .try_for_each(|stem| share_pack(git_dir, stem, to))
    };
    let shared = share.is_some_and(|to| match linked(to) {
        Ok(()) => true,
        Err(e) => {
            tracing::info!(error = %e, "the publish's pack was not linked into the mirror; the mirror fetches it");
            false
        }
    });
    let (packed, rolled) = tidy(git_dir)?;
    // The mirror holds the packs the pool just rolled up (each publish's linked in): it gets
    // the roll-up's pack linked too instead of searching the same deltas again.
    if let (Some(to), Some(rolled)) = (share.filter(|_| shared), rolled) {
        if let Err(e) = share_roll_up(git_dir, &rolled, to) {
            tracing::info!(error = %e, "the pool's roll-up was not linked into the mirror; the mirror rolls up its own");
        }
    }
    Ok(Packed { shared, ..packed })
}

/// Roll up or consolidate `git_dir`'s packs and loose objects when they pile up (the second
/// half of [`after_publish`]); with the roll-up it made, if any.
fn tidy(git_dir: &Path) -> Result<(Packed, Option<Rolled>), PackError> {
    if count_loose(git_dir)? >= CONSOLIDATE_AT_LOOSE {
        consolidate(git_dir)?;
        let packed = Packed {
            consolidated: true,
            ..Packed::default()
        };
        return Ok((packed, None));
    }
    let packs = pack_files(git_dir)?;
    if packs.len() < ROLL_UP_AT_PACKS {
        return Ok((Packed::default(), None));
    }
    match roll_up(git_dir, &packs)? {
        RollUp::Nothing => Ok((Packed::default(), None)),
        RollUp::Some(rolled) => {
            let packed = Packed {
                rolled_up: rolled.count,
                ..Packed::default()
            };
            Ok((packed, Some(rolled)))
        }
        RollUp::Everything => {
            consolidate(git_dir)?;
            let packed = Packed {
                rolled_up: packs.len(),
                consolidated: true,
                ..Packed::default()
            };
            Ok((packed, None))
        }
    }
}

/// Give the repository at `to` (a mirror the pool's packs are linked into) the roll-up the
/// repository at `from` just made: its pack is linked ([`share_pack`]) and `to`'s links of the
/// packs it replaced removed — when `to` then still holds every object those held (in the
/// roll-up's pack, or another pack of its own). Returns whether it was; else `to` is unchanged.
fn share_roll_up(from: &Path, rolled: &Rolled, to: &Path) -> Result<bool, PackError> {
    let dir = pack_dir(to);
    // Same name, same bytes: a pack's name is the hash of its content.
    let replaced: Vec<String> = rolled
        .removed
        .iter()
        .filter(|stem| dir.join(format!("{stem}.idx")).exists())
        .cloned()
        .collect();
    if replaced.is_empty() {
        return Ok(false);
    }
    let Some(new) = oids_in(&pack_dir(from).join(format!("{}.idx", rolled.into))) else {
        return Ok(false);
    };
    let others: Vec<String> = pack_files(to)?
        .into_iter()
        .filter(|stem| !replaced.contains(stem) && *stem != rolled.into)
        .collect();
    if !covered(&dir, &replaced, &new, &others) {
        return Ok(false);
    }
    share_pack(from, &rolled.into, to)?;
    remove_packs(&dir, &replaced)?;
    Ok(true)
}

/// Whether every object of the packs `replaced` (stems in `dir`) is in `new` (sorted ids) or
/// in one of the packs `others`: whether `replaced` may go once `new` is there. An index that
/// cannot be read holds nothing.
fn covered(dir: &Path, replaced: &[String], new: &[Oid], others: &[String]) -> bool {
    let mut missing: Vec<Oid> = Vec::new();
    for stem in replaced {
        let Some(oids) = oids_in(&dir.join(format!("{stem}.idx"))) else {
            return false;
        };
        missing.extend(
            oids.into_iter()
                .filter(|oid| new.binary_search(oid).is_err()),
        );
    }
    for stem in others {
        if missing.is_empty() {
            break;
        }
        if let Some(kept) = oids_in(&dir.join(format!("{stem}.idx"))) {
            missing.retain(|oid| kept.binary_search(oid).is_err());
        }
    }
    missing.is_empty()
}

/// Link the pack `stem` (`pack-<hash>`) of the repository at `from` into the repository at
/// `to` (hard links: no byte copied, no second flush of the data, which `from`'s pack already
/// made durable), index last so a reader that finds the index finds its pack; then one
/// `fsync` of `to`'s pack directory makes the names durable. Fails across filesystems (or
/// where hard links are refused), leaving `to` as it was.
pub fn share_pack(from: &Path, stem: &str, to: &Path) -> Result<(), PackError> {
    let (src, dst) = (pack_dir(from), pack_dir(to));
    std::fs::create_dir_all(&dst).map_err(|source| PackError::Share {
        path: dst.clone(),
        source,
    })?;
    let mut linked = Vec::new();
    // The index last, so git sees the pack only once its files are there; the bitmap of a
    // whole-pool pack too, so the new machine's `holds_all_of` reads it instead of every tree.
    for ext in ["pack", "rev", "bitmap", "idx"] {
        let (a, b) = (
            src.join(format!("{stem}.{ext}")),
            dst.join(format!("{stem}.{ext}")),
        );
        match std::fs::hard_link(&a, &b) {
            Ok(()) => linked.push(b),
            // The same pack already there (a repeated publish): the same bytes by name.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            // A git without reverse indexes writes none; most packs have no bitmap.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && ext != "pack" && ext != "idx" => {
            }
            Err(source) => {
                for path in linked.iter().rev() {
                    let _ = std::fs::remove_file(path);
                }
                return Err(PackError::Share { path: b, source });
            }
        }
    }
    std::fs::File::open(&dst)
        .and_then(|dir| dir.sync_all())
        .map_err(|source| PackError::Durable {
            repo: to.to_path_buf(),
            source,
        })
}

/// Link every pack of the repository at `from` into the repository at `to` ([`share_pack`]
/// each); returns how many.
pub fn share_packs(from: &Path, to: &Path) -> Result<usize, PackError> {
    let stems = pack_files(from)?;
    for stem in &stems {
        share_pack(from, stem, to)?;
    }
    Ok(stems.len())
}

/// Whether every object `tip` reaches is in the repository at `git_dir`: `git rev-list
/// --objects`, which looks each one up (a fetch's connectivity check, over the whole history)
/// — but for the commits a reachability bitmap covers: their objects are in its pack by the
/// bitmap's construction (at 100,000 chapters: 168 → 83 MiB and 0.55 → 0.27 s).
pub fn holds_all_of(git_dir: &Path, tip: ObjectId) -> Result<bool, PackError> {
    const WHAT: &str = "rev-list";
    let tip = tip.to_string();
    let mut cmd = local_command(
        git_dir,
        &[WHAT, "--objects", "--use-bitmap-index", "--quiet", &tip],
    );
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let status = cmd.status().map_err(|source| PackError::Spawn {
        repo: git_dir.to_path_buf(),
        what: WHAT,
        source,
    })?;
    Ok(status.success())
}

/// Keep the packs linked into a mirror by [`share_pack`] few: from [`ROLL_UP_AT_PACKS`] out
/// of the geometric progression on, the small ones roll up as a publish's do (a roll-up that
/// would take in every pack takes them all in, without a bitmap: nobody clones a mirror). Only what the
/// packs hold is rewritten, reachable or not, so the mirror's refs are not relied upon.
pub fn tidy_mirror(git_dir: &Path) -> Result<usize, PackError> {
    let packs = pack_files(git_dir)?;
    if packs.len() < ROLL_UP_AT_PACKS {
        return Ok(0);
    }
    match roll_up(git_dir, &packs)? {
        RollUp::Nothing => Ok(0),
        RollUp::Some(rolled) => Ok(rolled.count),
        RollUp::Everything => {
            let stdin: String = packs.iter().map(|stem| format!("{stem}.pack\n")).collect();
            let name = pack_objects(
                git_dir,
                &["--stdin-packs", "--delta-base-offset", "-q"],
                stdin.as_bytes(),
            )?;
            replace_packs(git_dir, &name, packs)
        }
    }
}

/// What a roll-up did, or that it would take in every pack (then a consolidation does it,
/// with a bitmap).
#[derive(Debug, PartialEq, Eq)]
enum RollUp {
    /// No pack rolled up.
    Nothing,
    Some(Rolled),
    Everything,
}

/// A roll-up made: packs replaced by one.
#[derive(Debug, PartialEq, Eq)]
struct Rolled {
    /// How many packs were rolled up.
    count: usize,
    /// The roll-up's pack (`pack-<hash>`).
    into: String,
    /// The packs it replaced and that were removed (`into` never among them).
    removed: Vec<String>,
}

/// Once [`ROLL_UP_AT_PACKS`] packs are out of the geometric progression, roll the smallest
/// packs up into one so that every pack left holds at least [`GEOMETRIC_FACTOR`] times the
/// objects of all smaller packs together (git's `repack --geometric` split, done by
/// [`pack_range`] or `git pack-objects --stdin-packs`); the rolled-up
/// packs are removed once the new one is durable. A roll-up that would take in every pack
/// is left to a consolidation ([`RollUp::Everything`]).
fn roll_up(git_dir: &Path, packs: &[String]) -> Result<RollUp, PackError> {
    let dir = pack_dir(git_dir);
    let mut sized: Vec<(u64, &String)> = Vec::new();
    for stem in packs {
        if dir.join(format!("{stem}.keep")).exists() {
            continue;
        }
        // An index that cannot be read is left to a consolidation.
        if let Some(n) = objects_in(&dir.join(format!("{stem}.idx"))) {
            sized.push((n, stem));
        }
    }
    sized.sort();
    let sizes: Vec<u64> = sized.iter().map(|(n, _)| *n).collect();
    let end = rolled_up_count(&sizes);
    if end < 2 {
        return Ok(RollUp::Nothing);
    }
    if end == packs.len() {
        return Ok(RollUp::Everything);
    }
    let included: Vec<&String> = sized[..end].iter().map(|(_, stem)| *stem).collect();
    let name = match pack_range(git_dir, &included, packs)? {
        Some(name) => name,
        None => {
            let mut stdin = String::new();
            for (i, (_, stem)) in sized.iter().enumerate() {
                let exclude = if i < end { "" } else { "^" };
                stdin.push_str(&format!("{exclude}{stem}.pack\n"));
            }
            pack_objects(
                git_dir,
                &["--stdin-packs", "--delta-base-offset", "-q"],
                stdin.as_bytes(),
            )?
        }
    };
    flush(git_dir)?;
    let into = format!("pack-{name}");
    let removed: Vec<String> = included
        .iter()
        .map(|stem| (*stem).clone())
        .filter(|stem| *stem != into)
        .collect();
    remove_packs(&dir, &removed)?;
    Ok(RollUp::Some(Rolled {
        count: end,
        into,
        removed,
    }))
}

/// How many of the packs of `sizes` (object counts, ascending) a roll-up takes in: none
/// until [`ROLL_UP_AT_PACKS`] of them are out of the geometric progression; then those, and
/// each next pack while it is not [`GEOMETRIC_FACTOR`] times the roll-up's size.
fn rolled_up_count(sizes: &[u64]) -> usize {
    // The largest packs that already progress geometrically stay.
    let mut split = sizes.len();
    while split > 1 && sizes[split - 2] * GEOMETRIC_FACTOR <= sizes[split - 1] {
        split -= 1;
    }
    // `split` is one past the pair that broke the progression (its larger pack rolls up too).
    if split < ROLL_UP_AT_PACKS {
        return 0;
    }
    let mut total: u64 = sizes[..split].iter().sum();
    let mut end = split;
    while end < sizes.len() && total * GEOMETRIC_FACTOR > sizes[end] {
        total += sizes[end];
        end += 1;
    }
    end
}

/// Roll the `included` packs up the cheap way: `git pack-objects --revs` of the commits they
/// hold, not what those commits' parents outside them reach — a walk of the trees that
/// changed (git's sparse walk). `--stdin-packs` walks every tree of every commit it packs
/// for names, the whole pool's (~100 ms at 100,000 chapters, for a few hundred objects); the
/// names here are the same, and so are the deltas. Returns the new pack's hash when it holds
/// every object of the included packs that no other pack of `packs` holds; else `None`
/// (objects no commit of theirs reaches — a consolidation's leftovers, another machine's
/// race — or a pack not made of whole publishes): then `--stdin-packs` does it.
fn pack_range(
    git_dir: &Path,
    included: &[&String],
    packs: &[String],
) -> Result<Option<String>, PackError> {
    let dir = pack_dir(git_dir);
    let mut objects: Vec<Oid> = Vec::new();
    for stem in included {
        match oids_in(&dir.join(format!("{stem}.idx"))) {
            Some(oids) => objects.extend(oids),
            None => return Ok(None),
        }
    }
    objects.sort_unstable();
    objects.dedup();
    let hex: String = objects
        .iter()
        .map(|oid| format!("{}\n", hex_of(oid)))
        .collect();
    // Each commit among them with its parents; trees and blobs are not revisions: skipped.
    let parents = match git_stdout(
        git_dir,
        "rev-list",
        &["--no-walk", "--parents", "--stdin"],
        hex.as_bytes(),
    ) {
        Ok(parents) => parents,
        Err(e) => {
            tracing::debug!(error = %e, "roll-up by --stdin-packs: the packs' commits were not listed");
            return Ok(None);
        }
    };
    let lines: Vec<Vec<&str>> = parents
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|l: &Vec<&str>| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return Ok(None);
    }
    let commits: std::collections::BTreeSet<&str> = lines.iter().map(|l| l[0]).collect();
    let mut revs = String::new();
    for commit in &commits {
        revs.push_str(&format!("{commit}\n"));
    }
    let boundary: std::collections::BTreeSet<&str> = lines
        .iter()
        .flat_map(|l| l[1..].iter().copied())
        .filter(|parent| !commits.contains(parent))
        .collect();
    for parent in boundary {
        revs.push_str(&format!("^{parent}\n"));
    }
    let name = match pack_objects(
        git_dir,
        &["--revs", "--delta-base-offset", "-q"],
        revs.as_bytes(),
    ) {
        Ok(name) => name,
        Err(e) => {
            tracing::debug!(error = %e, "roll-up by --stdin-packs: the walk of the packs' commits failed");
            return Ok(None);
        }
    };
    let Some(packed) = oids_in(&dir.join(format!("pack-{name}.idx"))) else {
        return Ok(None);
    };
    // What the walk left out must be in a pack that stays.
    let into = format!("pack-{name}");
    let replaced: Vec<String> = included.iter().map(|stem| (*stem).clone()).collect();
    let others: Vec<String> = packs
        .iter()
        .filter(|stem| !replaced.contains(stem) && **stem != into)
        .cloned()
        .collect();
    if covered(&dir, &replaced, &packed, &others) {
        return Ok(Some(name));
    }
    tracing::debug!("roll-up by --stdin-packs: the packs hold objects their commits do not bring");
    // A subset of the packs it would replace, which stay: removed (unless it is one of them).
    if !packs.contains(&format!("pack-{name}")) {
        remove_packs(&dir, &[format!("pack-{name}")])?;
    }
    Ok(None)
}

/// An object id as a pack index (version 2, SHA-1) stores it.
type Oid = [u8; 20];

fn hex_of(oid: &Oid) -> String {
    oid.iter().map(|b| format!("{b:02x}")).collect()
}

/// The object ids a pack index (version 2, SHA-1) names, sorted as the index stores them;
/// `None` if it cannot be read or is not of that shape.
fn oids_in(idx: &Path) -> Option<Vec<Oid>> {
    let bytes = std::fs::read(idx).ok()?;
    if bytes.get(..8)? != [0xff, b't', b'O', b'c', 0, 0, 0, 2] {
        return None;
    }
    let n = u32::from_be_bytes(bytes.get(8 + 255 * 4..8 + 256 * 4)?.try_into().ok()?) as usize;
    let table = bytes.get(8 + 256 * 4..8 + 256 * 4 + n * 20)?;
    // The rest: a CRC and an offset per object, two trailing hashes (SHA-1's, not SHA-256's).
    if bytes.len() < 8 + 256 * 4 + n * 28 + 40 {
        return None;
    }
    Some(
        table
            .chunks_exact(20)
            .map(|c| c.try_into().expect("chunks of 20 bytes"))
            .collect(),
    )
}

/// The number of objects a pack index (version 2) names: the last fan-out entry.
fn objects_in(idx: &Path) -> Option<u64> {
    use std::io::{Read as _, Seek as _};
    let mut file = std::fs::File::open(idx).ok()?;
    let mut head = [0u8; 8];
    file.read_exact(&mut head).ok()?;
    if head != [0xff, b't', b'O', b'c', 0, 0, 0, 2] {
        return None;
    }
    file.seek(std::io::SeekFrom::Start(8 + 255 * 4)).ok()?;
    let mut last = [0u8; 4];
    file.read_exact(&mut last).ok()?;
    Some(u64::from(u32::from_be_bytes(last)))
}

/// How old a git temp file in a pack directory must be before a sync removes it: a git still
/// writing one (another machine's push into a shared local pool that raced the publish
/// lock) touches it far more often than this.
pub const STALE_GIT_TEMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// Remove the temp files a killed git left in `git_dir`'s pack directory — `tmp_pack_*`,
/// `tmp_idx_*`, `tmp_rev_*`, … (`git pack-objects`, `index-pack`) and `.tmp-*` (`git repack`)
/// — last modified before `now - STALE_GIT_TEMP`; packs and their indexes are never touched.
/// Returns how many were removed. A pack directory that is not there holds none.
pub fn clear_stale_git_temp(git_dir: &Path, now: std::time::SystemTime) -> Result<u64, PackError> {
    let dir = pack_dir(git_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => return Err(PackError::List { dir, source }),
    };
    let Some(cutoff) = now.checked_sub(STALE_GIT_TEMP) else {
        return Ok(0);
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(|source| PackError::List {
            dir: dir.clone(),
            source,
        })?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("tmp_") || name.starts_with(".tmp-")) {
            continue;
        }
        // A file that vanished or cannot be read is no one's leftover to judge: left alone.
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() || meta.modified().map_or(true, |at| at > cutoff) {
            continue;
        }
        let path = entry.path();
        match std::fs::remove_file(&path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(PackError::Remove { path, source }),
        }
    }
    Ok(removed)
}

/// Remove packs (index first: a reader that still finds the index finds its pack).
fn remove_packs(dir: &Path, stems: &[String]) -> Result<(), PackError> {
    for stem in stems {
        for ext in ["idx", "pack", "rev", "bitmap", "mtimes", "promisor"] {
            let path = dir.join(format!("{stem}.{ext}"));
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(PackError::Remove { path, source }),
            }
        }
    }
    Ok(())
}

/// Fold every pack and loose object of the repository into one pack: everything reachable
/// from a ref or a reflog, plus every loose object and every object of the packs it replaces
/// (another machine's publish may be in flight: its pack is written before its ref moves),
/// with a reachability bitmap for clones. The packs listed before it started are
/// removed once the new one is durable; a pack with a `.keep` file is left alone.
pub fn consolidate(git_dir: &Path) -> Result<(), PackError> {
    let before = pack_files(git_dir)?;
    let name = pack_objects(
        git_dir,
        &[
            "--all",
            "--reflog",
            "--pack-loose-unreachable",
            "--keep-unreachable",
            "--delta-base-offset",
            "--write-bitmap-index",
            "-q",
        ],
        b"",
    )?;
    replace_packs(git_dir, &name, before)?;
    prune_packed(git_dir)
}

/// Once the new pack `name` is durable (one flush), remove the packs `before` it replaces —
/// but itself and any pack with a `.keep` file; returns how many went.
fn replace_packs(git_dir: &Path, name: &str, before: Vec<String>) -> Result<usize, PackError> {
    flush(git_dir)?;
    let dir = pack_dir(git_dir);
    let stems: Vec<String> = before
        .into_iter()
        .filter(|stem| {
            *stem != format!("pack-{name}") && !dir.join(format!("{stem}.keep")).exists()
        })
        .collect();
    remove_packs(&dir, &stems)?;
    Ok(stems.len())
}

/// The stems (`pack-<hash>`) of the repository's packs, sorted.
pub fn pack_files(git_dir: &Path) -> Result<Vec<String>, PackError> {
    let dir = pack_dir(git_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(PackError::List { dir, source }),
    };
    let mut stems = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| PackError::List {
            dir: dir.clone(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".pack") {
            if stem.starts_with("pack-") {
                stems.push(stem.to_owned());
            }
        }
    }
    stems.sort();
    Ok(stems)
}

/// The loose objects of the repository (one `readdir` per fan-out directory).
pub fn count_loose(git_dir: &Path) -> Result<usize, PackError> {
    let objects = git_dir.join("objects");
    let mut count = 0;
    for byte in 0..=255u8 {
        let dir = objects.join(format!("{byte:02x}"));
        match std::fs::read_dir(&dir) {
            Ok(entries) => count += entries.filter_map(Result::ok).count(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(PackError::List { dir, source }),
        }
    }
    Ok(count)
}

fn pack_dir(git_dir: &Path) -> PathBuf {
    git_dir.join("objects").join("pack")
}

/// `git pack-objects <options> <git_dir>/objects/pack/pack` fed `stdin`; returns the new
/// pack's hash (what git prints).
fn pack_objects(git_dir: &Path, options: &[&str], stdin: &[u8]) -> Result<String, PackError> {
    let base = pack_dir(git_dir).join("pack");
    let base = base.to_string_lossy();
    let mut args = options.to_vec();
    args.push(&base);
    Ok(git_stdout(git_dir, "pack-objects", &args, stdin)?
        .trim()
        .to_owned())
}

/// `git <what> <args>` in the repository, fed `stdin`; returns its output.
fn git_stdout(
    git_dir: &Path,
    what: &'static str,
    args: &[&str],
    stdin: &[u8],
) -> Result<String, PackError> {
    let mut all = vec![what];
    all.extend_from_slice(args);
    let mut cmd = local_command(git_dir, &all);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawn = |source| PackError::Spawn {
        repo: git_dir.to_path_buf(),
        what,
        source,
    };
    let mut child = cmd.spawn().map_err(spawn)?;
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin).map_err(spawn)?;
    }
    let out = child.wait_with_output().map_err(spawn)?;
    if !out.status.success() {
        return Err(PackError::Failed {
            repo: git_dir.to_path_buf(),
            what,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn prune_packed(git_dir: &Path) -> Result<(), PackError> {
    const WHAT: &str = "prune-packed";
    let mut cmd = local_command(git_dir, &[WHAT, "-q"]);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let out = cmd.output().map_err(|source| PackError::Spawn {
        repo: git_dir.to_path_buf(),
        what: WHAT,
        source,
    })?;
    if !out.status.success() {
        return Err(PackError::Failed {
            repo: git_dir.to_path_buf(),
            what: WHAT,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(())
}

/// One `syncfs` of the filesystem holding the repository: the new pack's name (git fsyncs its
/// bytes, not its directory) is durable before any loose copy or old pack goes.
fn flush(git_dir: &Path) -> Result<(), PackError> {
    let durable = |source| PackError::Durable {
        repo: git_dir.to_path_buf(),
        source,
    };
    let dir = std::fs::File::open(git_dir).map_err(durable)?;
    rustix::fs::syncfs(&dir).map_err(|e| durable(e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::GitRepo;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {:?}", out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn commit(repo: &GitRepo, n: usize, parent: Option<ObjectId>) -> ObjectId {
        let blob = repo
            .write_blob(format!("chapter {n}\n").as_bytes())
            .expect("blob");
        let base = parent.map(|p| repo.commit_tree(p).expect("tree"));
        let tree = repo
            .tree_with(base, &[(format!("chapters/{n:04}.md"), blob)])
            .expect("tree");
        repo.write_commit(
            tree,
            &parent.into_iter().collect::<Vec<_>>(),
            "dsh-chapters",
            "t@dsh-chapters.local",
            1_700_000_000 + n as i64,
            &crate::redact::echoed_text("publish"),
        )
        .expect("commit")
    }

    /// Packs settled by the roll-up rule: fewer than [`ROLL_UP_AT_PACKS`] out of the
    /// geometric progression, so at most that many more than log2 of the objects.
    fn assert_packs_few(git_dir: &Path, when: &str) {
        let dir = pack_dir(git_dir);
        let mut sizes: Vec<u64> = pack_files(git_dir)
            .expect("packs")
            .iter()
            .map(|s| objects_in(&dir.join(format!("{s}.idx"))).expect("idx"))
            .collect();
        sizes.sort();
        assert_eq!(rolled_up_count(&sizes), 0, "{when}: {sizes:?}");
        let total: u64 = sizes.iter().sum::<u64>().max(1);
        let bound = ROLL_UP_AT_PACKS + total.ilog2() as usize + 1;
        assert!(sizes.len() < bound, "{when}: {sizes:?}");
    }

    #[test]
    fn only_git_temp_files_older_than_the_bar_are_cleared_from_a_pack_directory() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("pool.git");
        let repo = GitRepo::init_bare(&path).expect("init");
        let head = commit(&repo, 0, None);
        repo.cas_ref("refs/heads/main", None, head, "publish")
            .expect("cas");
        after_publish(&path, head, None, None, None).expect("pack");
        let dir = pack_dir(&path);
        let now = std::time::SystemTime::now();
        let old = now - STALE_GIT_TEMP - std::time::Duration::from_secs(60);
        let touch = |name: &str, at: std::time::SystemTime| {
            let file = std::fs::File::create(dir.join(name)).expect("create");
            file.set_modified(at).expect("mtime");
        };
        for name in [
            "tmp_pack_Ab12Cd",
            "tmp_idx_Ab12Cd",
            "tmp_rev_Ab12Cd",
            ".tmp-4242-pack",
        ] {
            touch(name, old);
        }
        touch("tmp_pack_Fresh1", now);
        let packs = pack_files(&path).expect("packs");
        assert!(!packs.is_empty());
        // A pack as old as the leftovers is no temp file.
        for stem in &packs {
            std::fs::File::options()
                .write(true)
                .open(dir.join(format!("{stem}.pack")))
                .and_then(|f| f.set_modified(old))
                .expect("age the pack");
        }
        assert_eq!(clear_stale_git_temp(&path, now).expect("clear"), 4);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("tmp_") || n.starts_with(".tmp-"))
            .collect();
        left.sort();
        assert_eq!(left, ["tmp_pack_Fresh1"]);
        assert_eq!(pack_files(&path).expect("packs"), packs);
        git(&path, &["fsck", "--no-progress"]);
        assert_eq!(clear_stale_git_temp(&path, now).expect("again"), 0);
        assert_eq!(
            clear_stale_git_temp(&tmp.path().join("absent.git"), now).expect("absent"),
            0
        );
    }

    #[test]
    fn a_shared_publish_pack_completes_the_mirror_and_its_linked_packs_stay_few() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (path, mirror_path) = (tmp.path().join("pool.git"), tmp.path().join("mirror.git"));
        let repo = GitRepo::init_bare(&path).expect("init");
        let mirror = GitRepo::init_bare(&mirror_path).expect("init mirror");
        let mut head = None;
        let mut rolled = 0;
        for n in 0..40 {
            let new = commit(&repo, n, head);
            repo.cas_ref("refs/heads/main", head, new, "publish")
                .expect("cas");
            // Every other publish packs the objects it names (`objects_since`), the others
            // what git's walk finds: the mirror's check below holds for both.
            let objects = if n % 2 == 1 {
                let objects = repo.objects_since(head, new).expect("objects");
                assert!(objects.is_some(), "publish {n}: one commit on its parent");
                objects
            } else {
                None
            };
            let packed = after_publish(&path, new, head, objects.as_deref(), Some(&mirror_path))
                .expect("pack");
            assert!(packed.shared, "publish {n} linked into the mirror");
            mirror
                .set_ref("refs/remotes/pool/main", new, "publish")
                .expect("ref");
            // The pool's roll-ups are linked into the mirror: it rolls up on its own only
            // after a consolidation of the pool (not linked: it drops what no ref reaches).
            let mirror_rolled = tidy_mirror(&mirror_path).expect("tidy");
            rolled += packed.rolled_up;
            if !packed.consolidated {
                assert_eq!(mirror_rolled, 0, "after publish {n}");
            }
            head = Some(new);
            // Everything the pool's head reaches is in the mirror: git's own check says so.
            git(
                &mirror_path,
                &["fsck", "--connectivity-only", "--no-dangling"],
            );
            assert_packs_few(&mirror_path, &format!("the mirror after publish {n}"));
        }
        assert!(rolled > 0);
        let tip = head.expect("published");
        assert_eq!(
            git(&mirror_path, &["rev-parse", "refs/remotes/pool/main"]).trim(),
            tip.to_string()
        );
        assert_eq!(count_loose(&mirror_path).expect("loose"), 0);
        // A new mirror of the pool: its packs linked, it holds everything — unless a
        // publish left its objects loose in the pool (a failed packing): then it says no.
        let fresh = tmp.path().join("fresh.git");
        GitRepo::init_bare(&fresh).expect("init fresh");
        assert!(!holds_all_of(&fresh, head.expect("published")).expect("rev-list"));
        assert!(share_packs(&path, &fresh).expect("share") > 0);
        // The whole-pool pack's bitmap comes along: the check reads it, not every tree.
        let bitmaps = |git_dir: &Path| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(pack_dir(git_dir))
                .expect("pack dir")
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".bitmap"))
                .collect();
            names.sort();
            names
        };
        assert!(!bitmaps(&path).is_empty(), "the pool has a whole-pool pack");
        assert_eq!(bitmaps(&fresh), bitmaps(&path));
        assert!(holds_all_of(&fresh, head.expect("published")).expect("rev-list"));
        let loose = commit(&repo, 40, head);
        repo.cas_ref("refs/heads/main", head, loose, "publish")
            .expect("cas");
        let holey = commit(&repo, 41, Some(loose));
        repo.cas_ref("refs/heads/main", Some(loose), holey, "publish")
            .expect("cas");
        after_publish(&path, holey, Some(loose), None, None).expect("pack");
        let refreshed = tmp.path().join("refreshed.git");
        GitRepo::init_bare(&refreshed).expect("init refreshed");
        share_packs(&path, &refreshed).expect("share");
        assert!(!holds_all_of(&refreshed, holey).expect("rev-list"));
        // A pack that is not there (another filesystem refuses the link alike) leaves the
        // mirror as it was, and says so.
        let before = pack_files(&mirror_path).expect("packs");
        let err = share_pack(
            &path,
            "pack-0000000000000000000000000000000000000000",
            &mirror_path,
        )
        .expect_err("no such pack");
        assert!(matches!(err, PackError::Share { .. }), "{err}");
        assert_eq!(pack_files(&mirror_path).expect("packs"), before);
    }

    /// Delta entries of a pack (`git verify-pack -v`: an object line naming its depth and
    /// base has seven fields or more).
    fn deltas_in(git_dir: &Path, stem: &str) -> usize {
        let idx = pack_dir(git_dir).join(format!("{stem}.idx"));
        git(git_dir, &["verify-pack", "-v", idx.to_str().expect("utf8")])
            .lines()
            .filter(|l| l.split_whitespace().count() >= 7)
            .count()
    }

    /// A publish's own pack is written without delta search (its objects' old versions are
    /// in other packs, out of reach), so a roll-up deltifies them across publishes — the
    /// versions of a page kept whole in each publish's pack become deltas once rolled up.
    #[test]
    fn a_publish_packs_without_deltas_and_a_roll_up_deltifies_across_publishes() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("pool.git");
        let repo = GitRepo::init_bare(&path).expect("init");
        let page = |n: usize| -> String {
            (0..400)
                .map(|l| {
                    format!("- [chapter {l:04}](../chapters/{l:04}.md) of the refresh topic\n")
                })
                .chain(std::iter::once(format!("- publish {n}\n")))
                .collect()
        };
        let mut head = None;
        let mut rolled = false;
        for n in 0..ROLL_UP_AT_PACKS * 3 {
            // Two near-identical pages in one publish: deltas of each other for git's window.
            let (a, b) = (page(n), page(n + 1000));
            let a = repo.write_blob(a.as_bytes()).expect("blob");
            let b = repo.write_blob(b.as_bytes()).expect("blob");
            let base = head.map(|p| repo.commit_tree(p).expect("tree"));
            let tree = repo
                .tree_with(
                    base,
                    &[("index/refresh.md".into(), a), ("index/copy.md".into(), b)],
                )
                .expect("tree");
            let new = repo
                .write_commit(
                    tree,
                    &head.into_iter().collect::<Vec<_>>(),
                    "dsh-chapters",
                    "t@dsh-chapters.local",
                    1_700_000_000 + n as i64,
                    &crate::redact::echoed_text("publish"),
                )
                .expect("commit");
            repo.cas_ref("refs/heads/main", head, new, "publish")
                .expect("cas");
            let before: std::collections::BTreeSet<String> =
                pack_files(&path).expect("packs").into_iter().collect();
            let packed = after_publish(&path, new, head, None, None).expect("pack");
            head = Some(new);
            if packed.rolled_up == 0 && !packed.consolidated {
                let own: Vec<String> = pack_files(&path)
                    .expect("packs")
                    .into_iter()
                    .filter(|s| !before.contains(s))
                    .collect();
                assert_eq!(own.len(), 1, "publish {n}");
                assert_eq!(deltas_in(&path, &own[0]), 0, "publish {n}'s pack");
            } else {
                rolled = true;
                let deltas: usize = pack_files(&path)
                    .expect("packs")
                    .iter()
                    .map(|s| deltas_in(&path, s))
                    .sum();
                assert!(deltas > 0, "rolled up after publish {n}, yet no delta");
            }
        }
        assert!(rolled);
    }

    #[test]
    fn every_publish_leaves_no_loose_object_and_packs_roll_up_geometrically() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("pool.git");
        let repo = GitRepo::init_bare(&path).expect("init");
        let mut head = None;
        let mut roll_ups = 0;
        let mut whole = 0;
        const PUBLISHES: usize = 200;
        for n in 0..PUBLISHES {
            let new = commit(&repo, n, head);
            repo.cas_ref("refs/heads/main", head, new, "publish")
                .expect("cas");
            let packed = after_publish(&path, new, head, None, None).expect("pack");
            roll_ups += usize::from(packed.rolled_up > 0);
            whole += usize::from(packed.consolidated);
            head = Some(new);
            // A whole-pool pack carries a bitmap; no other pack does.
            let bitmaps = pack_files(&path)
                .expect("packs")
                .iter()
                .filter(|s| pack_dir(&path).join(format!("{s}.bitmap")).exists())
                .count();
            assert_eq!(bitmaps, usize::from(whole > 0), "after publish {n}");
            assert_eq!(count_loose(&path).expect("loose"), 0, "after publish {n}");
            assert_packs_few(&path, &format!("after publish {n}"));
        }
        assert!(roll_ups > 0 && roll_ups < PUBLISHES / 2, "{roll_ups}");
        // The first roll-up (8 packs alike) and each doubling take in every pack.
        assert!(whole >= 3 && whole < roll_ups, "{whole} of {roll_ups}");
        // Objects counted through the bitmap (and the walk from the newer commits) are those
        // a full walk counts.
        assert_eq!(
            git(
                &path,
                &[
                    "rev-list",
                    "--objects",
                    "--use-bitmap-index",
                    "--count",
                    "main"
                ]
            ),
            git(&path, &["rev-list", "--objects", "--count", "main"])
        );
        // Geometric: each pack at least twice all smaller ones together, but the newest.
        let dir = pack_dir(&path);
        let mut sizes: Vec<u64> = pack_files(&path)
            .expect("packs")
            .iter()
            .map(|s| objects_in(&dir.join(format!("{s}.idx"))).expect("idx"))
            .collect();
        sizes.sort();
        assert_eq!(sizes.iter().sum::<u64>(), 4 * PUBLISHES as u64, "{sizes:?}");
        git(&path, &["fsck", "--strict", "--no-dangling"]);
        let files = git(&path, &["ls-tree", "-r", "--name-only", "main"]);
        assert_eq!(files.lines().count(), PUBLISHES);
        // A loose object nothing names yet (a concurrent publish in flight) survives a
        // consolidation, packed.
        let stray = repo.write_blob(b"in flight\n").expect("blob");
        consolidate(&path).expect("consolidate");
        assert_eq!(pack_files(&path).expect("packs").len(), 1);
        assert_eq!(count_loose(&path).expect("loose"), 0);
        assert_eq!(
            git(&path, &["cat-file", "-t", &stray.to_string()]).trim(),
            "blob"
        );
        git(&path, &["fsck", "--strict"]);
        let bitmaps: Vec<String> = pack_files(&path)
            .expect("packs")
            .into_iter()
            .filter(|s| pack_dir(&path).join(format!("{s}.bitmap")).exists())
            .collect();
        assert_eq!(bitmaps.len(), 1);
        // Objects counted through the bitmap (and the walk from the newer commits) are those
        // a full walk counts.
        assert_eq!(
            git(
                &path,
                &[
                    "rev-list",
                    "--objects",
                    "--use-bitmap-index",
                    "--count",
                    "main"
                ]
            ),
            git(&path, &["rev-list", "--objects", "--count", "main"])
        );
        // A clone through pack negotiation (as over a network) gets the whole history.
        let clone = tmp.path().join("clone.git");
        let out = std::process::Command::new("git")
            .args(["clone", "-q", "--bare", "--no-local"])
            .arg(&path)
            .arg(&clone)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("clone");
        assert!(out.status.success(), "{out:?}");
        git(&clone, &["fsck", "--strict"]);
        let files = git(&clone, &["ls-tree", "-r", "--name-only", "main"]);
        assert_eq!(files.lines().count(), PUBLISHES);
    }

    /// A roll-up packs its publishes by a walk of their commits, but a pack it takes in may
    /// hold an object none of them reaches (a consolidation's leftover, another machine's
    /// race): it is kept, and the roll-up holds what `--stdin-packs` would.
    #[test]
    fn a_roll_up_keeps_every_object_of_its_packs_even_one_no_commit_reaches() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("pool.git");
        let repo = GitRepo::init_bare(&path).expect("init");
        // A first publish large enough to stay out of the roll-ups (no consolidation).
        let files: Vec<(String, ObjectId)> = (0..200)
            .map(|n| {
                let blob = repo.write_blob(format!("old {n}\n").as_bytes());
                (format!("old/{n:04}.md"), blob.expect("blob"))
            })
            .collect();
        let tree = repo.tree_with(None, &files).expect("tree");
        let first = repo
            .write_commit(
                tree,
                &[],
                "dsh-chapters",
                "t@dsh-chapters.local",
                1_700_000_000,
                &crate::redact::echoed_text("publish"),
            )
            .expect("commit");
        repo.cas_ref("refs/heads/main", None, first, "publish")
            .expect("cas");
        after_publish(&path, first, None, None, None).expect("pack");
        let mut head = Some(first);
        // A pack of one object nothing reaches: the smallest, so rolled up first.
        let stray = repo.write_blob(b"in flight\n").expect("blob");
        pack_objects(&path, &["-q"], format!("{stray}\n").as_bytes()).expect("stray pack");
        prune_packed(&path).expect("prune");
        let mut rolled = 0;
        for n in 0..ROLL_UP_AT_PACKS {
            let new = commit(&repo, n, head);
            repo.cas_ref("refs/heads/main", head, new, "publish")
                .expect("cas");
            let packed = after_publish(&path, new, head, None, None).expect("pack");
            assert!(!packed.consolidated);
            rolled += packed.rolled_up;
            head = Some(new);
        }
        assert!(rolled > 0, "no roll-up");
        assert_eq!(count_loose(&path).expect("loose"), 0);
        assert_eq!(
            git(&path, &["cat-file", "-t", &stray.to_string()]).trim(),
            "blob"
        );
        git(&path, &["fsck", "--strict"]);
    }

    /// A big pool's packs progress geometrically over ~log2 of its objects (9 packs at
    /// 100,000 chapters): a publish's small pack beside them is not a reason to roll up — only
    /// [`ROLL_UP_AT_PACKS`] packs out of the progression are, then taken in with what they
    /// outgrow. (Counting all packs rolled up on most publishes of such a pool.)
    #[test]
    fn packs_roll_up_only_once_enough_of_them_leave_the_geometric_progression() {
        // A pool of 100,000 chapters in objects, its packs progressing geometrically, and
        // publishes of +10 chapters (57 objects each, as the kept +10 machine's).
        let progression = [114, 230, 470, 1_000, 2_300, 5_000, 14_799, 108_874];
        let with = |publishes: usize| {
            let mut sizes = progression.to_vec();
            sizes.extend(std::iter::repeat_n(57, publishes));
            sizes.sort();
            rolled_up_count(&sizes)
        };
        assert_eq!(with(0), 0);
        assert_eq!(with(1), 0, "one publish fits the progression");
        // Counting all packs, two publishes beside the progression (10 packs) rolled up.
        assert_eq!(with(2), 0, "two publishes out of the progression");
        assert_eq!(with(ROLL_UP_AT_PACKS - 1), 0);
        // Eight out of it roll up, with the packs they outgrow; the largest pack stays.
        let n = with(ROLL_UP_AT_PACKS);
        assert!(
            n > ROLL_UP_AT_PACKS && n < progression.len() + ROLL_UP_AT_PACKS,
            "{n}"
        );
        // A small pool of equal publishes rolls up (everything) at 8 packs, as before.
        assert_eq!(rolled_up_count(&[4; ROLL_UP_AT_PACKS - 1]), 0);
        assert_eq!(rolled_up_count(&[4; ROLL_UP_AT_PACKS]), ROLL_UP_AT_PACKS);
    }

    /// Packs of whole publishes roll up by the walk of their commits (not `--stdin-packs`),
    /// into a pack of exactly their objects.
    #[test]
    fn a_roll_up_of_publishes_packs_exactly_their_objects() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("pool.git");
        let repo = GitRepo::init_bare(&path).expect("init");
        let mut head = None;
        let mut stems = Vec::new();
        for n in 0..4 {
            let new = commit(&repo, n, head);
            repo.cas_ref("refs/heads/main", head, new, "publish")
                .expect("cas");
            let before = pack_files(&path).expect("packs");
            after_publish(&path, new, head, None, None).expect("pack");
            let after = pack_files(&path).expect("packs");
            stems.extend(after.into_iter().filter(|s| !before.contains(s)));
            head = Some(new);
        }
        let dir = pack_dir(&path);
        let mut objects: Vec<Oid> = stems[1..]
            .iter()
            .flat_map(|s| oids_in(&dir.join(format!("{s}.idx"))).expect("idx"))
            .collect();
        objects.sort_unstable();
        objects.dedup();
        let included: Vec<&String> = stems[1..].iter().collect();
        let name = pack_range(&path, &included, &stems)
            .expect("range")
            .expect("whole publishes");
        let packed = oids_in(&dir.join(format!("pack-{name}.idx"))).expect("idx");
        assert_eq!(packed, objects);
    }
}
