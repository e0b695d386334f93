//! Redaction (record §9): the one chokepoint every byte bound for the store passes.
//! `Redacted<T>` can only be built here, so the store cannot be handed raw text.
//! A keyword prefilter picks candidate rules; each rule is its own regex.
//! Pure. OWNER: redact helper.

use std::collections::BTreeMap;

/// A value that has passed the chokepoint. No public constructor outside this module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    pub fn get(&self) -> &T {
        &self.0
    }
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl Redacted<String> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Counts per rule name; never values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedactionCounts {
    pub by_rule: BTreeMap<String, u64>,
}

impl RedactionCounts {
    pub fn total(&self) -> u64 {
        self.by_rule.values().sum()
    }
    pub fn add(&mut self, other: &RedactionCounts) {
        for (k, v) in &other.by_rule {
            *self.by_rule.entry(k.clone()).or_insert(0) += v;
        }
    }
}

/// An extra pattern from config: a name, the prefilter keywords, and a regex whose
/// whole match (or its group named `secret`, when present) is the secret.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct ExtraPattern {
    pub name: String,
    #[serde(default)]
    pub keywords: Vec<String>,
    pub regex: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    #[error("redaction pattern {name:?} is not a valid regex: {detail}")]
    BadPattern { name: String, detail: String },
}

/// The compiled rule set.
pub struct Redactor {
    _private: (),
}

impl Redactor {
    /// Built-in rules plus `extra` from config.
    pub fn new(extra: &[ExtraPattern]) -> Result<Self, RedactError> {
        let _ = extra;
        unimplemented!("redact helper pending")
    }

    /// Redact text; counts are added to `counts`.
    pub fn redact(&self, text: &str, counts: &mut RedactionCounts) -> Redacted<String> {
        let _ = (text, counts);
        unimplemented!("redact helper pending")
    }

    /// Redact every string inside a JSON value (keys kept), for ledger lines.
    pub fn redact_json(&self, value: &serde_json::Value, counts: &mut RedactionCounts) -> Redacted<serde_json::Value> {
        let _ = (value, counts);
        unimplemented!("redact helper pending")
    }
}

/// `⟦redacted:credential sha256=XXXXXXXX⟧` for a secret.
pub fn marker(secret: &[u8]) -> String {
    let _ = secret;
    unimplemented!("redact helper pending")
}
