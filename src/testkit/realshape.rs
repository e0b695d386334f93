//! Session logs in the shape current DSH (0.2.x, formats v3 and v4) writes them, for tests
//! and benchmarks: written from the facts gathered in issue 14 (logs people committed
//! publicly), not copied from any log.
//!
//! What a turn holds, in log order (the first turn of a session also opens with
//! `permission/preset`, `sandbox/mode`, `approval/policy`, `agent-preset/selected`,
//! `subagent/catalog`, `subagent/model-selection-policy`):
//! - `agent/inbox/spliced` inserting the human's message (`data.inserted[]` with `id`,
//!   `role`, `content`, `source`), `turn/start`, then a splice that only removes
//!   (`removedCount`, no `inserted`);
//! - `step/start`, `system/message` (the system prompt), `model/selection`, the host's
//!   `user/message`s (`agent-instructions`, `skill-catalog`, the runtime context — v4
//!   `runtime-context`, v3 `plugin` `@deepseek-ai/dsh-system-prompt` —, `time-context`,
//!   `dsh-mnemon`, and `user-approval` when asked), then the human's `user/message` with the
//!   spliced item's `id`, `request/header` (the tool catalog), `request/context`,
//!   `session/title-llm-request` (repeating the human's words) and `session/title` on the
//!   first turn;
//! - per tool step: an `assistant/message` whose `content` holds the final `reasoning`,
//!   `text` and `tool-call` blocks and whose `data.stream` holds the packed
//!   `reasoning-chunks`, `text-chunks` and `tool-call-chunks` rows (no `seq0`, not counted
//!   in `seq`), `usage` with `cacheReadTokens`, `cacheWriteTokens`, `reasoningTokens`, and
//!   `source.replayState`; one `tool/call` per call (programmatic tool calling's
//!   `run_code` sub-calls are not written: `tests/it/dsh_real.rs` holds that shape); one
//!   `tool/result` per call with `data.meta` and
//!   `sourceEventSeqs` of single seqs (v4 `role: "tool"`; v3 a `tool-result` block);
//!   `todo/write`; `step/end`;
//! - a delegate's report when asked (`agent-message`/`relay` then `subagent-settled`/`notice`);
//! - the final `assistant/message` (reasoning, text, a stream repeating the text: one line
//!   can be several hundred KB), `deliverables/presented`,
//!   `session-log-deepseek/delivery-accepted`, `command/run`/`command/done`, `step/end`,
//!   `session/end-seed`, `turn/end`.

use serde_json::{json, Value};

use super::writer::ToolCallSpec;
use crate::session::event::Header;

/// The system prompt every step repeats (large in real logs; trimmed here).
pub const SYSTEM_PROMPT: &str = "You are DSH, a coding agent. Work in the user's workspace. \
Prefer small, verified changes. SYSPROMPTWORD appears only here.";
/// Words that appear only in host-injected messages: never in signatures' terms.
pub const INJECTED_WORDS: [&str; 6] = [
    "instructionword",
    "catalogword",
    "runtimeword",
    "timeword",
    "mnemonword",
    "approvalword",
];

/// One turn of a real-shaped session.
#[derive(Debug, Clone, PartialEq)]
pub struct RealTurn {
    /// The human's message.
    pub human_text: String,
    pub tool_calls: Vec<ToolCallSpec>,
    /// The model's reasoning before each answer (one `reasoning` block per model call).
    pub reasoning: String,
    /// The final answer.
    pub answer: String,
    /// Pad the final answer to about this many bytes (the stream repeats it: the line is
    /// about twice as long).
    pub answer_bytes: usize,
    /// A delegate's report arrives during the turn (`agent-message` + `subagent-settled`).
    pub delegate_report: Option<String>,
    /// A `user-approval` policy-change notice is injected.
    pub approval_notice: bool,
    /// `turn/end` reason; `None` leaves the turn in flight.
    pub end_reason: Option<String>,
}

impl RealTurn {
    pub fn new(human_text: &str, answer: &str) -> Self {
        RealTurn {
            human_text: human_text.to_owned(),
            tool_calls: Vec::new(),
            reasoning: format!("The user wants: {human_text}. Think it through first."),
            answer: answer.to_owned(),
            answer_bytes: 0,
            delegate_report: None,
            approval_notice: false,
            end_reason: Some("completed".to_owned()),
        }
    }
}

/// Builds the events of successive real-shaped turns with contiguous seqs (v3 or v4).
#[derive(Debug, Clone)]
pub struct RealShapeScript {
    version: u32,
    next_seq: u64,
    next_turn: u64,
    clock_ms: i64,
    next_id: u64,
    system_prompt: String,
}

impl RealShapeScript {
    /// A fresh session of format `version` (3 or 4), clock at `start_ms`.
    pub fn new(version: u32, start_ms: i64) -> Self {
        RealShapeScript {
            version,
            next_seq: 0,
            next_turn: 1,
            clock_ms: start_ms,
            next_id: 0,
            system_prompt: SYSTEM_PROMPT.to_owned(),
        }
    }

    /// Every step's `system/message` carries `prompt` (real ones are several KB).
    pub fn with_system_prompt(mut self, prompt: String) -> Self {
        self.system_prompt = prompt;
        self
    }

    /// The header DSH writes.
    pub fn header(&self, id: &str, cwd: &str) -> Header {
        Header {
            version: self.version,
            id: id.to_owned(),
            created_at: Some(self.clock_ms),
            cwd: Some(cwd.to_owned()),
            delegation_depth: Some(0),
            agent_preset: Some("default".to_owned()),
            ..Header::default()
        }
    }

    /// The seq the next event will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn push(&mut self, out: &mut Vec<Value>, kind: &str, data: Value) -> u64 {
        self.clock_ms += 5;
        let seq = self.next_seq;
        out.push(json!({"type": kind, "seq": seq, "time": self.clock_ms, "data": data}));
        self.next_seq += 1;
        seq
    }

    fn id(&mut self) -> String {
        self.next_id += 1;
        format!("{:08x}-0000-4000-8000-{:012x}", self.next_id, self.next_id)
    }

    fn user(&mut self, out: &mut Vec<Value>, source: Value, text: &str) {
        let id = self.id();
        self.push(
            out,
            "user/message",
            json!({"content": [{"type": "text", "text": text}], "source": source, "role": "user", "id": id}),
        );
    }

    /// The events of one turn, in log order (see the module documentation).
    pub fn turn_events(&mut self, spec: &RealTurn) -> Vec<Value> {
        let turn = self.next_turn;
        self.next_turn += 1;
        let first = turn == 1;
        let mut out = Vec::new();
        if first {
            self.push(
                &mut out,
                "permission/preset",
                json!({"preset": "workspace-write"}),
            );
            self.push(&mut out, "sandbox/mode", json!({"mode": "workspace-write"}));
            self.push(&mut out, "approval/policy", json!({"policy": "ask"}));
            self.push(
                &mut out,
                "agent-preset/selected",
                json!({"preset": "default"}),
            );
            self.push(
                &mut out,
                "subagent/catalog",
                json!({"agents": [{"name": "explorer", "description": "reads code"}]}),
            );
            self.push(
                &mut out,
                "subagent/model-selection-policy",
                json!({"policy": "inherit"}),
            );
        }
        let human_id = self.id();
        let human_source = json!({"kind": "user", "rpcId": format!("rpc-{turn}")});
        let human_content = json!([{"type": "text", "text": spec.human_text}]);
        self.push(
            &mut out,
            "agent/inbox/spliced",
            json!({"target": "next-turn", "start": 0, "inserted": [
                {"content": human_content, "source": human_source, "role": "user", "id": human_id}]}),
        );
        self.push(&mut out, "turn/start", json!({ "turn": turn }));
        self.push(
            &mut out,
            "agent/inbox/spliced",
            json!({"target": "next-turn", "start": 0, "removedCount": 1}),
        );
        let mut step = 1u64;
        self.push(&mut out, "step/start", json!({"turn": turn, "step": step}));
        self.push(
            &mut out,
            "system/message",
            json!({"turn": turn, "step": step, "content": self.system_prompt}),
        );
        self.push(
            &mut out,
            "model/selection",
            json!({"provider": "deepseek", "model": "deepseek-reasoner", "reasoningEffort": "high"}),
        );
        self.user(
            &mut out,
            json!({"kind": "agent-instructions", "form": "instructions"}),
            "# AGENTS.md\nKeep changes small. instructionword",
        );
        self.user(
            &mut out,
            json!({"kind": "skill-catalog"}),
            "Available skills: review, release. catalogword",
        );
        let runtime = if self.version >= 4 {
            json!({"kind": "runtime-context", "form": "snapshot"})
        } else {
            json!({"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt", "form": "snapshot",
                "sections": [{"name": "sandbox:policy", "text": "workspace-write"}]})
        };
        self.user(
            &mut out,
            runtime,
            "Current runtime context. Current DSH file policy: workspace-write. runtimeword",
        );
        self.user(
            &mut out,
            json!({"kind": "time-context"}),
            "The current time is 2026-12-01T10:00:00Z. timeword",
        );
        self.user(
            &mut out,
            json!({"kind": "dsh-mnemon"}),
            "Remembered: the user prefers tabs. mnemonword",
        );
        if spec.approval_notice {
            self.user(
                &mut out,
                json!({"kind": "user-approval"}),
                "Approval policy changed to: never ask. approvalword",
            );
        }
        self.push(
            &mut out,
            "user/message",
            json!({"content": human_content, "source": human_source, "role": "user", "id": human_id}),
        );
        self.request(&mut out, turn, step);
        if first {
            self.push(
                &mut out,
                "session/title-llm-request",
                json!({"messages": [{"role": "system", "content": "Title this session."},
                    {"role": "user", "content": spec.human_text}]}),
            );
            self.push(
                &mut out,
                "session/title",
                json!({"title": "A session title", "source": "llm"}),
            );
        }

        if !spec.tool_calls.is_empty() {
            let call_ids: Vec<String> = spec.tool_calls.iter().map(|_| self.id()).collect();
            let mut content = vec![
                json!({"type": "reasoning", "text": spec.reasoning}),
                json!({"type": "text", "text": "Let me look first."}),
            ];
            let mut stream = vec![
                json!({"type": "reasoning-chunks", "time0": self.clock_ms, "index": 0, "dt": [3], "texts": split2(&spec.reasoning)}),
                json!({"type": "text-chunks", "time0": self.clock_ms, "index": 1, "dt": [], "texts": ["Let me look first."]}),
            ];
            for (i, (call, id)) in spec.tool_calls.iter().zip(&call_ids).enumerate() {
                let args = call.arguments.to_string();
                content.push(
                    json!({"type": "tool-call", "id": id, "name": call.name, "arguments": args}),
                );
                stream.push(
                    json!({"type": "tool-call-chunks", "time0": self.clock_ms, "index": i + 2,
                    "id": id, "name": call.name, "dt": [1], "args": split2(&args)}),
                );
            }
            self.assistant(&mut out, turn, step, content, stream);
            let mut call_seqs = Vec::new();
            for (call, id) in spec.tool_calls.iter().zip(&call_ids) {
                let seq = self.push(
                    &mut out,
                    "tool/call",
                    json!({"turn": turn, "step": step, "callId": id, "name": call.name, "arguments": call.arguments.to_string()}),
                );
                call_seqs.push(seq);
            }
            for ((call, id), call_seq) in spec.tool_calls.iter().zip(&call_ids).zip(call_seqs) {
                let data = self.tool_result(turn, step, id, call);
                self.push(&mut out, "tool/result", data);
                if let Some(Value::Object(event)) = out.last_mut() {
                    event.insert("sourceEventSeqs".to_owned(), json!([call_seq]));
                }
            }
            self.push(
                &mut out,
                "todo/write",
                json!({"todos": [{"content": "check the result", "status": "in_progress"}]}),
            );
            self.push(&mut out, "step/end", json!({"turn": turn, "step": step}));
            step += 1;
            self.push(&mut out, "step/start", json!({"turn": turn, "step": step}));
            self.request(&mut out, turn, step);
        }
        if let Some(report) = &spec.delegate_report {
            self.user(
                &mut out,
                json!({"kind": "agent-message", "form": "relay", "agentId": "agent-7"}),
                &format!("Agent agent-7 sent a message: {report}"),
            );
            self.user(
                &mut out,
                json!({"kind": "subagent-settled", "form": "notice", "agentId": "agent-7"}),
                "Background subagent agent-7 finished and will do no further work.",
            );
        }

        let mut answer = spec.answer.clone();
        if spec.answer_bytes > answer.len() {
            let pad = "The details follow, line by line, for the record. ";
            answer.push('\n');
            while answer.len() < spec.answer_bytes {
                answer.push_str(pad);
            }
        }
        let content = vec![
            json!({"type": "reasoning", "text": spec.reasoning}),
            json!({"type": "text", "text": answer}),
        ];
        let stream = vec![
            json!({"type": "reasoning-chunks", "time0": self.clock_ms, "index": 0, "dt": [2], "texts": split2(&spec.reasoning)}),
            json!({"type": "text-chunks", "time0": self.clock_ms, "index": 1, "dt": [4], "texts": split2(&answer)}),
        ];
        let in_flight = spec.end_reason.is_none();
        self.assistant(&mut out, turn, step, content, stream);
        if in_flight {
            return out;
        }
        self.push(
            &mut out,
            "deliverables/presented",
            json!({"turn": turn, "items": []}),
        );
        self.push(
            &mut out,
            "session-log-deepseek/delivery-accepted",
            json!({"turn": turn}),
        );
        self.push(&mut out, "command/run", json!({"command": "/cost"}));
        self.push(
            &mut out,
            "command/done",
            json!({"command": "/cost", "output": "0.01 USD"}),
        );
        self.push(&mut out, "step/end", json!({"turn": turn, "step": step}));
        self.push(&mut out, "session/end-seed", json!({"turn": turn}));
        if let Some(reason) = &spec.end_reason {
            self.push(
                &mut out,
                "turn/end",
                json!({"turn": turn, "reason": {"kind": reason}}),
            );
        }
        out
    }

    fn request(&mut self, out: &mut Vec<Value>, turn: u64, step: u64) {
        self.push(
            out,
            "request/header",
            json!({"turn": turn, "step": step, "tools": [
                {"name": "bash", "description": "Run a shell command", "parameters": {"type": "object"}},
                {"name": "read_file", "description": "Read a file", "parameters": {"type": "object"}}]}),
        );
        self.push(
            out,
            "request/context",
            json!({"turn": turn, "step": step, "messages": 12, "estimatedTokens": 4096}),
        );
    }

    fn assistant(
        &mut self,
        out: &mut Vec<Value>,
        turn: u64,
        step: u64,
        content: Vec<Value>,
        stream: Vec<Value>,
    ) {
        self.clock_ms += 900;
        let id = self.id();
        self.push(
            out,
            "assistant/message",
            json!({"turn": turn, "step": step,
                "message": {"id": id, "role": "assistant", "content": content,
                    "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-reasoner",
                        "replayState": {"reasoningContent": true, "cacheKey": format!("k-{id}")}}},
                "usage": {"inputTokens": 5200, "outputTokens": 640, "cacheReadTokens": 4800,
                    "cacheWriteTokens": 400, "reasoningTokens": 320},
                "stream": stream}),
        );
    }

    fn tool_result(&self, turn: u64, step: u64, call_id: &str, call: &ToolCallSpec) -> Value {
        let content = json!([{"type": "text", "text": call.result}]);
        let meta = json!({"durationMs": 42, "exitCode": if call.is_error { 1 } else { 0 }, "truncated": false});
        if self.version >= 4 {
            json!({"turn": turn, "step": step, "message": {"role": "tool", "toolCallId": call_id,
                "content": content, "isError": call.is_error}, "meta": meta})
        } else {
            json!({"turn": turn, "step": step, "message": {"role": "user",
                "source": {"kind": "tool", "callId": call_id},
                "content": [{"type": "tool-result", "toolCallId": call_id, "content": content, "isError": call.is_error}]},
                "meta": meta})
        }
    }
}

/// `text` in two pieces (on a char boundary), as a stream row's members.
fn split2(text: &str) -> Vec<String> {
    let mut mid = text.len() / 2;
    while !text.is_char_boundary(mid) {
        mid -= 1;
    }
    vec![text[..mid].to_owned(), text[mid..].to_owned()]
}

/// One task in Chinese, continued turn after turn (a latency analysis), then a new task:
/// the Chinese fixture of the integration tests and the benchmarks' terms-per-turn figure.
pub const ZH_TASK_TURNS: [&str; 8] = [
    "订单服务的接口延迟很高，帮我分析一下是不是数据库连接池排队造成的。",
    "继续分析连接池排队：连接池的等待时间和接口延迟是什么关系？",
    "连接池排队的等待时间应该怎么监控？在订单服务里加指标吗？",
    "监控显示连接池排队的等待时间很长，接口延迟也跟着上涨。",
    "把连接池从20调到50，能不能减少排队等待，降低接口延迟？",
    "调大连接池以后，排队等待时间下降了，接口延迟也恢复正常了。",
    "总结一下这次订单服务连接池排队和接口延迟的分析结论。",
    "另外，前端页面上的按钮样式改成圆角，颜色用品牌蓝。",
];

/// Han characters the generated Chinese prose draws from (common ones, no meaning intended).
const HAN: &str = "的一是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之年过发后作里用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实日军者意无力它与长把机十民第公此已工使情明性知全三又关点正业外将两高间由问很最重并物手应战向头文体政美相见被利什二等产或新己制身果加西斯月话合回特代内信表化老给世位次度门任常先海通教儿原东声提立及比员解水名真论处走义各入几口认条平系气题活尔更别打女变四神总何电数安少报才结反受目太量再感建务做接必场件计管期市直德资命山金指克许统区保至队形社便空决治展马科司五基眼书非则听白却界达光放强即像难且权思王象完设式色路记南品住告类求据程北边死张该交规万取拉格望觉术领共确传师观清今切院让识候带导争运笑飞风步改收根干造言联持组每济车亲极林服快办议往元英士证近失转夫令准布始怎呢存未远叫台单影具罗字爱击流备兵连调深商算质团集百需价花党华城石级整府离况亚请技际约示复病息究线似官火断精满支视消越器容照须九增研写称企八功吗包片史委乎查轻易早曾除农找装广显吧阿李标谈吃图念六引历首医局突专费号尽另周较注语仅考落青随选列武红响虽推势参希古众构房半节土投某案黑维革划敌致陈律足态护七兴派孩验责营星够章音跟志底站严巴例防族供效续施留讲型料终答紧黄绝奇察母京段依批群项故按河米围江织害斗双境客纪采举杀攻父苏密低朝友诉止细愿千值仍男钱破网热助倒育属坐帝限船脸职速刻乐否刚威毛状率甚独球般普怕弹校苦创假久错承印晚兰试股拿脑预谁益阳若哪微尼继送急血惊伤素药适波夜省初喜卫源食险待述陆习置居劳财环排福纳欢雷警获模充负云停木游龙树疑层冷洲冲射略范竟句室异激汉村哈策演简卡罪判担州静退既衣您宗积余痛检差富灵协角占配征修皮挥胜降阶审沉坚善妈刘读啊超免压银买皇养伊怀执副乱抗犯追帮宣佛岁航优怪香著田铁控税左右份穿艺背阵草脚概恶块顿敢守酒岛托央户烈洋哥索胡款靠评版宝座释景顾弟登货互付伯慢欧换闻危忙核暗姐介坏讨丽良序升监临亮露永呼味野架域沙掉括舰鱼杂误湾吉减编楚肯测败屋跑梦散温困剑渐封救贵枪缺楼县尚毫移娘朋画班智亦耳恩短掌恐遗固席松秘谢鲁遇康虑幸均销钟诗藏赶剧票损忽巨炮旧端探湖录叶春乡附吸予礼港雨呀板庭妇归睛饭额含顺输摇招婚脱补谓督毒油疗旅泽材灭逐莫笔亡鲜词圣择寻厂睡博勒烟授诺伦岸奥唐卖俄炸载洛健堂旁宫喝借君禁阴园谋宋避抓荣姑孙逃牙束跳顶玉镇雪午练迫爷篇肉嘴馆遍凡础洞卷坦牛宁纸诸训私庄祖丝翻暴森塔默握戏隐熟骨访弱蒙歌店鬼软典欲萨伙遭盘爸扩盖弄雄稳忘亿刺拥徒姆杨齐赛趣曲刀床迎冰虚玩析窗醒妻透购替塞努休虎扬途侵刑绿兄迅套贸毕唯谷轮库迹尤竞街促延震弃甲伟麻川申缓潜闪售灯针哲络抵朱埃抱鼓植纯夏忍页杰筑折郑贝尊吴秀混臣雅振染盛怒舞圆搞狂措姓残秋培迷诚宽宇猛摆梅毁伸摩盟末乃悲拍丁赵硬麦蒋操耶阻订彩抽赞魔纷沿喊违妹浪汇币丰蓝殊献桌啦瓦莱援译夺汽烧距裁偏符勇触课敬哭懂墙袭召罚侠厅拜巧侧韩冒债曼融惯享戴童犹乘挂奖绍厚纵障讯涉彻刊丈爆乌役描洗玛患妙镜唱烦签仙彼弗症仿倾牌陷鸟轰咱菜闭奋庆撤泪茶疾缘播朗杜奶季丹狗尾仪偷奔珠虫驻孔宜艾桥淡翼恨繁寒伴叹旦愈潮粮缩罢聚径恰挑袋灰捕徐珍幕映裂泰隔启尖忠累炎暂估泛荒偿横拒瑞忆孤鼻闹羊呆厉衡胞零穷舍码赫婆魂灾洪腿胆津俗辩胸晓劲贫仁偶辑邦恢赖圈摸仰润堆碰艇稍迟辆废净凶署壁御奉旋冬矿抬蛋晨伏吹鸡倍糊秦盾杯租骑乏隆诊奴摄丧污渡旗甘耐凭扎抢绪粗肩梁幻菲皆碎宙叔岩荡综爬荷悉蒂返井壮薄悄扫敏碍殖详迪矛霍允幅撒剩凯颗骂赏液番箱贴漫酸郎腰舒眉忧浮辛恋餐吓挺励辞艘键伍峰尺昨黎辈贯侦滑券崇扰宪绕趋慈乔阅汗枝拖墨胁插箭腊粉泥氏彭拔骗凤慧媒佩愤扑龄驱惜豪掩兼跃尸肃帕驶堡届欣惠册储飘桑闲惨洁踪勃宾频仇磨递邪撞拟滚奏巡颜剂绩贡疯坡瞧截燃焦殿伪柳锁逼颇昏劝呈搜勤戒驾漂饮曹朵仔柔俩孟腐幼践籍牧凉牲佳娜浓芳稿竹腹跌逻垂遵脉貌柏狱猜怜惑陶兽帐饰贷昌叙躺钢沟寄扶铺邓寿惧询汤盗肥尝匆辉奈扣廷澳嘛董迁凝慰厌脏腾幽怨鞋丢埋泉涌辖躲晋紫艰魏吾慌祝邮吐狠鉴曰械咬邻赤挤弯椅陪割揭韦悟聪雾锋梯猫祥阔誉筹丛牵鸣沈阁穆屈旨袖猎臂蛇贺柱抛鼠瑟戈牢逊迈欺吨琴衰瓶恼燕仲诱狼池疼卢仗冠粒遥吕玄尘冯抚浅敦纠钻晶岂峡苍喷耗凌敲菌赔涂粹扁亏寂煤熊恭湿循暖糖赋抑秩帽哀宿踏烂袁侯抖夹昆肝擦猪炼恒慎搬纽纹玻渔磁铜齿跨押怖漠疲叛遣兹祭醉拳弥斜档稀捷肤疫肿豆削岗晃吞宏癌肚隶履涨耀扭坛拨沃绘伐堪仆郭牺歼墓雇廉契拼惩捉覆刷劫嫌瓜歇雕闷乳串娃缴唤赢莲霸桃妥瘦搭赴岳嘉舱俊址庞耕锐缝悔邀玲惟斥宅添挖呵讼氧浩羽斤酷掠妖祸侍乙妨贪挣汪尿莉悬唇翰仓轨枚盐览傅帅庙芬屏寺胖璃愚滴疏萧姿颤丑劣柯寸扔盯辱匹俱辨饿蜂哦腔郁溃谨糟葛苗肠忌溜鸿爵鹏鹰笼丘桂滋聊挡纲肌茨壳痕碗穴膀卓贤卧膜毅锦欠哩函茫昂薛皱夸豫胃舌剥傲拾窝睁携陵哼棉晴铃填饲渴吻扮逆脆喘罩卜炉柴愉绳胎蓄眠竭喂傻慕浑奸扇柜悦拦诞饱乾泡贼亭夕爹酬儒姻卵氛泄杆挨僧蜜吟猩遂狭肖甜霉滩沫拆悠扯婷冤喻酱蚀雀逢逸闯颂溪诉抄押馈讶羡";

/// Syllables the generated English-like prose's words are made of (a large vocabulary of
/// made-up words, so the text compresses about as real logs do).
const SYLLABLES: [&str; 48] = [
    "al", "an", "ar", "ba", "be", "ca", "co", "da", "de", "di", "el", "en", "er", "es", "fa", "fi",
    "ga", "ha", "in", "is", "ka", "la", "le", "li", "lo", "ma", "me", "mi", "mo", "na", "ne", "no",
    "or", "pa", "pe", "ra", "re", "ri", "ro", "sa", "se", "si", "ta", "te", "ti", "to", "un", "ve",
];

/// Made-up words of the generated prose.
const VOCABULARY: usize = 2_000;

/// One task of a generated session: its words, files and commands; Chinese or English.
struct GenTask {
    chinese: bool,
    topic: &'static str,
    files: &'static [&'static str],
    commands: &'static [&'static str],
}

const GEN_TASKS: [GenTask; 6] = [
    GenTask {
        chinese: true,
        topic: "订单服务 连接池 排队 接口延迟",
        files: &[
            "src/order/pool.rs",
            "src/order/service.rs",
            "config/pool.toml",
        ],
        commands: &["cargo test -p order", "cargo bench --bench pool"],
    },
    GenTask {
        chinese: false,
        topic: "login session cookie expiry",
        files: &["src/auth/login.rs", "src/auth/session.rs", "tests/auth.rs"],
        commands: &["cargo test auth", "git diff src/auth"],
    },
    GenTask {
        chinese: true,
        topic: "前端 按钮 样式 品牌色",
        files: &["web/src/Button.tsx", "web/src/theme.css"],
        commands: &["npm run lint", "npm test -- Button"],
    },
    GenTask {
        chinese: false,
        topic: "migration schema postgres index",
        files: &["migrations/0042_orders.sql", "src/db/schema.rs"],
        commands: &["sqlx migrate run", "psql -c 'select 1'"],
    },
    GenTask {
        chinese: true,
        topic: "日志 采集 告警 阈值",
        files: &["deploy/alerts.yml", "src/metrics/mod.rs"],
        commands: &["kubectl get pods", "helm upgrade metrics ./chart"],
    },
    GenTask {
        chinese: false,
        topic: "parser tokenizer unicode escape",
        files: &["src/parse/lexer.rs", "src/parse/mod.rs", "fuzz/lexer.rs"],
        commands: &["cargo fuzz run lexer", "cargo test parse"],
    },
];

/// Deterministic real-shaped turns of about `bytes_per_turn` decompressed bytes each: tasks
/// of 3–6 turns, half in Chinese, one to three tool calls per turn with code-like output,
/// reasoning, a long answer (its stream repeats it), a delegate's report now and then.
pub struct RealShapeGenerator {
    rng: super::writer::XorShift,
    han: Vec<char>,
    vocabulary: Vec<String>,
    bytes_per_turn: usize,
    task: usize,
    left_on_task: usize,
    produced: usize,
}

impl RealShapeGenerator {
    pub fn new(seed: u64, bytes_per_turn: usize) -> Self {
        let mut rng = super::writer::XorShift::new(seed);
        let vocabulary = (0..VOCABULARY)
            .map(|_| {
                (0..1 + rng.below(3))
                    .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
                    .collect()
            })
            .collect();
        RealShapeGenerator {
            rng,
            han: HAN.chars().collect(),
            vocabulary,
            bytes_per_turn,
            task: 0,
            left_on_task: 0,
            produced: 0,
        }
    }

    /// A system prompt of about `bytes` (the same for every step of the session).
    pub fn system_prompt(&mut self, bytes: usize) -> String {
        let mut out = String::from(SYSTEM_PROMPT);
        while out.len() < bytes {
            out.push_str("\n- ");
            self.prose(&mut out, 24);
            out.push('.');
        }
        out
    }

    /// A word of the vocabulary, skewed to the commonest ones as real text is.
    fn word(&mut self, out: &mut String) {
        let common = 1 + self.rng.below(self.vocabulary.len());
        let n = self.rng.below(common);
        out.push_str(&self.vocabulary[n]);
    }

    fn prose(&mut self, out: &mut String, words: usize) {
        for i in 0..words {
            if i > 0 {
                out.push(' ');
            }
            self.word(out);
        }
    }

    fn han(&mut self, out: &mut String, chars: usize) {
        for i in 0..chars {
            // Skewed to the commonest characters, as real text is.
            let common = 1 + self.rng.below(self.han.len());
            let n = self.rng.below(common);
            out.push(self.han[n]);
            if i % 17 == 16 {
                out.push('，');
            }
        }
        out.push('。');
    }

    /// Text of about `bytes`, in the task's language, mentioning its topic.
    fn text(&mut self, task: &GenTask, bytes: usize) -> String {
        let mut out = String::with_capacity(bytes + 64);
        while out.len() < bytes {
            out.push_str(task.topic);
            out.push(' ');
            if task.chinese {
                self.han(&mut out, 40);
            } else {
                self.prose(&mut out, 16);
                out.push_str(". ");
            }
        }
        out
    }

    /// Tool output of about `bytes`: compiler/test lines with paths, numbers and hashes.
    fn tool_output(&mut self, task: &GenTask, bytes: usize) -> String {
        let mut out = String::with_capacity(bytes + 128);
        while out.len() < bytes {
            let file = self.rng.pick(task.files);
            let line = self.rng.below(2000);
            let hash = self.rng.next_u64() >> 40;
            out.push_str(&format!("{file}:{line}: {hash:06x} "));
            self.prose(&mut out, 6);
            out.push('\n');
        }
        out
    }
}

impl Iterator for RealShapeGenerator {
    type Item = RealTurn;

    fn next(&mut self) -> Option<RealTurn> {
        if self.left_on_task == 0 {
            self.task = (self.task + 1 + self.rng.below(GEN_TASKS.len() - 1)) % GEN_TASKS.len();
            self.left_on_task = 3 + self.rng.below(4);
        }
        self.left_on_task -= 1;
        self.produced += 1;
        let task = &GEN_TASKS[self.task];
        let budget = self.bytes_per_turn;
        let human = if task.chinese {
            let mut h = ZH_TASK_TURNS[self.rng.below(7)].to_owned();
            let chars = 30 + self.rng.below(60);
            self.han(&mut h, chars);
            h
        } else {
            let mut h = format!("Please look at the {} problem again: ", task.topic);
            let words = 20 + self.rng.below(40);
            self.prose(&mut h, words);
            h
        };
        let mut turn = RealTurn::new(&human, "");
        let calls = 1 + self.rng.below(3);
        for _ in 0..calls {
            let call = if self.rng.below(2) == 0 {
                let command = *self.rng.pick(task.commands);
                ToolCallSpec::new(
                    "bash",
                    serde_json::json!({ "command": command }),
                    &self.tool_output(task, budget * 2 / 5 / calls),
                )
            } else {
                let path = *self.rng.pick(task.files);
                ToolCallSpec::new(
                    "read_file",
                    serde_json::json!({ "path": path }),
                    &self.tool_output(task, budget * 2 / 5 / calls),
                )
            };
            turn.tool_calls.push(call);
        }
        turn.reasoning = self.text(task, budget / 40);
        turn.answer = self.text(task, budget / 7);
        if self.produced.is_multiple_of(25) {
            turn.delegate_report = Some(self.text(task, 400));
        }
        turn.approval_notice = self.produced.is_multiple_of(40);
        Some(turn)
    }
}

/// The envelope's keys in the order the harness writes them (`type`, `seq`, `time`,
/// `data`, then the rest: see the log spec's event line); `Value::to_string` would sort
/// them, putting `data` first, which no real log does (and which sends the reader down its
/// slow path: `data` read before its kind is known).
const HARNESS_KEY_ORDER: [&str; 6] = ["type", "seq", "seq0", "time", "time0", "data"];

/// One event as the harness writes its line: the envelope's keys in [`HARNESS_KEY_ORDER`],
/// the rest after them (nested objects as `Value` writes them).
pub fn harness_line(event: &Value) -> String {
    let Value::Object(map) = event else {
        return event.to_string();
    };
    let first = HARNESS_KEY_ORDER
        .iter()
        .filter_map(|k| map.get_key_value(*k));
    let rest = map
        .iter()
        .filter(|(k, _)| !HARNESS_KEY_ORDER.contains(&k.as_str()));
    let fields: Vec<String> = first
        .chain(rest)
        .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// Write a real-shaped v4 (or v3) session of `turns` turns to `path` (zstd, real-like
/// framing: the header alone, then one frame per event, small events grouped by up to
/// eight), each turn about `bytes_per_turn` decompressed with a system prompt of
/// `system_prompt_bytes` on every step. Returns the seq after the last event.
pub fn write_session(
    path: &std::path::Path,
    header: &Header,
    turns: usize,
    bytes_per_turn: usize,
    system_prompt_bytes: usize,
    seed: u64,
) -> std::io::Result<u64> {
    let mut gen = RealShapeGenerator::new(seed, bytes_per_turn);
    let prompt = gen.system_prompt(system_prompt_bytes);
    let mut script = RealShapeScript::new(header.version, header.created_at.unwrap_or(0))
        .with_system_prompt(prompt);
    let mut writer = super::writer::LogWriter::create(path, true, header)?;
    writer.set_sync(false);
    let mut frame: Vec<String> = Vec::new();
    let mut frame_bytes = 0;
    for spec in gen.take(turns) {
        for event in script.turn_events(&spec) {
            let line = harness_line(&event);
            let bytes = line.len();
            if !frame.is_empty() && (bytes > 4096 || frame_bytes > 4096 || frame.len() == 8) {
                writer.append_lines(&frame)?;
                frame.clear();
                frame_bytes = 0;
            }
            frame_bytes += bytes;
            frame.push(line);
        }
    }
    if !frame.is_empty() {
        writer.append_lines(&frame)?;
    }
    Ok(script.next_seq())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::normalize::{parse_event_line, EventLine};
    use crate::turn::TurnAssembler;

    #[test]
    fn lines_are_written_in_the_harness_key_order() {
        let event = json!({"data": {"turn": 1, "b": [1, "x"]}, "time": 5, "type": "turn/start", "seq": 0, "ignorable": true});
        let line = harness_line(&event);
        assert_eq!(
            line,
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"b":[1,"x"],"turn":1},"ignorable":true}"#
        );
        assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), event);
        assert_eq!(harness_line(&json!([1, 2])), "[1,2]");
    }

    #[test]
    fn turns_read_back_with_contiguous_seqs_and_typed_payloads() {
        for version in [3, 4] {
            let mut script = RealShapeScript::new(version, 1_000);
            let mut first = RealTurn::new("fix the login bug", "Fixed.");
            first.tool_calls = vec![ToolCallSpec::new(
                "bash",
                json!({"command": "cargo test"}),
                "ok",
            )];
            first.delegate_report = Some("docs written".into());
            first.approval_notice = true;
            let second = RealTurn::new("now the docs", "Done.");
            let mut asm = TurnAssembler::new();
            let mut turns = Vec::new();
            let mut results = 0;
            for spec in [first, second] {
                for line in script.turn_events(&spec) {
                    let EventLine::Single(event) = parse_event_line(&line.to_string()).unwrap()
                    else {
                        panic!("a packed row at the top level")
                    };
                    if let Some(r) = event.tool_result() {
                        assert_eq!(r.content, "ok");
                        assert_eq!(event.source_event_seqs.as_ref().map(Vec::len), Some(1));
                        results += 1;
                    }
                    if let Some(m) = event.assistant_message() {
                        assert_eq!(m.reasoning.len(), 1, "{version}");
                    }
                    turns.extend(asm.push(event));
                }
            }
            assert_eq!(results, 1);
            assert_eq!(turns.len(), 2);
            assert_eq!(turns[0].first_seq, 0);
            assert_eq!(turns[1].first_seq, turns[0].end_seq + 1);
            assert_eq!(script.next_seq(), turns[1].end_seq + 1);
            let humans = turns[0]
                .events
                .iter()
                .filter_map(|e| e.user_message())
                .filter(|m| m.source.kind == "user")
                .count();
            assert_eq!(humans, 1, "one user/message of the human per turn");
        }
    }
}
