//! `chapters rule …` (record §7.9). The ONLY place that writes a person's rule decision
//! (`rule-status`, `rule-pin`): each verb takes a mandatory `--by NAME`, as typed — never
//! read from git config or the environment (a person's mark is given, not inferred).

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::json;

use dsh_chapters::curation::{self, Author, Fact, FactKind, RuleStatus};
use dsh_chapters::redact::Redactor;
use dsh_chapters::rules::block::Block;
use dsh_chapters::rules::store::{self as rules_store, AssembleRequest, RuleEntry, Written};
use dsh_chapters::rules::{self, Rule, Scope, Status};
use dsh_chapters::store::Store;

use super::{Env, Reported};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(clap::Subcommand)]
enum Verb {
    /// Propose a project rule (status `proposed`; it governs no machine until a person there approves it).
    Add {
        /// The rule's category (lowercase letters, digits, `-`, `_`), e.g. `testing`.
        category: String,
        /// The rule itself, in words.
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// The rules this workspace can see: id, scope, status here, category, title, provenance.
    List {
        #[arg(long, value_enum)]
        scope: Option<ScopeArg>,
        /// Only project rules not approved on this machine.
        #[arg(long)]
        proposed: bool,
        #[arg(long, value_name = "C")]
        category: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// One rule in full: its whole text, identity, this machine's status and pin.
    View {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Approve a project rule on this machine (a person's act: --by is mandatory).
    Approve(Decision),
    /// Revoke a rule on this machine (either tier; a person's act: --by is mandatory).
    Revoke(Decision),
    /// Always render this rule first (a person's act: --by is mandatory).
    Pin(Decision),
    /// Stop pinning this rule (a person's act: --by is mandatory).
    Unpin(Decision),
    /// Exactly what renders into a rebuilt head: counts per tier, what is withheld and why.
    Active {
        /// The session whose head is rebuilt (its session tree's rules); without it, project rules only.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        #[arg(long, value_enum, default_value = "continue")]
        intent: Intent,
        #[arg(long)]
        json: bool,
    },
    /// Report contradictory rule pairs (one bounded model call; report-only).
    Conflicts {
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args)]
struct Decision {
    id: String,
    /// Your name, as you want it on the record. Required: a decision is a person's, never inferred.
    #[arg(long, value_name = "NAME", required = true)]
    by: String,
    /// Why (kept on the fact).
    #[arg(long)]
    reason: Option<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ScopeArg {
    Project,
    Session,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Intent {
    Continue,
    Fork,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    match args.verb {
        Verb::Add {
            category,
            text,
            json,
        } => add(&env, &category, &text.join(" "), json),
        Verb::List {
            scope,
            proposed,
            category,
            json,
        } => list(&env, scope, proposed, category.as_deref(), json),
        Verb::View { id, json } => view(&env, &id, json),
        Verb::Approve(d) => decide(&env, d, Act::Approve),
        Verb::Revoke(d) => decide(&env, d, Act::Revoke),
        Verb::Pin(d) => decide(&env, d, Act::Pin(true)),
        Verb::Unpin(d) => decide(&env, d, Act::Pin(false)),
        Verb::Active {
            session,
            intent,
            json,
        } => active(&env, session.as_deref(), intent, json),
        Verb::Conflicts { json } => conflicts(&env, json),
    }
}

pub(super) fn linked(env: &Env) -> Result<bool> {
    Ok(dsh_chapters::pool::link::is_linked(&env.workspace)?)
}

fn add(env: &Env, category: &str, text: &str, json: bool) -> Result<()> {
    let store = Store::open(&env.workspace)?;
    let rule = Rule::project(&env.identity.project_key, category, text)?;
    let redactor = Redactor::new(&env.config.redaction_patterns)?;
    let _lock = rules_store::lock(&store, &env.config)?;
    let (rule, written) =
        rules_store::write_rule(&store, &env.workspace, rule.redacted(&redactor)?)?;
    if json {
        return super::print_json(&json!({
            "id": rule.id, "category": rule.category, "status": "proposed", "written": written,
        }));
    }
    match written {
        Written::New => println!("proposed {} ({}): {}", rule.id, rule.category, rule.title),
        Written::AlreadyHere => println!(
            "already proposed: {} ({}) holds these words",
            rule.id, rule.category
        ),
        Written::InThePool => println!(
            "already proposed on another machine: {} ({}) is in the pool",
            rule.id, rule.category
        ),
    }
    println!(
        "it governs nothing until a person approves it on each machine: `chapters rule approve {} --by NAME`",
        rule.id
    );
    Ok(())
}

struct Row<'a> {
    entry: &'a RuleEntry,
    status: Status,
    pinned: bool,
}

/// What the reports of `rule list` and `rule show` are derived with beside the rules read
/// back (`Redacted<RuleCorpus>`): this machine, the curation read back from the store and
/// the mirror, and the flags given — no conversation text.
struct RulesFrame {
    project_key: String,
    harness_id: String,
    curation: curation::Curation,
    scope: Option<ScopeArg>,
    proposed: bool,
    category: Option<String>,
    /// `rule show`: the shown rule's place in the corpus (resolved from the id given).
    shown: usize,
}

impl dsh_chapters::redact::Settings for RulesFrame {}

fn rows<'a>(corpus: &'a rules_store::RuleCorpus, frame: &RulesFrame) -> Vec<Row<'a>> {
    corpus
        .rules
        .iter()
        .filter(|e| e.rule.project_key == frame.project_key)
        .map(|entry| Row {
            status: rules::status(&entry.rule, &frame.curation, &frame.harness_id),
            pinned: frame
                .curation
                .rule_pinned(&frame.harness_id, &entry.rule.id),
            entry,
        })
        .filter(|r| match frame.scope {
            Some(ScopeArg::Project) => r.entry.rule.scope == Scope::Project,
            Some(ScopeArg::Session) => r.entry.rule.scope == Scope::Session,
            None => true,
        })
        .filter(|r| !frame.proposed || r.status == Status::Proposed)
        .filter(|r| {
            frame
                .category
                .as_deref()
                .is_none_or(|c| r.entry.rule.category == c)
        })
        .collect()
}

fn provenance(e: &RuleEntry) -> String {
    let r = &e.rule;
    match r.scope {
        Scope::Project if e.local => "this store".to_owned(),
        Scope::Project => "pool".to_owned(),
        Scope::Session => format!(
            "marker, session {} seq {}",
            r.session.as_deref().unwrap_or("?"),
            r.seq.map_or("?".to_owned(), |s| s.to_string())
        ),
    }
}

fn report_unreadable(unreadable: &[(String, String)], notes: &[String]) {
    for (path, reason) in unreadable {
        eprintln!("chapters: skipped unreadable rule {path}: {reason}");
    }
    for note in notes {
        eprintln!("chapters: {note}");
    }
}

/// The frame of `rule list` / `rule show` on this machine.
fn frame(env: &Env, linked: bool) -> Result<RulesFrame> {
    let (curation, notes) = rules_store::read_curation(&env.workspace, linked)?;
    report_unreadable(&[], &notes);
    Ok(RulesFrame {
        project_key: env.identity.project_key.clone(),
        harness_id: env.harness_id.clone(),
        curation,
        scope: None,
        proposed: false,
        category: None,
        shown: 0,
    })
}

fn list(
    env: &Env,
    scope: Option<ScopeArg>,
    proposed: bool,
    category: Option<&str>,
    json: bool,
) -> Result<()> {
    let linked = linked(env)?;
    let corpus = rules_store::read_rules(&env.workspace, &env.identity.project_key, linked)?;
    report_unreadable(&corpus.unreadable, &[]);
    let frame = RulesFrame {
        scope,
        proposed,
        category: category.map(str::to_lowercase),
        ..frame(env, linked)?
    };
    if json {
        return super::print_json_answer(&corpus.derive_with(&frame, list_json));
    }
    super::print_answer(&corpus.derive_with(&frame, list_text));
    Ok(())
}

fn list_json(corpus: &rules_store::RuleCorpus, frame: &RulesFrame) -> serde_json::Value {
    let items: Vec<serde_json::Value> = rows(corpus, frame)
        .iter()
        .map(|r| {
            json!({
                "id": r.entry.rule.id, "scope": r.entry.rule.scope, "status": r.status,
                "pinned": r.pinned, "category": r.entry.rule.category,
                "title": r.entry.rule.title, "provenance": provenance(r.entry),
                "sourceSeq": r.entry.rule.seq, "path": r.entry.path,
            })
        })
        .collect();
    json!({"rules": items, "unreadable": corpus.unreadable.len()})
}

fn list_text(corpus: &rules_store::RuleCorpus, frame: &RulesFrame) -> String {
    let shown = rows(corpus, frame);
    if shown.is_empty() {
        return "no rules match (`chapters rule add CATEGORY TEXT` proposes one)\n".to_owned();
    }
    let mut out = String::from("id | scope | status | category | title | provenance\n");
    for r in &shown {
        out.push_str(&format!(
            "{} | {} | {}{} | {} | {} | {}\n",
            r.entry.rule.id,
            r.entry.rule.scope.as_str(),
            r.status.as_str(),
            if r.pinned { ", pinned" } else { "" },
            r.entry.rule.category,
            r.entry.rule.title,
            provenance(r.entry)
        ));
    }
    out
}

fn view(env: &Env, id: &str, json: bool) -> Result<()> {
    let linked = linked(env)?;
    let corpus = rules_store::read_rules(&env.workspace, &env.identity.project_key, linked)?;
    report_unreadable(&corpus.unreadable, &[]);
    // The id given only finds the rule; what is shown is the rule as read back.
    let entry = corpus
        .resolve(id)
        .map_err(|e| anyhow::Error::msg(dsh_chapters::redact::echo(&e)))?;
    let shown = corpus
        .rules
        .iter()
        .position(|e| std::ptr::eq(e, entry))
        .context("the resolved rule is one of the corpus")?;
    let frame = RulesFrame {
        shown,
        ..frame(env, linked)?
    };
    if json {
        return super::print_json_answer(&corpus.derive_with(&frame, view_json));
    }
    super::print_answer(&corpus.derive_with(&frame, view_text));
    Ok(())
}

fn view_json(corpus: &rules_store::RuleCorpus, frame: &RulesFrame) -> serde_json::Value {
    let Some(entry) = corpus.rules.get(frame.shown) else {
        return serde_json::Value::Null;
    };
    let r = &entry.rule;
    json!({
        "id": r.id, "scope": r.scope, "category": r.category,
        "status": rules::status(r, &frame.curation, &frame.harness_id),
        "pinned": frame.curation.rule_pinned(&frame.harness_id, &r.id),
        "text": r.text, "title": r.title, "path": entry.path,
        "session": r.session, "rootSessionId": r.root_session, "sourceSeq": r.seq,
        "derivedFrom": r.derived_from,
        "decision": frame.curation.rule_decision(&frame.harness_id, &r.id),
        "warrant": (r.scope == Scope::Session).then(|| r.warrant()),
    })
}

fn view_text(corpus: &rules_store::RuleCorpus, frame: &RulesFrame) -> String {
    let Some(entry) = corpus.rules.get(frame.shown) else {
        return String::new();
    };
    let r = &entry.rule;
    let st = rules::status(r, &frame.curation, &frame.harness_id);
    let pinned = frame.curation.rule_pinned(&frame.harness_id, &r.id);
    let mut out = format!(
        "{} · {} rule · category {}\nstatus on this machine ({}): {}{}\n",
        r.id,
        r.scope.as_str(),
        r.category,
        frame.harness_id,
        st.as_str(),
        if pinned { ", pinned" } else { "" }
    );
    if let Some(d) = frame.curation.rule_decision(&frame.harness_id, &r.id) {
        out.push_str(&format!("decided by {} at {}\n", d.by, d.at));
    }
    if r.scope == Scope::Session {
        out.push_str(&format!(
            "governs the session tree of {} (and its descendants) on this machine; basis: {}\n",
            r.session.as_deref().unwrap_or("?"),
            r.warrant()
        ));
    }
    out.push_str(&format!("file: {}\n\n{}\n", entry.path, r.text));
    out
}

#[derive(Clone, Copy)]
enum Act {
    Approve,
    Revoke,
    Pin(bool),
}

fn decide(env: &Env, d: Decision, act: Act) -> Result<()> {
    let by = d.by.trim();
    if by.is_empty() {
        bail!("--by needs your name: a rule decision is a person's, and it is recorded as given");
    }
    let store = Store::open(&env.workspace)?;
    let linked = linked(env)?;
    let corpus = rules_store::read_rules(&env.workspace, &env.identity.project_key, linked)?;
    let entry = corpus.resolve(&d.id).map_err(anyhow::Error::msg)?;
    let rule = &entry.rule;
    let kind = match act {
        Act::Approve
            if rule.scope == Scope::Session
                && !rule.mined.as_ref().is_some_and(|m| m.review_only) =>
        {
            bail!(
            "{} is a session rule: it governs its session tree by derivation and needs no approval; `chapters rule add` proposes its words as a project rule",
            rule.id
            )
        }
        Act::Approve => FactKind::RuleStatus {
            rule: rule.id.clone(),
            status: RuleStatus::Approved,
        },
        Act::Revoke => FactKind::RuleStatus {
            rule: rule.id.clone(),
            status: RuleStatus::Revoked,
        },
        Act::Pin(pinned) => FactKind::RulePin {
            rule: rule.id.clone(),
            pinned,
        },
    };
    let now = dsh_chapters::time::rfc3339_utc(super::now_ms());
    let mut fact = Fact::new(kind, Author::User, &now);
    fact.by = Some(by.to_owned());
    fact.reason = d.reason.clone();
    let redactor = Redactor::new(&env.config.redaction_patterns)?;
    let _lock = rules_store::lock(&store, &env.config)?;
    curation::file::append(
        &store,
        &env.harness_id,
        &curation::file::redacted(&fact, &redactor),
    )
    .context("cannot record the decision")?;
    let what = match act {
        Act::Approve => "approved (core) on this machine",
        Act::Revoke => "revoked on this machine",
        Act::Pin(true) => "pinned on this machine",
        Act::Pin(false) => "unpinned on this machine",
    };
    println!("{} {what}, by {by} ({})", rule.id, rule.title);
    Ok(())
}

fn active(env: &Env, session: Option<&str>, intent: Intent, json: bool) -> Result<()> {
    let assembled = rules_store::assemble(&AssembleRequest {
        workspace: &env.workspace,
        dsh_home: &env.dsh_home,
        config: &env.config,
        identity: &env.identity,
        harness: &env.harness_id,
        session,
        include_session: intent == Intent::Continue,
        terms: None,
        linked: linked(env)?,
    })?;
    report_unreadable(&assembled.unreadable, &assembled.curation_notes);
    if json {
        return super::print_json(&json!({
            "linked": assembled.linked,
            "proposed": assembled.proposed,
            "lineage": assembled.lineage,
            "block": assembled.block.get(),
        }));
    }
    println!(
        "Project: {} · {} ({}: {})",
        env.identity.slug(),
        env.identity.project_key,
        env.identity.source.as_str(),
        env.identity.origin
    );
    if !assembled.linked {
        println!(
            "0 project rules govern here: this checkout is not linked to a pool (`chapters link`)"
        );
    }
    if let Some(l) = &assembled.lineage {
        if let Some(note) = l.note() {
            println!("{note}");
        }
        if l.unknown_session {
            println!(
                "session {} has no log in this workspace: only its own session rules are considered",
                l.sessions[0]
            );
        }
    }
    println!("proposed, not approved here: {}", assembled.proposed);
    match assembled.block.get() {
        Block::None => {
            println!("nothing renders: no rule governs this head (zero bytes)");
            Ok(())
        }
        Block::Rendered(r) => {
            for (tier, sel, cap_key) in [
                ("project", &r.project, "projectRulesDisplayCap"),
                ("session", &r.session, "sessionRulesDisplayCap"),
            ] {
                println!(
                    "{tier}: {} active, {} shown ({} pinned), {} withheld{}",
                    sel.active(),
                    sel.shown.len(),
                    sel.pinned,
                    sel.withheld.len(),
                    if sel.withheld.is_empty() {
                        String::new()
                    } else {
                        format!(" — over {cap_key} {}: {}", sel.cap, sel.withheld.join(", "))
                    }
                );
            }
            println!(
                "renders {} tokens (coreRulesBudgetTokens {}):",
                r.tokens, env.config.core_rules_budget_tokens
            );
            println!();
            super::print_answer(&assembled.block.derive(|b| b.text().to_owned()));
            Ok(())
        }
        Block::Refused(refusal) => {
            eprintln!("chapters: {}", refusal.message());
            println!("nothing renders: the selected rules exceed the token ceiling (see above)");
            Err(Reported.into())
        }
    }
}

fn conflicts(env: &Env, json: bool) -> Result<()> {
    use dsh_chapters::enrich::{chat, http::Endpoint, Completion, KEY_NAME};
    use dsh_chapters::rules::conflicts;
    let refuse = |why: String| -> Result<()> {
        if json {
            super::print_json(&json!({"refused": why}))?;
        }
        eprintln!("chapters: rule conflicts refused: {why}");
        Err(Reported.into())
    };
    let Some(url) = env.config.enrichment_endpoint.as_deref() else {
        return refuse("no model route is configured (enrichmentEndpoint is unset): `rule conflicts` spends one bounded model call over the assembled rules and has nothing to call. Set one with `chapters enrich model --endpoint URL --model NAME`; nothing was checked".to_owned());
    };
    let endpoint = Endpoint::parse(url)?;
    let linked = linked(env)?;
    let corpus = rules_store::read_rules(&env.workspace, &env.identity.project_key, linked)?;
    let (curation, notes) = rules_store::read_curation(&env.workspace, linked)?;
    report_unreadable(&corpus.unreadable, &notes);
    // The set that governs on this machine: core project rules and active local session rules.
    let governing: Vec<&Rule> = corpus
        .rules
        .iter()
        .filter(
            |e| match rules::status(&e.rule, &curation, &env.harness_id) {
                // Project rules govern only a linked checkout (§7.8).
                Status::Core => linked,
                Status::Active => e.local,
                _ => false,
            },
        )
        .map(|e| &e.rule)
        .collect();
    if governing.len() < 2 {
        let note = format!(
            "{} rule(s) govern on this machine: nothing to compare",
            governing.len()
        );
        if json {
            return super::print_json(
                &json!({"checked": governing.len(), "conflicts": [], "note": note}),
            );
        }
        println!("{note}");
        return Ok(());
    }
    let messages = match conflicts::messages(&governing) {
        Ok(m) => m,
        Err(e) => return refuse(e.to_string()),
    };
    let key = dsh_chapters::credentials::load(&env.dsh_home, KEY_NAME)?;
    let model = env.config.enrichment_model.as_deref().unwrap_or_default();
    let mut last = String::new();
    // One call, and one retry when its answer is not a valid report.
    for _ in 0..2 {
        let content = match chat(&endpoint, &env.config, key.as_ref(), model, &messages) {
            Completion::Content(content) => content,
            Completion::Failed(e) | Completion::TimedOut(e) => {
                return refuse(format!("{e}; nothing was checked"))
            }
        };
        match conflicts::parse(&content, &governing) {
            Ok(report) => {
                if json {
                    return super::print_json(&json!({
                        "checked": governing.len(),
                        "model": env.config.enrichment_model,
                        "conflicts": report,
                    }));
                }
                println!(
                    "{} governing rule(s) checked by {}: {} contradictory pair(s) (report only; no rule was changed)",
                    governing.len(),
                    env.config.enrichment_model.as_deref().unwrap_or("the endpoint's default model"),
                    report.len()
                );
                for c in &report {
                    println!("  {} ⟂ {}: {}", c.a, c.b, c.why);
                }
                return Ok(());
            }
            Err(e) => last = e.to_string(),
        }
    }
    refuse(format!("{last} (twice); nothing was checked"))
}
