//! Configuration layers: defaults (embedded `config/defaults.yml`) < `$DSH_HOME/dsh-chapters/config.yml`
//! < `<workspace>/.dsh-chapters/config.yml` < env `CHAPTERS_<KEY>` < flags. Unknown keys and bad
//! values are refused by name with file and line. OWNER: store helper.
//!
//! [`Config::from_layers`] is pure: texts, env and flags in, a validated `Config` out. Each
//! layer overrides only the keys it sets, and every key is checked the moment a layer sets
//! it, so an error names the layer (file and line, env variable, or flag) that is wrong.
//! [`load`] is the thin reader around it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::redact::{ExtraPattern, Redactor};

/// The documented defaults, embedded so the binary needs no file beside it.
pub const DEFAULTS_YML: &str = include_str!("../config/defaults.yml");

/// `CHAPTERS_*` variables the program reads that are not config keys (allowed through).
/// `CHAPTERS_LOG` is the log filter; `CHAPTERS_CRASH_AT` is the tests' crash injection
/// (`pool::sync`: the process kills itself with SIGKILL at the named point);
/// `CHAPTERS_SYNC_RETRY=immediate|backoff` are the pool benchmark's baselines (`pool::sync`:
/// no publish queue; a lost race retried 4 times back to back, or with backoff);
/// `CHAPTERS_PUBLISH_LOCK_WAIT_MS` is the tests' bound on waiting for a local pool's publish
/// turn (`pool::publish_lock`).
pub const NON_CONFIG_ENV: &[&str] = &[
    "CHAPTERS_LOG",
    "CHAPTERS_CRASH_AT",
    "CHAPTERS_SYNC_RETRY",
    "CHAPTERS_PUBLISH_LOCK_WAIT_MS",
];

const ENV_PREFIX: &str = "CHAPTERS_";
/// The origin [`Config::origin_of`] gives a key no file, variable or flag set.
pub const DEFAULTS_ORIGIN: &str = "defaults";

/// When enrichment runs (record §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnrichmentTrigger {
    /// After an archive or sync pass.
    Push,
    /// After `enrichmentIdleMs` of quiet.
    Idle,
    Both,
    /// Only when asked.
    Manual,
}

/// Transport policy (record Amendment 2026-09-21). Only git is built here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KnowledgeProvider {
    Auto,
    Git,
}

/// How the daemon learns that a session log grew.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DaemonWatch {
    /// Kernel notifications (inotify), polling only when they cannot be had.
    Auto,
    /// Always poll every `daemonPollMs`.
    Poll,
}

/// Every tunable; `config/defaults.yml` documents each key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    pub harness_id: Option<String>,
    pub project_key_override: Option<String>,
    pub knowledge_remote: Option<String>,
    pub knowledge_provider: KnowledgeProvider,
    pub sync_debounce_ms: u64,
    pub merge_threshold: f64,
    pub chapter_limit: u64,
    pub tool_result_artifact_tokens: u64,
    pub tool_result_defer_floor_tokens: u64,
    pub render_reasoning: bool,
    pub max_event_bytes: u64,
    pub writer_lock_timeout_ms: u64,
    pub sync_timeout_ms: u64,
    /// Days of the pool's chapters written out as plain files in the mirror at each sync
    /// (the packed mirror reads the rest from its git objects; 0: none).
    pub mirror_recent_days: u64,
    pub idle_archive_ms: u64,
    pub daemon_watch: DaemonWatch,
    pub daemon_poll_ms: u64,
    pub daemon_rescan_ms: u64,
    pub search_default_max_tokens: u64,
    pub enrichment_endpoint: Option<String>,
    pub enrichment_model: Option<String>,
    pub enrichment_enabled: bool,
    pub enrichment_max_tokens: u64,
    pub enrichment_trigger: EnrichmentTrigger,
    pub enrichment_idle_ms: u64,
    pub enrichment_batch_cap: u64,
    pub enrichment_timeout_ms: u64,
    pub enrichment_rewrite_spacing_ms: u64,
    pub vocab_apply: bool,
    pub vocab_co_min: u64,
    pub vocab_overlap_min: f64,
    pub core_rules_budget_tokens: u64,
    pub session_rules_enabled: bool,
    pub rules_marker_prefix: String,
    pub rules_enrichment: bool,
    pub rules_auto_activate: bool,
    pub rules_model: String,
    pub rules_mined_per_chapter: u64,
    pub project_rules_display_cap: u64,
    pub session_rules_display_cap: u64,
    pub rules_relevance: bool,
    pub rules_core_bonus: f64,
    pub redaction_patterns: Vec<ExtraPattern>,
    /// One machine's absolute directory → the same directory on another machine
    /// (`C:\Users\ana\src` → `/home/ana/src`), read both ways.
    pub path_map: BTreeMap<String, String>,
    /// Where each key's value came from (`defaults`, `<file>:<line>`, `env X`, `flag k`).
    #[serde(skip)]
    origins: BTreeMap<String, String>,
    /// Each harness's on/off switch (`claudeCodeSessions`, `codexSessions`: a key of
    /// `config/defaults.yml` ending in [`SWITCH_SUFFIX`]), asked by the harness seam
    /// (`source::discovery`) through [`Config::harness_on`] so that a new harness adds a
    /// line to the defaults, not a field here.
    #[serde(skip)]
    harness_switches: BTreeMap<String, bool>,
}

/// The suffix of a harness's on/off switch key.
pub const SWITCH_SUFFIX: &str = "Sessions";

/// `values` as a `Config`: the harness switches taken out first (each must be `true` or
/// `false`), the rest deserialized.
fn config_of(values: &Map<String, Value>) -> Result<Config, String> {
    let mut rest = values.clone();
    let mut switches = BTreeMap::new();
    for key in values.keys().filter(|k| k.ends_with(SWITCH_SUFFIX)) {
        match rest.remove(key) {
            Some(Value::Bool(on)) => {
                switches.insert(key.clone(), on);
            }
            Some(other) => return Err(format!("`{key}` must be true or false, not {other}")),
            None => {}
        }
    }
    let mut config: Config =
        serde_json::from_value(Value::Object(rest)).map_err(|e| e.to_string())?;
    config.harness_switches = switches;
    Ok(config)
}

/// One config file's text and where it came from (its path, for messages).
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    pub origin: String,
    pub text: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{at}: not valid YAML: {detail}")]
    Syntax { at: String, detail: String },
    #[error("{at}: a config file must be a mapping of `key: value` lines")]
    NotAMapping { at: String },
    #[error("{at}: unknown config key `{key}`; every key is documented in config/defaults.yml — fix or remove it")]
    UnknownKey { key: String, at: String },
    #[error("unknown environment variable {var}: it names no config key (CHAPTERS_<KEY>, KEY in SCREAMING_SNAKE_CASE, e.g. CHAPTERS_MERGE_THRESHOLD); fix its name or unset it")]
    UnknownEnv { var: String },
    #[error("{at}: bad value for `{key}`: {detail}")]
    BadValue {
        key: String,
        at: String,
        detail: String,
    },
    #[error("cannot read {path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `mergeThreshold` → `CHAPTERS_MERGE_THRESHOLD`.
pub fn env_name(key: &str) -> String {
    let mut out = String::from(ENV_PREFIX);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// The 1-based line where a top-level `key:` is written in `text`, if it can be found.
fn key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            [key.to_string(), format!("\"{key}\""), format!("'{key}'")]
                .iter()
                .any(|k| {
                    line.strip_prefix(k.as_str())
                        .is_some_and(|rest| rest.trim_start().starts_with(':'))
                })
        })
        .map(|i| i + 1)
}

fn file_at(origin: &str, text: &str, key: &str) -> String {
    match key_line(text, key) {
        Some(line) => format!("{origin}:{line}"),
        None => origin.to_string(),
    }
}

/// Parse one YAML layer into its top-level keys.
fn parse_layer(origin: &str, text: &str) -> Result<Map<String, Value>, ConfigError> {
    // An empty or comment-only file sets nothing.
    if text
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Ok(Map::new());
    }
    let value: Value = serde_saphyr::from_str(text).map_err(|e| ConfigError::Syntax {
        at: match e.location() {
            Some(loc) => format!("{origin}:{}", loc.line()),
            None => origin.to_string(),
        },
        detail: e
            .without_snippet()
            .render_with_formatter(&serde_saphyr::UserMessageFormatter),
    })?;
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        _ => Err(ConfigError::NotAMapping {
            at: origin.to_string(),
        }),
    }
}

/// A value from the environment or a flag: a YAML scalar (`0.5`, `true`, `null`) or a flow
/// sequence; anything else (`ADD RULE:` parses as a mapping) is the literal text.
fn parse_scalar(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::String(raw.to_string());
    }
    match serde_saphyr::from_str::<Value>(raw) {
        Ok(
            v @ (Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Array(_)),
        ) => v,
        _ => Value::String(raw.to_string()),
    }
}

/// Range and shape rules that types alone do not express; `Err` says what is wrong.
fn check_key(config: &Config, key: &str) -> Result<(), String> {
    let positive = |v: u64| {
        if v > 0 {
            Ok(())
        } else {
            Err("must be greater than 0".to_string())
        }
    };
    let unit = |v: f64| {
        if (0.0..=1.0).contains(&v) {
            Ok(())
        } else {
            Err(format!("{v} is outside 0..=1"))
        }
    };
    let non_empty = |v: &Option<String>| match v {
        Some(s) if s.trim().is_empty() => {
            Err("must not be empty (use null to leave it unset)".to_string())
        }
        _ => Ok(()),
    };
    match key {
        "harnessId" => match &config.harness_id {
            Some(id) if !crate::identity::is_valid_harness_id(id) => Err(format!(
                "{id:?} is not a safe name: use letters, digits, `.`, `_` and `-`, not starting with `.` or `-`"
            )),
            _ => Ok(()),
        },
        "projectKeyOverride" => match &config.project_key_override {
            Some(k) if !crate::store::is_safe_component(k) => {
                Err(format!("{k:?} cannot name a directory in the pool (no `/`, `\\`, `..`, leading `.`)"))
            }
            _ => Ok(()),
        },
        "knowledgeRemote" => non_empty(&config.knowledge_remote),
        "enrichmentModel" => non_empty(&config.enrichment_model),
        "enrichmentEndpoint" => match &config.enrichment_endpoint {
            Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                Err(format!("{url:?} is not an http:// or https:// base URL"))
            }
            _ => Ok(()),
        },
        "mergeThreshold" => unit(config.merge_threshold),
        "vocabOverlapMin" => unit(config.vocab_overlap_min),
        "rulesCoreBonus" if !(config.rules_core_bonus.is_finite() && config.rules_core_bonus >= 0.0) => {
            Err("must be a number of at least 0".into())
        }
        "chapterLimit" => positive(config.chapter_limit),
        "toolResultArtifactTokens" => positive(config.tool_result_artifact_tokens),
        "toolResultDeferFloorTokens" => positive(config.tool_result_defer_floor_tokens),
        "maxEventBytes" => positive(config.max_event_bytes),
        "syncTimeoutMs" => positive(config.sync_timeout_ms),
        "idleArchiveMs" => positive(config.idle_archive_ms),
        "daemonPollMs" => positive(config.daemon_poll_ms),
        "daemonRescanMs" => positive(config.daemon_rescan_ms),
        "searchDefaultMaxTokens" => positive(config.search_default_max_tokens),
        "enrichmentMaxTokens" => positive(config.enrichment_max_tokens),
        "enrichmentBatchCap" => positive(config.enrichment_batch_cap),
        "enrichmentTimeoutMs" => positive(config.enrichment_timeout_ms),
        "vocabCoMin" => positive(config.vocab_co_min),
        "coreRulesBudgetTokens" => positive(config.core_rules_budget_tokens),
        "rulesMarkerPrefix" if config.rules_marker_prefix.trim().is_empty() => Err("must not be empty".into()),
        "pathMap" => {
            for (from, to) in &config.path_map {
                for side in [from, to] {
                    if crate::session::cwdkey::normalize_abs(side).is_none() {
                        return Err(format!(
                            "{side:?} is not an absolute path (`/home/ana/src`, `C:\\Users\\ana\\src` or `\\\\server\\share`)"
                        ));
                    }
                }
                if crate::session::cwdkey::normalize_abs(from) == crate::session::cwdkey::normalize_abs(to) {
                    return Err(format!("{from:?} is mapped to itself"));
                }
            }
            Ok(())
        }
        "redactionPatterns" => {
            if let Some(p) = config.redaction_patterns.iter().find(|p| p.name.trim().is_empty()) {
                return Err(format!("the pattern with regex {:?} has no name", p.regex));
            }
            Redactor::check_extra(&config.redaction_patterns).map_err(|e| e.to_string())
        }
        _ => Ok(()),
    }
}

/// `redactionPatterns` items may hold only `name`, `keywords` and `regex`: a misspelt field
/// would otherwise be dropped silently and the pattern would not do what was meant.
fn check_raw(key: &str, value: &Value) -> Result<(), String> {
    if key != "redactionPatterns" {
        return Ok(());
    }
    for item in value.as_array().into_iter().flatten() {
        if let Some(field) = item.as_object().and_then(|o| {
            o.keys()
                .find(|k| !["name", "keywords", "regex"].contains(&k.as_str()))
        }) {
            return Err(format!(
                "unknown field `{field}` in a pattern (the fields are name, keywords, regex)"
            ));
        }
    }
    Ok(())
}

/// Builds a `Config` one key at a time, keeping the last valid state.
struct Merger {
    values: Map<String, Value>,
    config: Config,
}

impl Merger {
    fn new() -> Result<Merger, ConfigError> {
        let values = parse_layer(DEFAULTS_ORIGIN, DEFAULTS_YML)?;
        let mut config = config_of(&values).map_err(|detail| ConfigError::BadValue {
            key: "(defaults)".into(),
            at: DEFAULTS_ORIGIN.into(),
            detail,
        })?;
        for key in values.keys() {
            check_key(&config, key).map_err(|detail| ConfigError::BadValue {
                key: key.clone(),
                at: file_at(DEFAULTS_ORIGIN, DEFAULTS_YML, key),
                detail,
            })?;
            config.origins.insert(key.clone(), DEFAULTS_ORIGIN.into());
        }
        Ok(Merger { values, config })
    }

    fn is_key(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// Try `key = value`; on success it becomes part of the merged config.
    fn try_set(&mut self, key: &str, value: Value, at: &str) -> Result<(), String> {
        check_raw(key, &value)?;
        let mut candidate = self.values.clone();
        candidate.insert(key.to_string(), value.clone());
        let mut config = config_of(&candidate)?;
        check_key(&config, key)?;
        config.origins = std::mem::take(&mut self.config.origins);
        config.origins.insert(key.to_string(), at.to_string());
        self.values.insert(key.to_string(), value);
        self.config = config;
        Ok(())
    }
}

impl Config {
    /// Whether the harness switch `key` (`claudeCodeSessions`, …) is on; a switch the
    /// defaults do not know is off.
    pub fn harness_on(&self, key: &str) -> bool {
        self.harness_switches.get(key).copied().unwrap_or(false)
    }

    /// The estimated-token size from which a tool result becomes an artifact:
    /// `toolResultArtifactTokens`, never below `toolResultDeferFloorTokens` (a result under the
    /// floor always stays inline, whatever the threshold is set to).
    pub fn artifact_threshold_tokens(&self) -> u64 {
        self.tool_result_artifact_tokens
            .max(self.tool_result_defer_floor_tokens)
    }

    /// Merge `layers` (files, lowest first) over the defaults, then `env` (only `CHAPTERS_*`
    /// entries are looked at), then `flags` (camelCase key → raw value).
    pub fn from_layers(
        layers: &[Layer],
        env: &BTreeMap<String, String>,
        flags: &BTreeMap<String, String>,
    ) -> Result<Config, ConfigError> {
        let mut merger = Merger::new()?;
        for layer in layers {
            let mut entries: Vec<(String, Value)> = parse_layer(&layer.origin, &layer.text)?
                .into_iter()
                .collect();
            // Report the first problem in reading order.
            entries.sort_by_key(|(k, _)| key_line(&layer.text, k).unwrap_or(usize::MAX));
            for (key, value) in entries {
                let at = file_at(&layer.origin, &layer.text, &key);
                if !merger.is_key(&key) {
                    return Err(ConfigError::UnknownKey { key, at });
                }
                merger
                    .try_set(&key, value, &at)
                    .map_err(|detail| ConfigError::BadValue { key, at, detail })?;
            }
        }

        let env_keys: BTreeMap<String, String> = merger
            .values
            .keys()
            .map(|k| (env_name(k), k.clone()))
            .collect();
        for (var, raw) in env.iter().filter(|(var, _)| var.starts_with(ENV_PREFIX)) {
            if NON_CONFIG_ENV.contains(&var.as_str()) {
                continue;
            }
            let Some(key) = env_keys.get(var) else {
                return Err(ConfigError::UnknownEnv { var: var.clone() });
            };
            set_raw(&mut merger, key, raw, &format!("env {var}"))?;
        }

        for (key, raw) in flags {
            let at = format!("flag {key}");
            if !merger.is_key(key) {
                return Err(ConfigError::UnknownKey {
                    key: key.clone(),
                    at,
                });
            }
            set_raw(&mut merger, key, raw, &at)?;
        }
        Ok(merger.config)
    }

    /// The defaults alone.
    pub fn defaults() -> Config {
        Config::from_layers(&[], &BTreeMap::new(), &BTreeMap::new())
            .expect("the embedded defaults are valid (tested)")
    }

    /// Where `key`'s value came from: `defaults`, `<file>:<line>`, `env CHAPTERS_…` or `flag <key>`.
    pub fn origin_of(&self, key: &str) -> Option<&str> {
        self.origins.get(key).map(String::as_str)
    }
}

/// Set a key from a raw env/flag string: as a YAML scalar first, and when that does not fit
/// the key, as the literal text (so `CHAPTERS_HARNESS_ID=42` is the name "42").
fn set_raw(merger: &mut Merger, key: &str, raw: &str, at: &str) -> Result<(), ConfigError> {
    let parsed = parse_scalar(raw);
    let literal = Value::String(raw.to_string());
    let result = match merger.try_set(key, parsed.clone(), at) {
        // Report why the parsed value failed: that is the reading the user most likely meant.
        Err(detail) if parsed != literal => merger.try_set(key, literal, at).map_err(|_| detail),
        other => other,
    };
    result.map_err(|detail| ConfigError::BadValue {
        key: key.to_string(),
        at: at.to_string(),
        detail,
    })
}

/// The home config file: `$DSH_HOME/dsh-chapters/config.yml`.
pub fn home_config_path(dsh_home: &Path) -> std::path::PathBuf {
    dsh_home.join("dsh-chapters").join("config.yml")
}

/// `text` (a config file) with a top-level `key` set to the string `value`, or `None` when
/// the file already sets `key`: a value a person wrote is never replaced. Pure.
pub fn with_key_added(
    origin: &str,
    text: &str,
    key: &str,
    value: &str,
    why: &str,
) -> Result<Option<String>, ConfigError> {
    if parse_layer(origin, text)?.contains_key(key) {
        return Ok(None);
    }
    let mut out = text.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    // A JSON string is a YAML double-quoted scalar: `42` stays the name "42".
    let quoted = serde_json::to_string(value).expect("a string always serializes");
    out.push_str(&format!("# {why}\n{key}: {quoted}\n"));
    Ok(Some(out))
}

/// Set `key` in the home config unless the file already sets it; `Ok(true)` when written.
/// Written whole (temp file, fsync, rename, directory fsync), owner-only like everything
/// under `$DSH_HOME/dsh-chapters/`.
pub fn persist_home_key(
    dsh_home: &Path,
    key: &str,
    value: &str,
    why: &str,
) -> Result<bool, ConfigError> {
    use std::io::Write as _;
    let path = home_config_path(dsh_home);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(ConfigError::Io { path, source }),
    };
    let Some(new_text) = with_key_added(&path.display().to_string(), &text, key, value, why)?
    else {
        return Ok(false);
    };
    let write_err = |source| ConfigError::Write {
        path: path.clone(),
        source,
    };
    // Owner-only whatever the umask, like everything in the home (`home`).
    let dir = crate::home::ensure(dsh_home).map_err(write_err)?;
    let dir = dir.as_path();
    // tempfile creates the file 0600 in the same directory, so the rename is atomic.
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(write_err)?;
    tmp.write_all(new_text.as_bytes()).map_err(write_err)?;
    tmp.as_file().sync_all().map_err(write_err)?;
    tmp.persist(&path).map_err(|e| write_err(e.error))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(write_err)?;
    Ok(true)
}

/// Read the config files (absent ones are fine) and merge them with `env` and `flags`.
pub fn load(
    dsh_home: &Path,
    workspace: &Path,
    env: &BTreeMap<String, String>,
    flags: &BTreeMap<String, String>,
) -> Result<Config, ConfigError> {
    let mut layers = Vec::new();
    for path in [
        home_config_path(dsh_home),
        workspace.join(crate::store::STORE_DIR).join("config.yml"),
    ] {
        match std::fs::read_to_string(&path) {
            Ok(text) => layers.push(Layer {
                origin: path.display().to_string(),
                text,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(ConfigError::Io { path, source }),
        }
    }
    Config::from_layers(&layers, env, flags)
}

/// The home config file alone merged with `env`: what a command that serves every
/// workspace (the daemon's `install`) reads.
pub fn load_home(dsh_home: &Path, env: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
    let path = home_config_path(dsh_home);
    let layers = match std::fs::read_to_string(&path) {
        Ok(text) => vec![Layer {
            origin: path.display().to_string(),
            text,
        }],
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(source) => return Err(ConfigError::Io { path, source }),
    };
    Config::from_layers(&layers, env, &BTreeMap::new())
}

/// The process's `CHAPTERS_*` environment, for [`load`]. A variable that is not valid
/// UTF-8 is kept with its text lossily decoded, so it is still refused or applied by name.
pub fn chapters_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .filter(|(k, _)| k.starts_with(ENV_PREFIX))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(origin: &str, text: &str) -> Layer {
        Layer {
            origin: origin.into(),
            text: text.into(),
        }
    }

    fn none() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_tool_result_under_the_defer_floor_is_never_an_artifact() {
        let threshold = |yaml: &str| {
            Config::from_layers(&[layer("config.yml", yaml)], &none(), &none())
                .expect("valid config")
                .artifact_threshold_tokens()
        };
        assert_eq!(Config::defaults().artifact_threshold_tokens(), 8000);
        assert_eq!(threshold("toolResultArtifactTokens: 50\n"), 200);
        assert_eq!(
            threshold("toolResultArtifactTokens: 50\ntoolResultDeferFloorTokens: 20\n"),
            50
        );
        assert_eq!(threshold("toolResultArtifactTokens: 300\n"), 300);
    }

    #[test]
    fn defaults_yml_parses_into_exactly_the_defaults() {
        let expected = Config {
            harness_id: None,
            project_key_override: None,
            knowledge_remote: None,
            knowledge_provider: KnowledgeProvider::Auto,
            sync_debounce_ms: 30000,
            merge_threshold: 0.25,
            chapter_limit: 8000,
            tool_result_artifact_tokens: 8000,
            tool_result_defer_floor_tokens: 200,
            render_reasoning: false,
            max_event_bytes: 33_554_432,
            writer_lock_timeout_ms: 10000,
            sync_timeout_ms: 60000,
            mirror_recent_days: 30,
            idle_archive_ms: 600_000,
            daemon_watch: DaemonWatch::Auto,
            daemon_poll_ms: 1000,
            daemon_rescan_ms: 60000,
            search_default_max_tokens: 400,
            enrichment_endpoint: None,
            enrichment_model: None,
            enrichment_enabled: true,
            enrichment_max_tokens: 4000,
            enrichment_trigger: EnrichmentTrigger::Both,
            enrichment_idle_ms: 60000,
            enrichment_batch_cap: 5,
            enrichment_timeout_ms: 60000,
            enrichment_rewrite_spacing_ms: 500,
            vocab_apply: false,
            vocab_co_min: 3,
            vocab_overlap_min: 0.5,
            core_rules_budget_tokens: 1200,
            session_rules_enabled: true,
            rules_marker_prefix: "ADD RULE:".into(),
            rules_enrichment: true,
            rules_auto_activate: true,
            rules_model: String::new(),
            rules_mined_per_chapter: 3,
            project_rules_display_cap: 12,
            session_rules_display_cap: 12,
            rules_relevance: true,
            rules_core_bonus: 0.15,
            redaction_patterns: vec![],
            path_map: BTreeMap::new(),
            origins: BTreeMap::new(),
            harness_switches: [("claudeCodeSessions", true), ("codexSessions", true)]
                .map(|(k, v)| (k.to_owned(), v))
                .into(),
        };
        let mut defaults = Config::defaults();
        assert_eq!(defaults.origin_of("mergeThreshold"), Some("defaults"));
        defaults.origins.clear();
        assert_eq!(defaults, expected);
    }

    #[test]
    fn every_key_is_in_defaults_yml_with_a_comment_above() {
        let defaults = Config::defaults();
        let serialized = serde_json::to_value(&defaults).unwrap();
        let mut keys: Vec<&String> = serialized.as_object().unwrap().keys().collect();
        keys.extend(defaults.harness_switches.keys());
        assert_eq!(keys.len(), 46);
        assert!(defaults.harness_on("claudeCodeSessions") && defaults.harness_on("codexSessions"));
        assert!(
            !defaults.harness_on("unknownSessions"),
            "a switch the defaults lack is off"
        );
        let lines: Vec<&str> = DEFAULTS_YML.lines().collect();
        for key in keys {
            let line = key_line(DEFAULTS_YML, key)
                .unwrap_or_else(|| panic!("{key} missing from defaults.yml"));
            assert!(
                lines[line - 2].starts_with('#'),
                "{key}: no comment line above it"
            );
        }
    }

    #[test]
    fn a_harness_switch_turns_off_and_refuses_what_is_not_true_or_false() {
        let off = layer("/w/.dsh-chapters/config.yml", "codexSessions: false\n");
        let c = Config::from_layers(&[off], &none(), &none()).unwrap();
        assert!(!c.harness_on("codexSessions") && c.harness_on("claudeCodeSessions"));
        assert_eq!(
            c.origin_of("codexSessions"),
            Some("/w/.dsh-chapters/config.yml:1")
        );
        let bad = layer("/w/.dsh-chapters/config.yml", "codexSessions: 3\n");
        let err = Config::from_layers(&[bad], &none(), &none())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("codexSessions") && err.contains("true or false"),
            "{err}"
        );
    }

    #[test]
    fn layers_override_key_by_key_and_record_origins() {
        let home = layer(
            "/home/u/.dsh/dsh-chapters/config.yml",
            "mergeThreshold: 0.5\nchapterLimit: 9000\n",
        );
        let ws = layer(
            "/w/.dsh-chapters/config.yml",
            "# workspace\nchapterLimit: 7000\nharnessId: box-a\n",
        );
        let c = Config::from_layers(&[home, ws], &none(), &none()).unwrap();
        assert_eq!(c.merge_threshold, 0.5);
        assert_eq!(c.chapter_limit, 7000);
        assert_eq!(c.harness_id.as_deref(), Some("box-a"));
        assert_eq!(
            c.sync_debounce_ms, 30000,
            "untouched keys keep their defaults"
        );
        assert_eq!(
            c.origin_of("mergeThreshold"),
            Some("/home/u/.dsh/dsh-chapters/config.yml:1")
        );
        assert_eq!(
            c.origin_of("chapterLimit"),
            Some("/w/.dsh-chapters/config.yml:2")
        );
        assert_eq!(c.origin_of("syncDebounceMs"), Some("defaults"));
        assert_eq!(c.origin_of("nope"), None);
    }

    #[test]
    fn env_overrides_files_and_flags_override_env() {
        let file = layer("f.yml", "mergeThreshold: 0.5\nchapterLimit: 9000\n");
        let env = map(&[
            ("CHAPTERS_MERGE_THRESHOLD", "0.7"),
            ("CHAPTERS_HARNESS_ID", "42"),
            ("CHAPTERS_RULES_MARKER_PREFIX", "RULE:"),
            ("CHAPTERS_VOCAB_APPLY", "true"),
            ("CHAPTERS_LOG", "debug"),
            ("PATH", "/bin"),
        ]);
        let flags = map(&[("chapterLimit", "100"), ("enrichmentModel", "qwen")]);
        let c = Config::from_layers(&[file], &env, &flags).unwrap();
        assert_eq!(c.merge_threshold, 0.7);
        assert_eq!(
            c.harness_id.as_deref(),
            Some("42"),
            "a number where a name is wanted is the literal text"
        );
        assert_eq!(c.rules_marker_prefix, "RULE:");
        assert!(c.vocab_apply);
        assert_eq!(c.chapter_limit, 100);
        assert_eq!(c.enrichment_model.as_deref(), Some("qwen"));
        assert_eq!(
            c.origin_of("mergeThreshold"),
            Some("env CHAPTERS_MERGE_THRESHOLD")
        );
        assert_eq!(c.origin_of("chapterLimit"), Some("flag chapterLimit"));

        let c =
            Config::from_layers(&[], &map(&[("CHAPTERS_HARNESS_ID", "null")]), &none()).unwrap();
        assert_eq!(c.harness_id, None);
        let c = Config::from_layers(&[], &map(&[("CHAPTERS_RULES_MODEL", "")]), &none()).unwrap();
        assert_eq!(c.rules_model, "");
    }

    #[test]
    fn unknown_key_is_refused_with_file_and_line() {
        let err = Config::from_layers(
            &[layer(
                "/w/c.yml",
                "chapterLimit: 10\n\nmergeTreshold: 0.4\n",
            )],
            &none(),
            &none(),
        )
        .unwrap_err();
        assert!(
            matches!(&err, ConfigError::UnknownKey { key, at } if key == "mergeTreshold" && at == "/w/c.yml:3"),
            "{err}"
        );
        assert!(err.to_string().contains("/w/c.yml:3"), "{err}");
        // Keys the original had but this program does not use are refused too.
        assert!(
            Config::from_layers(&[layer("c.yml", "elicitedPlot: true\n")], &none(), &none())
                .is_err()
        );
        let err = Config::from_layers(&[], &none(), &map(&[("bogus", "1")])).unwrap_err();
        assert!(
            matches!(&err, ConfigError::UnknownKey { at, .. } if at == "flag bogus"),
            "{err}"
        );
    }

    #[test]
    fn a_redaction_pattern_matching_empty_or_everything_is_refused_by_name() {
        for (regex, name) in [("'.*'", "catch-all"), ("'(?s).+'", "everything")] {
            let text = format!("redactionPatterns:\n  - name: {name}\n    regex: {regex}\n");
            match Config::from_layers(&[layer("/c.yml", &text)], &none(), &none()) {
                Err(ConfigError::BadValue { key, detail, .. }) => {
                    assert_eq!(key, "redactionPatterns");
                    assert!(detail.contains(&format!("{name:?}")), "{detail}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn bad_values_are_refused_by_key_and_line() {
        for (text, key, line) in [
            ("mergeThreshold: 1.5\n", "mergeThreshold", 1),
            ("chapterLimit: 0\n", "chapterLimit", 1),
            ("# c\nchapterLimit: -3\n", "chapterLimit", 2),
            ("chapterLimit: lots\n", "chapterLimit", 1),
            ("enrichmentEnabled: maybe\n", "enrichmentEnabled", 1),
            ("rulesMarkerPrefix: \"  \"\n", "rulesMarkerPrefix", 1),
            ("harnessId: ../x\n", "harnessId", 1),
            ("harnessId: 42\n", "harnessId", 1),
            ("projectKeyOverride: a/b\n", "projectKeyOverride", 1),
            ("enrichmentTrigger: sometimes\n", "enrichmentTrigger", 1),
            ("knowledgeProvider: treedx\n", "knowledgeProvider", 1),
            ("enrichmentEndpoint: ftp://x\n", "enrichmentEndpoint", 1),
            ("vocabOverlapMin: -0.1\n", "vocabOverlapMin", 1),
            (
                "redactionPatterns:\n  - name: x\n    regex: '('\n",
                "redactionPatterns",
                1,
            ),
            (
                "redactionPatterns:\n  - name: x\n    regexp: 'a'\n",
                "redactionPatterns",
                1,
            ),
            (
                "redactionPatterns:\n  - name: ''\n    regex: 'a'\n",
                "redactionPatterns",
                1,
            ),
            ("redactionPatterns: yes\n", "redactionPatterns", 1),
        ] {
            match Config::from_layers(&[layer("/c.yml", text)], &none(), &none()) {
                Err(ConfigError::BadValue { key: k, at, .. }) => {
                    assert_eq!(
                        (k.as_str(), at.as_str()),
                        (key, format!("/c.yml:{line}").as_str()),
                        "{text}"
                    )
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        let ok = Config::from_layers(
            &[layer("c.yml", "redactionPatterns:\n  - name: mine\n    keywords: [myt_]\n    regex: 'myt_[a-z]{4}'\n")],
            &none(),
            &none(),
        )
        .unwrap();
        assert_eq!(ok.redaction_patterns.len(), 1);
    }

    #[test]
    fn env_errors_name_the_variable() {
        let err = Config::from_layers(&[], &map(&[("CHAPTERS_MERGE_THRESHOLD", "2")]), &none())
            .unwrap_err();
        assert!(
            matches!(&err, ConfigError::BadValue { at, .. } if at == "env CHAPTERS_MERGE_THRESHOLD"),
            "{err}"
        );
        assert!(err.to_string().contains("outside"), "{err}");
        let err = Config::from_layers(&[], &map(&[("CHAPTERS_MERGE_TRESHOLD", "0.2")]), &none())
            .unwrap_err();
        assert!(
            matches!(&err, ConfigError::UnknownEnv { var } if var == "CHAPTERS_MERGE_TRESHOLD"),
            "{err}"
        );
        let err =
            Config::from_layers(&[], &map(&[("CHAPTERS_HARNESS_ID", "")]), &none()).unwrap_err();
        assert!(
            matches!(&err, ConfigError::BadValue { key, .. } if key == "harnessId"),
            "{err}"
        );
    }

    #[test]
    fn malformed_files() {
        let err = Config::from_layers(
            &[layer("/c.yml", "chapterLimit: 1\nfoo: [\n")],
            &none(),
            &none(),
        )
        .unwrap_err();
        assert!(
            matches!(&err, ConfigError::Syntax { at, .. } if at.starts_with("/c.yml")),
            "{err}"
        );
        assert!(matches!(
            Config::from_layers(&[layer("/c.yml", "- a\n- b\n")], &none(), &none()),
            Err(ConfigError::NotAMapping { .. })
        ));
        assert!(matches!(
            Config::from_layers(&[layer("/c.yml", "just text")], &none(), &none()),
            Err(ConfigError::NotAMapping { .. })
        ));
        assert!(Config::from_layers(
            &[layer("/c.yml", "chapterLimit: 1\nchapterLimit: 2\n")],
            &none(),
            &none()
        )
        .is_err());
        // Empty and comment-only files set nothing.
        for text in ["", "\n\n", "# only a comment\n", "~\n"] {
            assert_eq!(
                Config::from_layers(&[layer("/c.yml", text)], &none(), &none()).unwrap(),
                Config::defaults()
            );
        }
        // A huge file does not hang or panic.
        let huge = format!("harnessId: {}\n", "a".repeat(1 << 20));
        assert!(Config::from_layers(&[layer("/c.yml", &huge)], &none(), &none()).is_err());
    }

    #[test]
    fn env_names() {
        assert_eq!(env_name("mergeThreshold"), "CHAPTERS_MERGE_THRESHOLD");
        assert_eq!(env_name("harnessId"), "CHAPTERS_HARNESS_ID");
        assert_eq!(
            env_name("toolResultArtifactTokens"),
            "CHAPTERS_TOOL_RESULT_ARTIFACT_TOKENS"
        );
    }

    #[test]
    fn load_reads_both_files_and_tolerates_absence() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        assert_eq!(
            load(home.path(), ws.path(), &none(), &none()).unwrap(),
            Config::defaults()
        );
        std::fs::create_dir_all(home.path().join("dsh-chapters")).unwrap();
        std::fs::write(
            home.path().join("dsh-chapters/config.yml"),
            "chapterLimit: 10\nvocabCoMin: 4\n",
        )
        .unwrap();
        std::fs::create_dir_all(ws.path().join(".dsh-chapters")).unwrap();
        std::fs::write(
            ws.path().join(".dsh-chapters/config.yml"),
            "chapterLimit: 20\n",
        )
        .unwrap();
        let c = load(home.path(), ws.path(), &none(), &none()).unwrap();
        assert_eq!((c.chapter_limit, c.vocab_co_min), (20, 4));
        let ws_file = ws.path().join(".dsh-chapters/config.yml");
        assert_eq!(
            c.origin_of("chapterLimit"),
            Some(format!("{}:1", ws_file.display()).as_str())
        );
    }

    #[test]
    fn path_map_is_validated_by_name() {
        let layer = |text: &str| Layer {
            origin: "/w/.dsh-chapters/config.yml".into(),
            text: text.into(),
        };
        let ok = Config::from_layers(
            &[layer("pathMap:\n  'C:\\Users\\ana\\src': /home/ana/src\n  /mnt/c/Users/ana/src: /home/ana/src\n")],
            &BTreeMap::new(),
            &BTreeMap::new(),
        )
        .expect("valid");
        assert_eq!(
            ok.path_map.get("C:\\Users\\ana\\src").map(String::as_str),
            Some("/home/ana/src")
        );
        assert_eq!(
            ok.origin_of("pathMap"),
            Some("/w/.dsh-chapters/config.yml:1")
        );
        for bad in [
            "pathMap:\n  src: /home/ana/src\n",
            "pathMap:\n  /a: /a/\n",
            "pathMap: [1]\n",
        ] {
            let err = Config::from_layers(&[layer(bad)], &BTreeMap::new(), &BTreeMap::new())
                .expect_err(bad)
                .to_string();
            assert!(
                err.contains("pathMap") && err.contains("config.yml:1"),
                "{err}"
            );
        }
    }
}
