//! The rules block (record §7.3–7.4): the ONE builder every door renders — the continuation
//! notice, `chapters_rules`, `chapters rule active`. Pure: rules, this machine's pins, a
//! term bag, caps in; the block's bytes (or a refusal with numbers) out. No clock, no
//! file order: the same stored inputs give the same bytes on every machine.
//!
//! Per tier: pinned first (always), then relevance-selected up to the tier's count cap,
//! the rest index-only (announced by count, listed by category). The selected set must fit
//! `coreRulesBudgetTokens` whole or the block is refused with per-rule numbers — never
//! clipped.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Rule, Scope};
use crate::names::one_line;
use crate::render::estimated_tokens;

/// One rule offered to the block: it governs here (core project rule, or active session
/// rule on the lineage), with this machine's pin.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub rule: &'a Rule,
    pub pinned: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    pub project: usize,
    pub session: usize,
    pub budget_tokens: u64,
    /// `rulesRelevance`: false ⇒ the fixed category-then-id order.
    pub relevance: bool,
}

/// Why no project rule governs here, said when the session tier renders alone (§7.8): a
/// silent zero beside local rules reads as "the team approved nothing".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectAbsence {
    /// No pool linked: no project tier at all on this checkout.
    NotLinked { source: String, origin: String },
    /// Linked, but the key derives from the checkout's path: a private rule namespace.
    PathDerived { origin: String },
    /// Linked; nothing approved on this machine (some may be proposed).
    NoneApproved { proposed: usize },
}

#[derive(Debug, Clone)]
pub struct BlockInput<'a> {
    pub slug: &'a str,
    pub project_key: &'a str,
    pub project_rules: Vec<Candidate<'a>>,
    pub session_rules: Vec<Candidate<'a>>,
    /// What this head is about: the session's stored turn terms, or a task's query terms.
    pub terms: &'a [String],
    pub caps: Caps,
    /// Set when `project_rules` is empty, to explain the zero.
    pub project_absence: Option<ProjectAbsence>,
    /// Set when the ancestry walk hit its cap: said inside the block.
    pub lineage_note: Option<String>,
}

/// One tier's selection.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TierSelection {
    /// Ids rendered verbatim, in render order.
    pub shown: Vec<String>,
    pub pinned: usize,
    /// Active but not rendered (over the count cap): index-only, by id.
    pub withheld: Vec<String>,
    pub cap: usize,
}

impl TierSelection {
    pub fn active(&self) -> usize {
        self.shown.len() + self.withheld.len()
    }
}

/// A rule's cost in the selected set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleCost {
    pub id: String,
    pub tokens: u64,
}

/// The selected set does not fit the token ceiling: the block is omitted, these numbers
/// are reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    pub budget_tokens: u64,
    pub needed_tokens: u64,
    pub per_rule: Vec<RuleCost>,
    pub project: TierSelection,
    pub session: TierSelection,
}

impl Refusal {
    /// The sentence every door prints.
    pub fn message(&self) -> String {
        let costs: Vec<String> = self
            .per_rule
            .iter()
            .map(|c| format!("{} {}", c.id, c.tokens))
            .collect();
        format!(
            "rules block refused: the {} selected rules need {} tokens and coreRulesBudgetTokens is {} (per rule: {}); nothing was clipped — raise coreRulesBudgetTokens, unpin, revoke, or lower projectRulesDisplayCap/sessionRulesDisplayCap",
            self.per_rule.len(),
            self.needed_tokens,
            self.budget_tokens,
            costs.join(", ")
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rendered {
    pub text: String,
    pub tokens: u64,
    pub project: TierSelection,
    pub session: TierSelection,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Block {
    /// Nothing governs: zero bytes at every call site.
    None,
    Rendered(Rendered),
    Refused(Refusal),
}

impl Block {
    /// The bytes a door inserts: empty unless rendered.
    pub fn text(&self) -> &str {
        match self {
            Block::Rendered(r) => &r.text,
            Block::None | Block::Refused(_) => "",
        }
    }
}

/// The precedence line (§7.7), rendered with session rules.
pub const PRECEDENCE_LINE: &str = "Precedence: project rules are the team's order. Session rules refine and add; they never override a project rule.";
/// The speak-up line (§7.3), rendered only when session rules render.
pub const SPEAK_UP_LINE: &str =
    "In your reply, name by id the session rules that shaped it, or say that none did.";

/// How well a rule matches the term bag: terms found among its topics and words.
fn relevance(rule: &Rule, terms: &[String]) -> usize {
    if terms.is_empty() {
        return 0;
    }
    let words: Vec<String> = crate::signature::terms_of(&rule.text).collect();
    terms
        .iter()
        .filter(|t| {
            rule.topics.iter().any(|topic| topic == *t)
                || words.iter().any(|w| w == *t)
                || rule.category == **t
        })
        .count()
}

/// The one selector (§7.4): pinned first (category, id), then by relevance (desc) when on,
/// then category → id. Returns (shown, withheld).
pub fn select<'a>(
    candidates: &[Candidate<'a>],
    terms: &[String],
    cap: usize,
    relevance_on: bool,
) -> (Vec<Candidate<'a>>, Vec<Candidate<'a>>, usize) {
    let mut pinned: Vec<Candidate<'a>> = candidates.iter().copied().filter(|c| c.pinned).collect();
    let mut rest: Vec<(usize, Candidate<'a>)> = candidates
        .iter()
        .copied()
        .filter(|c| !c.pinned)
        .map(|c| {
            let score = if relevance_on {
                relevance(c.rule, terms)
            } else {
                0
            };
            (score, c)
        })
        .collect();
    let order = |a: &Rule, b: &Rule| (&a.category, &a.id).cmp(&(&b.category, &b.id));
    pinned.sort_by(|a, b| order(a.rule, b.rule));
    rest.sort_by(|(sa, a), (sb, b)| sb.cmp(sa).then_with(|| order(a.rule, b.rule)));
    let pinned_count = pinned.len();
    // Pinned rules are the floor: shown even past the count cap (the token ceiling still
    // applies to them).
    let room = cap.saturating_sub(pinned_count);
    let mut shown = pinned;
    let mut withheld = Vec::new();
    for (i, (_, c)) in rest.into_iter().enumerate() {
        if i < room {
            shown.push(c);
        } else {
            withheld.push(c);
        }
    }
    (shown, withheld, pinned_count)
}

/// The verbatim line of one rule.
pub fn rule_line(c: &Candidate<'_>) -> String {
    let r = c.rule;
    let pin = if c.pinned { " (pinned)" } else { "" };
    match r.scope {
        Scope::Project => format!("- [{}] ({}){pin} {}", r.id, r.category, one_line(&r.text)),
        Scope::Session => format!(
            "- [{}] ({}){pin} {} — {}",
            r.id,
            r.category,
            one_line(&r.text),
            r.warrant()
        ),
    }
}

fn selection(
    shown: &[Candidate<'_>],
    withheld: &[Candidate<'_>],
    pinned: usize,
    cap: usize,
) -> TierSelection {
    TierSelection {
        shown: shown.iter().map(|c| c.rule.id.clone()).collect(),
        pinned,
        withheld: withheld.iter().map(|c| c.rule.id.clone()).collect(),
        cap,
    }
}

/// The mandatory withheld line: the count cap dropped some, said with numbers.
fn withheld_line(tier: &str, sel: &TierSelection, cap_key: &str, see: &str) -> String {
    format!(
        "{} {tier} rules active, {} shown — {see} (the rest exceed {cap_key} {}; they are listed by category below)",
        sel.active(),
        sel.shown.len(),
        sel.cap
    )
}

fn absence_line(absence: &ProjectAbsence, project_key: &str) -> String {
    match absence {
        ProjectAbsence::NotLinked { source, origin } => format!(
            "0 project rules — this checkout is not linked to a pool: project {project_key} resolves from {source} ({origin}); link it with `chapters link`"
        ),
        ProjectAbsence::PathDerived { origin } => format!(
            "0 project rules — this checkout resolves project {project_key} from its path ({origin}), a private rule namespace; give the repository a remote or set projectKeyOverride"
        ),
        ProjectAbsence::NoneApproved { proposed } => format!(
            "0 project rules — none is approved on this machine ({proposed} proposed: `chapters rule list --proposed`)"
        ),
    }
}

/// Build the block. Zero bytes when nothing governs.
pub fn build(input: &BlockInput<'_>) -> Block {
    let caps = input.caps;
    let (p_shown, p_withheld, p_pinned) = select(
        &input.project_rules,
        input.terms,
        caps.project,
        caps.relevance,
    );
    let (s_shown, s_withheld, s_pinned) = select(
        &input.session_rules,
        input.terms,
        caps.session,
        caps.relevance,
    );
    let project = selection(&p_shown, &p_withheld, p_pinned, caps.project);
    let session = selection(&s_shown, &s_withheld, s_pinned, caps.session);
    if project.active() == 0 && session.active() == 0 {
        return Block::None;
    }

    let p_lines: Vec<String> = p_shown.iter().map(rule_line).collect();
    let s_lines: Vec<String> = s_shown.iter().map(rule_line).collect();
    let per_rule: Vec<RuleCost> = p_shown
        .iter()
        .zip(&p_lines)
        .chain(s_shown.iter().zip(&s_lines))
        .map(|(c, line)| RuleCost {
            id: c.rule.id.clone(),
            tokens: estimated_tokens(line),
        })
        .collect();
    let needed: u64 = per_rule.iter().map(|c| c.tokens).sum();
    if needed > caps.budget_tokens {
        return Block::Refused(Refusal {
            budget_tokens: caps.budget_tokens,
            needed_tokens: needed,
            per_rule,
            project,
            session,
        });
    }

    let mut out = String::from("## Rules\n\n");
    out.push_str(&format!(
        "Project: {} · {}\n",
        input.slug, input.project_key
    ));
    let sessions_render = !s_lines.is_empty();
    if project.active() == 0 && sessions_render {
        if let Some(absence) = &input.project_absence {
            out.push_str(&absence_line(absence, input.project_key));
            out.push('\n');
        }
    }
    if sessions_render {
        if let Some(note) = &input.lineage_note {
            out.push_str(note);
            out.push('\n');
        }
        out.push_str(PRECEDENCE_LINE);
        out.push('\n');
    }
    if project.active() > 0 {
        out.push_str("\n### Project rules — approved on this machine\n\n");
        for line in &p_lines {
            out.push_str(line);
            out.push('\n');
        }
        if !project.withheld.is_empty() {
            out.push_str(&withheld_line(
                "project",
                &project,
                "projectRulesDisplayCap",
                "`chapters rule list`",
            ));
            out.push('\n');
        }
    }
    if session.active() > 0 {
        out.push_str("\n### Session rules — this session tree, this machine only\n\n");
        for line in &s_lines {
            out.push_str(line);
            out.push('\n');
        }
        if !session.withheld.is_empty() {
            out.push_str(&withheld_line(
                "session",
                &session,
                "sessionRulesDisplayCap",
                "`chapters rule active`",
            ));
            out.push('\n');
        }
        if sessions_render {
            out.push('\n');
            out.push_str(SPEAK_UP_LINE);
            out.push('\n');
        }
    }
    out.push_str(&category_index(
        input
            .project_rules
            .iter()
            .chain(&input.session_rules)
            .map(|c| c.rule),
    ));
    let tokens = estimated_tokens(&out);
    Block::Rendered(Rendered {
        text: out,
        tokens,
        project,
        session,
    })
}

/// Category names, counts, one-line essence, and where the full category is read.
fn category_index<'a>(rules: impl Iterator<Item = &'a Rule>) -> String {
    let mut by_category: BTreeMap<&str, Vec<&Rule>> = BTreeMap::new();
    for r in rules {
        by_category.entry(&r.category).or_default().push(r);
    }
    let mut out = String::from("\n### Rule categories\n\n");
    for (category, mut rules) in by_category {
        rules.sort_by(|a, b| a.id.cmp(&b.id));
        let essence = rules
            .first()
            .map(|r| one_line(&r.title))
            .unwrap_or_default();
        out.push_str(&format!(
            "- {category} — {} rule(s), e.g. \"{essence}\" — `chapters rule list --category {category}`\n",
            rules.len()
        ));
    }
    out.push_str("Load a rule category when this session's topics overlap it: `chapters_rules` with the task description returns the rules that apply.\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PK: &str = "0fa80a81-7250-550a-9d80-2f98da5d2732";

    fn caps() -> Caps {
        Caps {
            project: 12,
            session: 12,
            budget_tokens: 1200,
            relevance: true,
        }
    }

    fn input<'a>(
        p: Vec<Candidate<'a>>,
        s: Vec<Candidate<'a>>,
        terms: &'a [String],
    ) -> BlockInput<'a> {
        BlockInput {
            slug: "widgets",
            project_key: PK,
            project_rules: p,
            session_rules: s,
            terms,
            caps: caps(),
            project_absence: None,
            lineage_note: None,
        }
    }

    fn cand(rule: &Rule) -> Candidate<'_> {
        Candidate {
            rule,
            pinned: false,
        }
    }

    #[test]
    fn empty_is_zero_bytes() {
        let b = build(&input(vec![], vec![], &[]));
        assert_eq!(b, Block::None);
        assert_eq!(b.text(), "");
    }

    #[test]
    fn a_project_only_block_has_no_session_lines() {
        let r = Rule::project(PK, "testing", "Run cargo fmt before every commit.").unwrap();
        let b = build(&input(vec![cand(&r)], vec![], &[]));
        let text = b.text();
        assert!(
            text.starts_with("## Rules\n\nProject: widgets · 0fa80a81"),
            "{text}"
        );
        assert!(text.contains(&format!("- [{}] (testing) Run cargo fmt", r.id)));
        assert!(!text.contains(PRECEDENCE_LINE) && !text.contains(SPEAK_UP_LINE));
        assert!(text.contains("- testing — 1 rule(s)"), "{text}");
        assert!(
            !text.contains("rules active"),
            "no withheld line without withholding"
        );
    }

    #[test]
    fn session_rules_bring_precedence_warrant_speak_up_and_the_zero_line() {
        let s =
            Rule::session_marker(PK, "m", "sess-1", "sess-1", 4, "Never push to main.").unwrap();
        let mut i = input(vec![], vec![cand(&s)], &[]);
        i.project_absence = Some(ProjectAbsence::NotLinked {
            source: "remote".into(),
            origin: "remote origin x".into(),
        });
        i.lineage_note = Some(
            "lineage walk hit its cap of 64 sessions; older ancestors' rules are not here".into(),
        );
        let text = build(&i).text().to_owned();
        for needle in [
            PRECEDENCE_LINE,
            SPEAK_UP_LINE,
            "you said this (session sess-1, seq 4)",
            "0 project rules — this checkout is not linked",
            "lineage walk hit its cap",
        ] {
            assert!(text.contains(needle), "missing {needle:?}:\n{text}");
        }
    }

    #[test]
    fn caps_withhold_with_numbers_and_pins_come_first() {
        let rules: Vec<Rule> = (0..9)
            .map(|i| {
                Rule::project(PK, "style", &format!("Rule number {i} about formatting.")).unwrap()
            })
            .collect();
        let mut cands: Vec<Candidate<'_>> = rules.iter().map(cand).collect();
        cands[8].pinned = true;
        let mut i = input(cands, vec![], &[]);
        i.caps.project = 4;
        let Block::Rendered(r) = build(&i) else {
            panic!("not rendered")
        };
        assert_eq!(r.project.shown.len(), 4);
        assert_eq!(r.project.shown[0], rules[8].id, "the pinned rule is first");
        assert_eq!(r.project.withheld.len(), 5);
        assert!(
            r.text
                .contains("9 project rules active, 4 shown — `chapters rule list`"),
            "{}",
            r.text
        );
        assert!(r.text.contains("- style — 9 rule(s)"));
    }

    #[test]
    fn relevance_picks_what_the_terms_are_about() {
        let a = Rule::project(PK, "db", "Migrations run inside a transaction.").unwrap();
        let b = Rule::project(PK, "ui", "Buttons use the primary colour token.").unwrap();
        let terms = vec!["buttons".to_owned()];
        let mut i = input(vec![cand(&a), cand(&b)], vec![], &terms);
        i.caps.project = 1;
        let Block::Rendered(r) = build(&i) else {
            panic!()
        };
        assert_eq!(r.project.shown, vec![b.id.clone()]);
        i.caps.relevance = false;
        let Block::Rendered(r) = build(&i) else {
            panic!()
        };
        assert_eq!(
            r.project.shown,
            vec![a.id.clone()],
            "category order: db < ui"
        );
    }

    #[test]
    fn over_the_ceiling_refuses_with_per_rule_numbers_and_never_clips() {
        let long: Vec<Rule> = (0..3)
            .map(|i| Rule::project(PK, "x", &format!("{i} {}", "word ".repeat(200))).unwrap())
            .collect();
        let mut i = input(long.iter().map(cand).collect(), vec![], &[]);
        i.caps.budget_tokens = 300;
        let b = build(&i);
        assert_eq!(b.text(), "");
        let Block::Refused(r) = b else { panic!() };
        assert_eq!(r.per_rule.len(), 3);
        assert!(r.needed_tokens > 300);
        let m = r.message();
        assert!(
            m.contains("need") && m.contains("is 300") && m.contains(&long[0].id),
            "{m}"
        );
    }

    #[test]
    fn byte_stable_whatever_the_input_order() {
        let rules: Vec<Rule> = ["b", "a", "c"]
            .iter()
            .map(|t| Rule::project(PK, t, &format!("Rule {t}.")).unwrap())
            .collect();
        let fwd = build(&input(rules.iter().map(cand).collect(), vec![], &[]));
        let rev = build(&input(rules.iter().rev().map(cand).collect(), vec![], &[]));
        assert_eq!(fwd, rev);
    }
}
