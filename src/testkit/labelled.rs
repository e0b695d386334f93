//! Generated sessions whose task boundaries are known (issue 18, point 5): the input of the
//! composition quality benchmark (`quality`) and its test. Deterministic per seed, no
//! dependency.
//!
//! A session is a run of *segments*, each a few turns of one task. The next segment takes a
//! task not yet seen, or returns to an earlier one (one segment in four): tasks interleave
//! and resume. Inside a segment the turns vary as people's do: ordinary requests with a file
//! read and a command, prose-only questions (no tool call), very short turns (`ok`, `go on`,
//! with or without a tool call), a turn whose command prints a ~48 KB log (an artifact),
//! and whole tasks held in Chinese. The label of each turn is its task's index in
//! [`LABELLED_TASKS`]; a boundary is a turn whose task differs from the turn before.

use serde_json::json;

use super::writer::{ToolCallSpec, TurnSpec, XorShift as Rng};

/// One task of the generated sessions.
#[derive(Debug)]
pub struct LabelledTask {
    /// What a person would call the task; its words are what the chapter's topics should
    /// name (one of them at least).
    pub label: &'static str,
    /// How the human's text names it.
    pub phrase: &'static str,
    pub files: &'static [&'static str],
    pub commands: &'static [&'static str],
    pub nouns: &'static [&'static str],
    /// Held in Chinese: the human's text and the answer are Chinese prose.
    pub chinese: bool,
}

/// The tasks, English and Chinese.
pub const LABELLED_TASKS: &[LabelledTask] = &[
    LabelledTask {
        label: "refresh token middleware",
        phrase: "the refreshToken middleware",
        files: &["src/auth/middleware.ts", "src/auth/refresh_token.ts"],
        commands: &["npm test -- auth", "npx tsc --noEmit"],
        nouns: &["refresh token", "expiry", "session cookie", "401 response"],
        chinese: false,
    },
    LabelledTask {
        label: "csv export invoices",
        phrase: "the CSV export of invoices",
        files: &["src/export/csv.rs", "src/billing/invoice.rs"],
        commands: &["cargo test -p billing", "cargo run --bin export"],
        nouns: &["invoice", "currency column", "quote escaping", "csv header"],
        chinese: false,
    },
    LabelledTask {
        label: "ci cache pipeline",
        phrase: "caching in the CI pipeline",
        files: &[".github/workflows/ci.yml", "scripts/ci-cache.sh"],
        commands: &["act -j build", "bash scripts/ci-cache.sh --dry-run"],
        nouns: &["cache key", "runner", "lockfile", "workflow job"],
        chinese: false,
    },
    LabelledTask {
        label: "date parsing timezone",
        phrase: "the flaky date parsing test",
        files: &["src/time/parse.rs", "tests/parse_dates.rs"],
        commands: &[
            "cargo test -p timeparse",
            "cargo test -p timeparse -- --nocapture",
        ],
        nouns: &["timezone offset", "leap day", "format string", "parser"],
        chinese: false,
    },
    LabelledTask {
        label: "lru cache memory eviction",
        phrase: "the memory growth in the LRU cache",
        files: &["src/cache/lru.rs", "src/cache/metrics.rs"],
        commands: &["cargo bench -p cache", "cargo test -p cache"],
        nouns: &["eviction", "capacity", "allocation", "hit rate"],
        chinese: false,
    },
    LabelledTask {
        label: "user roles migration",
        phrase: "the migration for user roles",
        files: &["migrations/0007_roles.sql", "src/db/roles.rs"],
        commands: &["sqlx migrate run", "cargo test -p db roles"],
        nouns: &["role", "foreign key", "permission", "transaction"],
        chinese: false,
    },
    LabelledTask {
        label: "连接池 延迟 订单",
        phrase: "订单服务的接口延迟",
        files: &["services/order/pool.go", "services/order/metrics.go"],
        commands: &["go test ./services/order/...", "go run ./cmd/loadtest"],
        nouns: &["连接池排队", "等待时间", "接口延迟", "连接池大小"],
        chinese: true,
    },
    LabelledTask {
        label: "按钮 样式 前端",
        phrase: "前端页面的按钮样式",
        files: &["web/src/components/Button.tsx", "web/src/theme.css"],
        commands: &["npm run build", "npm run lint"],
        nouns: &["按钮圆角", "品牌蓝色", "按钮样式", "悬停效果"],
        chinese: true,
    },
];

/// What kind of turn this is (for reading the benchmark's misses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnKind {
    /// A request naming the task, with a file read and a command.
    Request,
    /// A question with no tool call.
    ProseOnly,
    /// `ok`, `go on`: a few words, sometimes with a command.
    Short,
    /// A request whose command prints a ~48 KB log.
    LongOutput,
}

/// One generated turn and the task it belongs to.
#[derive(Debug, Clone)]
pub struct LabelledTurn {
    pub spec: TurnSpec,
    /// Index into [`LABELLED_TASKS`].
    pub task: usize,
    pub kind: TurnKind,
}

const EN_OPEN: &[&str] = &[
    "Can you look at {topic}? Start with {file}.",
    "Next task: {topic}. The {noun} is wrong, see {file}.",
    "Let's work on {topic}; {file} mishandles the {noun}.",
];
const EN_REQUEST: &[&str] = &[
    "The tests still fail after the last change: `{cmd}` reports an error around the {noun} in {file}.",
    "Good. Now update {file} the same way for the {noun} and run `{cmd}`.",
    "Why does {file} handle the {noun} like that? Explain before changing anything.",
    "Please add a test for the {noun} case in {file}.",
    "Back to {topic}: what is left for the {noun}?",
];
const EN_PROSE: &[&str] = &[
    "Should the {noun} be configurable, or is a fixed value fine for {topic}?",
    "How do other projects treat the {noun}? I want the {noun} handling in {topic} to be boring.",
    "Explain the {noun} once more, slowly: what happens to it in {topic}?",
];
const EN_SHORT: &[&str] = &[
    "ok",
    "go on",
    "yes, do it",
    "thanks, continue",
    "fine",
    "next",
];
const ZH_OPEN: &[&str] = &[
    "{topic}有问题，帮我看一下{noun}，先看{file}。",
    "新任务：{topic}。{noun}不对，参考{file}。",
];
const ZH_REQUEST: &[&str] = &[
    "继续分析{topic}：{noun}和{other}是什么关系？",
    "运行`{cmd}`以后{noun}还是不对，再看看{file}。",
    "把{noun}改一下，然后跑一下`{cmd}`。",
    "总结一下{topic}里{noun}的结论。",
];
const ZH_PROSE: &[&str] = &[
    "{noun}应该怎么设计比较好？{topic}里{other}要不要一起改？",
    "为什么{noun}会影响{other}？解释一下{topic}的原理。",
];
const ZH_SHORT: &[&str] = &["好的", "继续", "可以，改吧", "谢谢，继续"];

/// A deterministic labelled session of `turns` turns whose file reads name files under
/// `workspace` (an absolute path).
pub fn labelled_session(seed: u64, turns: usize, workspace: &str) -> Vec<LabelledTurn> {
    let workspace = workspace.trim_end_matches('/');
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(turns);
    let mut seen: Vec<usize> = Vec::new();
    let mut current: Option<usize> = None;
    while out.len() < turns {
        let task = next_task(&mut rng, &seen, current);
        if !seen.contains(&task) {
            seen.push(task);
        }
        current = Some(task);
        let len = 2 + rng.below(5);
        for i in 0..len {
            if out.len() >= turns {
                break;
            }
            out.push(turn(&mut rng, task, i == 0, workspace));
        }
    }
    out
}

/// A task different from `current`: an earlier one once in four (a return), else any.
fn next_task(rng: &mut Rng, seen: &[usize], current: Option<usize>) -> usize {
    let earlier: Vec<usize> = seen
        .iter()
        .copied()
        .filter(|&t| Some(t) != current)
        .collect();
    if !earlier.is_empty() && rng.below(4) == 0 {
        return *rng.pick(&earlier);
    }
    loop {
        let t = rng.below(LABELLED_TASKS.len());
        if Some(t) != current {
            return t;
        }
    }
}

fn turn(rng: &mut Rng, task: usize, opening: bool, workspace: &str) -> LabelledTurn {
    let t = &LABELLED_TASKS[task];
    let kind = if opening {
        TurnKind::Request
    } else {
        match rng.below(20) {
            0..=2 => TurnKind::ProseOnly,
            3..=5 => TurnKind::Short,
            6 | 7 => TurnKind::LongOutput,
            _ => TurnKind::Request,
        }
    };
    let file = *rng.pick(t.files);
    let cmd = *rng.pick(t.commands);
    let noun = *rng.pick(t.nouns);
    let other = *rng.pick(t.nouns);
    let fill = |template: &str| {
        template
            .replace("{topic}", t.phrase)
            .replace("{file}", file)
            .replace("{cmd}", cmd)
            .replace("{noun}", noun)
            .replace("{other}", other)
    };
    let (open, request, prose, short) = if t.chinese {
        (ZH_OPEN, ZH_REQUEST, ZH_PROSE, ZH_SHORT)
    } else {
        (EN_OPEN, EN_REQUEST, EN_PROSE, EN_SHORT)
    };
    let human = match kind {
        TurnKind::Request | TurnKind::LongOutput if opening => fill(rng.pick::<&str>(open)),
        TurnKind::Request | TurnKind::LongOutput => fill(rng.pick::<&str>(request)),
        TurnKind::ProseOnly => fill(rng.pick::<&str>(prose)),
        TurnKind::Short => (*rng.pick(short)).to_owned(),
    };
    let answer = if t.chinese {
        format!("已经检查了{file}。{noun}的处理已经修改，`{cmd}`通过了。")
    } else {
        format!("I checked {file}. The {noun} handling is updated and `{cmd}` passes now.")
    };
    let mut spec = TurnSpec::new(&human, &answer);
    let read = ToolCallSpec::new(
        "read_file",
        json!({ "path": format!("{workspace}/{file}") }),
        &listing(rng, file, noun, 1500),
    );
    let run = |bytes: usize, rng: &mut Rng| {
        ToolCallSpec::new(
            "bash",
            json!({ "command": cmd }),
            &command_output(rng, cmd, noun, bytes),
        )
    };
    match kind {
        TurnKind::Request => {
            spec.tool_calls.push(read);
            spec.tool_calls.push(run(1200, rng));
        }
        TurnKind::LongOutput => {
            spec.tool_calls.push(read);
            spec.tool_calls.push(run(48 * 1024, rng));
        }
        TurnKind::ProseOnly => {}
        TurnKind::Short => {
            if rng.below(2) == 0 {
                spec.tool_calls.push(run(600, rng));
            }
        }
    }
    LabelledTurn { spec, task, kind }
}

fn listing(rng: &mut Rng, file: &str, noun: &str, bytes: usize) -> String {
    let ident: String = noun
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut out = format!("// {file}\n");
    let mut line = 1;
    while out.len() < bytes {
        let n = rng.below(1000);
        out.push_str(&format!(
            "{line:>4}  fn handle_{ident}_{n}(input: &str) -> Result<(), Error> {{ check(input)? }}\n"
        ));
        line += 1;
    }
    out
}

fn command_output(rng: &mut Rng, cmd: &str, noun: &str, bytes: usize) -> String {
    let ident: String = noun
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut out = format!("$ {cmd}\n");
    let mut i = 0;
    while out.len() < bytes {
        let status = if rng.below(9) == 0 { "FAILED" } else { "ok" };
        out.push_str(&format!("test {ident}::case_{i} ... {status}\n"));
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_labelled() {
        let a = labelled_session(7, 40, "/w");
        let b = labelled_session(7, 40, "/w");
        assert_eq!(a.len(), 40);
        assert!(a
            .iter()
            .zip(&b)
            .all(|(x, y)| x.spec == y.spec && x.task == y.task));
        // Segments change task; some task returns.
        let changes = a.windows(2).filter(|w| w[0].task != w[1].task).count();
        assert!(changes >= 5, "{changes}");
    }
}
